"""The text of a disaggregated deployment's two pools, read in one place.

``"2P:4@H200-141GB,1D:8@B200-180GB"``: 2 prefill replicas of TP 4 on H200, 1 decode replica of
TP 8 on B200; a pool without ``@GPU`` runs on the plan's GPU. The plan input ``disagg``
(:class:`planner.plan.PlanInputs`: the ``--disagg`` flag of ``plan``, ``report``, ``launch`` and
``bench-import``, the Plan page's text box, the share link and the plan file) and every consumer
(:mod:`planner.disagg`, :mod:`planner.launch`, :mod:`planner.benchimport`) read it with
:func:`parse_pools`. No plan module is imported here: PlanInputs validates with it.
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from planner.errors import PlannerError
from planner.hardware import get_device

MAX_POOL_REPLICAS = 1024
MAX_POOL_TP = 64
MAX_POOLS_CHARS = 128  # planner.share.MAX_TEXT: two pools with 40-character GPU names fit
POOLS_RE = re.compile(r"^\s*(\d{1,4})\s*[pP]\s*:\s*(\d{1,4})(?:\s*@\s*([A-Za-z0-9._-]{1,40}))?\s*,\s*(\d{1,4})\s*[dD]\s*:\s*(\d{1,4})(?:\s*@\s*([A-Za-z0-9._-]{1,40}))?\s*$")
DISAGG_FORMAT = "xP:TP[@GPU],yD:TP[@GPU], e.g. 2P:4@H200-141GB,1D:8@B200-180GB"


class PoolSpec(BaseModel):
    """One pool of a disaggregated deployment: ``replicas`` replicas of ``tp`` GPUs of kind ``gpu``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str  # "prefill" or "decode"
    gpu: str
    tp: int
    replicas: int
    ep: int = 1

    @property
    def gpu_count(self) -> int:
        return self.tp * self.replicas

    def label(self) -> str:
        ep = f", EP {self.ep}" if self.ep > 1 else ""
        return f"{self.replicas} × {self.gpu} TP {self.tp}{ep}"


def _pools(text: str) -> list[tuple[str, int, int, str | None]]:
    """(role, replicas, tp, GPU or None) of both pools, the counts and named GPUs checked."""
    m = POOLS_RE.match(text[:200]) if isinstance(text, str) and len(text) <= MAX_POOLS_CHARS else None
    if not m:
        raise PlannerError("disagg", text, f"write the pools as {DISAGG_FORMAT}")
    out = []
    for role, (count, tp, gpu) in (("prefill", m.group(1, 2, 3)), ("decode", m.group(4, 5, 6))):
        replicas, size = int(count), int(tp)
        if not 1 <= replicas <= MAX_POOL_REPLICAS:
            raise PlannerError("disagg", text, f"the {role} pool needs 1 to {MAX_POOL_REPLICAS:,} replicas, not {replicas}")
        if not 1 <= size <= MAX_POOL_TP:
            raise PlannerError("disagg", text, f"the {role} pool's tensor parallelism must be 1 to {MAX_POOL_TP}, not {size}")
        if gpu is not None:
            try:
                gpu = get_device(gpu).name
            except PlannerError as exc:
                raise PlannerError("disagg", text, f"the {role} pool's GPU {gpu!r}: {exc.reason.split(' (or give')[0]}") from None
        out.append((role, replicas, size, gpu))
    return out


def check_pools(text: str) -> str:
    """``text`` if it is a pools text (its form, counts and any GPU it names); what the plan input's validator runs.

    Raises:
        PlannerError: field ``disagg``, the text and the expected form or the count / GPU that is wrong.
    """
    _pools(text)
    return text


def parse_pools(text: str, default_gpu: str) -> tuple[PoolSpec, PoolSpec]:
    """``"2P:4@H200-141GB,1D:8@B200-180GB"`` -> (prefill pool, decode pool); a pool without
    ``@GPU`` runs on ``default_gpu``.

    Raises:
        PlannerError: the text is not in that form, a count is 0 or above the limits, or a GPU is unknown.
    """
    specs = []
    for role, replicas, size, gpu in _pools(text):
        if gpu is None:
            try:
                gpu = get_device(default_gpu).name
            except PlannerError as exc:
                raise PlannerError("disagg", text, f"the {role} pool names no GPU and the plan's, {default_gpu!r}, is not a catalog GPU ({exc.reason.split(';')[0]})") from None
        specs.append(PoolSpec(role=role, gpu=gpu, tp=size, replicas=replicas))
    return specs[0], specs[1]


def format_pools(prefill: PoolSpec, decode: PoolSpec) -> str:
    """The :func:`parse_pools` text of two pools (what share links and plan files carry)."""
    return f"{prefill.replicas}P:{prefill.tp}@{prefill.gpu},{decode.replicas}D:{decode.tp}@{decode.gpu}"
