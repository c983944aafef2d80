"""Probe benchmark (CPU, a few seconds): tiny random models, predicted vs measured cache bytes.

Runs in-process (no child process) so it stays fast; prints one line per case and exits 1 if a
measured byte count differs from its prediction.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from planner.probe import make_options, run_probe  # noqa: E402

BASE = {"num_hidden_layers": 2, "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4, "vocab_size": 256, "max_position_embeddings": 512}
CASES = {
    "gqa": {"model_type": "llama", **BASE, "num_key_value_heads": 2},
    "sliding": {"model_type": "mistral", **BASE, "num_key_value_heads": 2, "sliding_window": 64},
    "hybrid": {"model_type": "gemma3_text", **BASE, "num_hidden_layers": 6, "num_key_value_heads": 1, "head_dim": 32, "sliding_window": 64},
}


def main() -> int:
    bad = 0
    for name, config in CASES.items():
        for mode in ("allocate", "runtime"):
            t0 = time.perf_counter()
            opts = make_options(mode=mode, device="cpu", kv_dtype="fp32", tokens=256, decode_steps=16, batch=2)
            r = run_probe(config, opts, isolate=False)
            ok = r.ok and r.measured_kv_bytes == r.predicted_kv_bytes
            bad += not ok
            timing = f"prefill {r.prefill_ms:.2f} ms, decode p50 {r.decode_ms_p50:.3f} ms" if r.prefill_ms is not None else f"allocate {r.allocate_ms:.3f} ms"
            print(f"{name:8s} {mode:8s} predicted {r.predicted_kv_bytes:>9,} B measured {r.measured_kv_bytes or 0:>9,} B planner {r.planner_kv_bytes:>9,} B  {timing}  ({time.perf_counter() - t0:.2f} s){'' if ok else '  MISMATCH'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
