"""Reading untrusted ``config.json`` text into a plain dict, with size and type bounds.

Real Hub configs contain bare ``Infinity``/``NaN`` (Nemotron-H's ``time_step_limit``), which
Python's json module accepts; anything that is not a JSON object, is larger than
:data:`MAX_CONFIG_BYTES`, or nests absurdly deep is refused with a :class:`ConfigError`.
"""

from __future__ import annotations

import json

from planner.errors import ConfigError
from planner.limits import safe_json_loads, safe_text

# 16 MiB. Most configs are a few KiB, but checkpoints with long per-layer quantization lists are
# larger: the largest measured is nvidia/MiniMax-M3-NVFP4's config.json at 3,087,083 bytes (and its
# hf_quant_config.json at 3,081,956), as vendored by aiconfigurator-core 0.12.0. 16 MiB leaves
# five times that headroom while bounding the work: json.loads of 16 MiB takes about 0.3 s here.
MAX_CONFIG_BYTES = 16 * 1024 * 1024
MAX_CONFIG_LABEL = "16 MiB"
MAX_DEPTH = 32


def _depth(obj: object, level: int = 0) -> int:
    if level > MAX_DEPTH:
        return level
    if isinstance(obj, dict):
        return max((_depth(v, level + 1) for v in obj.values()), default=level + 1)
    if isinstance(obj, list):
        return max((_depth(v, level + 1) for v in obj), default=level + 1)
    return level


def parse_config_text(data: bytes | str, *, source: str = "config") -> dict:
    """Parse config JSON text into a dict.

    Raises:
        ConfigError: the text is over :data:`MAX_CONFIG_BYTES` (16 MiB), not UTF-8, not valid JSON, not a JSON object,
            or nested more than 32 levels deep.
    """
    raw = safe_text(data).encode("utf-8") if isinstance(data, str) else bytes(data)
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError(source, f"{len(raw):,} bytes", f"config is larger than {MAX_CONFIG_BYTES:,} bytes ({MAX_CONFIG_LABEL})")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(source, f"byte {exc.start}", "config is not UTF-8 text") from None
    if not text.strip():
        raise ConfigError(source, "", "config is empty")
    try:
        obj = safe_json_loads(text)  # lone surrogates ("\\ud800") become U+FFFD here, once for every way in
    except json.JSONDecodeError as exc:
        raise ConfigError(source, f"line {exc.lineno} column {exc.colno}", f"not valid JSON: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(source, "nesting", f"JSON nests deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:  # e.g. an integer literal of more than 4,300 digits
        raise ConfigError(source, "number", f"not a usable JSON number: {exc}") from None
    if not isinstance(obj, dict):
        raise ConfigError(source, type(obj).__name__, "config must be a JSON object ({...})")
    if _depth(obj) > MAX_DEPTH:
        raise ConfigError(source, "nesting", f"JSON nests deeper than {MAX_DEPTH} levels")
    return obj


def read_config_file(path, *, source: str) -> dict:
    """Read and parse a config file, reading at most 16 MiB + 1 byte (so /dev/zero is refused).

    Raises:
        ConfigError: the file is too large or not a valid config (see :func:`parse_config_text`).
        OSError: the file cannot be opened or read.
    """
    with open(path, "rb") as fh:
        data = fh.read(MAX_CONFIG_BYTES + 1)
    return parse_config_text(data, source=source)
