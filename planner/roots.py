"""The root of an increasing function on a bracket: regula falsi, Illinois variant.

Used where the planner solves a balance that has no closed form: the cache's characteristic time
(occupancy = capacity, :mod:`planner.cache.hitrate`) and the rate that keeps a disaggregated
deployment's users in flight (Little, :func:`planner.disagg.at_users`). The integer searches
(``largest_within``, ``largest_within_galloping``, ``smallest_passing``) live in
:mod:`planner.capacity`.
"""

from __future__ import annotations

import math
from collections.abc import Callable


def illinois(f: Callable[[float], float], lo: float, hi: float, f_lo: float, f_hi: float, *, f_tol: float, x_rel: float, iterations: int) -> float:
    """An ``x`` in [``lo``, ``hi``] with ``|f(x)| <= f_tol``, for an increasing ``f`` with
    ``f_lo = f(lo) < 0 <= f_hi = f(hi)`` (``f_hi`` may be inf, a rate past saturation: the step
    is then a bisection). The secant point of the bracket replaces the end whose sign it shares;
    an end kept twice in a row has its value halved (Illinois), so both ends close in.

    When no such ``x`` is found (the bracket narrows to ``x_rel`` of its top, or ``iterations``
    steps pass) it returns ``lo``, the end known to lie below the root."""
    side = 0
    for _ in range(iterations):
        if hi - lo <= x_rel * hi:
            break
        x = (lo + hi) / 2 if not math.isfinite(f_hi) else (lo * f_hi - hi * f_lo) / (f_hi - f_lo)
        f_x = f(x)
        if abs(f_x) <= f_tol:
            return x
        if f_x < 0:
            lo, f_lo = x, f_x
            if side == -1:
                f_hi /= 2
            side = -1
        else:
            hi, f_hi = x, f_x
            if side == 1:
                f_lo /= 2
            side = 1
    return lo
