#!/usr/bin/env bash
# GPU check of the live probe (planner/probe/): both modes for three presets, with
# --layers-limit for the runtime mode, one JSON per probe into "$OUT" plus summary.txt.
#
#   OUT=/tmp/probe bash benchmarks/gpu_probe_check.sh        # on a CUDA machine, repo root
#   DEVICE=cpu SMOKE=1 OUT=/tmp/p bash benchmarks/gpu_probe_check.sh   # syntax check on CPU (tiny sizes)
#
# Whole script capped at about 170 s: each probe gets the time left (at most 60 s) as --timeout
# and is skipped when under 15 s remain.
set -u
OUT="${OUT:-./probe_out}"
DEVICE="${DEVICE:-cuda}"
SMOKE="${SMOKE:-0}"
mkdir -p "$OUT"
cd "$(dirname "$0")/.." || exit 1

PY="${PY:-}"
if [ -z "$PY" ]; then
  for c in .venv/bin/python python3 python; do
    if command -v "$c" >/dev/null 2>&1 && "$c" -c "import torch, transformers, pydantic" 2>/dev/null; then PY="$c"; break; fi
  done
fi
if [ -z "$PY" ]; then echo "no python with torch, transformers and pydantic" | tee "$OUT/ERROR.txt"; exit 1; fi

"$PY" - > "$OUT/env.json" <<'EOF'
import json, platform, torch, transformers
info = {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__, "cuda": torch.cuda.is_available()}
if torch.cuda.is_available():
    free, total = torch.cuda.mem_get_info()
    info.update(device=torch.cuda.get_device_name(0), free_bytes=free, total_bytes=total)
print(json.dumps(info))
EOF
cat "$OUT/env.json"

if [ "$SMOKE" = "1" ]; then T_BIG=64; T_RT=32; B=1; STEPS=2; else T_BIG=8192; T_RT=2048; B=4; STEPS=16; fi
DEADLINE=$(( $(date +%s) + 170 ))
: > "$OUT/summary.txt"

run() {
  local name="$1"; shift
  local left=$(( DEADLINE - $(date +%s) ))
  if [ "$left" -lt 15 ]; then echo "$name skipped (time)" | tee -a "$OUT/summary.txt"; return; fi
  local t=$(( left < 60 ? left : 60 ))
  local t0; t0=$(date +%s)
  timeout $(( t + 10 )) "$PY" -m planner probe "$@" --device "$DEVICE" --timeout "$t" --json > "$OUT/$name.json" 2> "$OUT/$name.err"
  echo "$name rc=$? $(( $(date +%s) - t0 ))s" | tee -a "$OUT/summary.txt"
}

# dense GQA (Llama-3.1-8B shape): paged vLLM layout, fp8, transformers layout, random 2-layer model
run llama8b-alloc-vllm      --preset llama-3.1-8b --mode allocate --tokens "$T_BIG" --batch "$B"
run llama8b-alloc-fp8       --preset llama-3.1-8b --mode allocate --tokens "$T_BIG" --batch "$B" --kv-dtype fp8
run llama8b-alloc-tf        --preset llama-3.1-8b --mode allocate --runtime transformers --tokens "$T_BIG" --batch "$B"
run llama8b-runtime         --preset llama-3.1-8b --mode runtime --layers-limit 2 --tokens "$T_RT" --batch "$B" --decode-steps "$STEPS"
# sliding 5:1 (Gemma 3, window 1024): the first 6 layers hold 5 sliding + 1 full; prompt above the window
run gemma27b-alloc          --preset gemma-3-27b-it --mode allocate --layers-limit 6 --tokens "$T_BIG"
run gemma27b-runtime        --preset gemma-3-27b-it --mode runtime --layers-limit 6 --tokens "$T_RT" --decode-steps "$STEPS"
# MLA (DeepSeek-V2-Lite): latent in both layouts; planner.kv's transformers runtime counts it decompressed
run dsv2lite-alloc          --preset deepseek-v2-lite --mode allocate --tokens "$T_BIG" --batch "$B"
run dsv2lite-runtime        --preset deepseek-v2-lite --mode runtime --layers-limit 2 --tokens "$T_RT" --decode-steps "$STEPS"
run llama8b-runtime-static  --preset llama-3.1-8b --mode runtime --layers-limit 2 --tokens "$T_RT" --decode-steps "$STEPS" --static

"$PY" - "$OUT" <<'EOF' | tee -a "$OUT/summary.txt"
import json, pathlib, sys
for p in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    if p.name == "env.json":
        continue
    try:
        r = json.loads(p.read_text())
    except Exception:
        print(f"{p.stem:24s} no JSON ({(p.with_suffix('.err').read_text().strip().splitlines() or ['?'])[-1][:150]})")
        continue
    f = lambda k, fmt="{:,}": "-" if r.get(k) is None else fmt.format(r[k])
    print(f"{p.stem:24s} ok={r['ok']} {r['device']} pred={f('predicted_kv_bytes')} meas={f('measured_kv_bytes')} ratio={f('ratio', '{:.6f}')} "
          f"planner={f('planner_kv_bytes')} prefill={f('prefill_ms', '{:.2f}')}ms/{f('predicted_prefill_ms', '{:.3f}')} p50={f('decode_ms_p50', '{:.3f}')}ms/{f('predicted_decode_step_ms', '{:.3f}')} "
          f"mfu={f('calibrated_mfu', '{:.3g}')} mbu={f('calibrated_mbu', '{:.3g}')} {r.get('error') or ''}")
EOF
