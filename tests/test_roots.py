"""planner.roots.illinois: the bracketed root finder behind the cache's characteristic time and
the disaggregated deployment's rate. Expected points are worked by hand beside each case."""

from __future__ import annotations

import math

from planner.roots import illinois


def _recording(f):
    calls: list[float] = []

    def g(x: float) -> float:
        calls.append(x)
        return f(x)

    return g, calls


def test_a_line_is_solved_by_its_first_secant_point():
    # f = x - 1 on [0, 4]: (0 x 3 - 4 x -1) / (3 - -1) = 1 exactly, f(1) = 0
    f, calls = _recording(lambda x: x - 1)
    assert illinois(f, 0.0, 4.0, -1.0, 3.0, f_tol=0.0, x_rel=1e-12, iterations=50) == 1.0
    assert calls == [1.0]


def test_an_infinite_far_end_is_halved_first():
    # past x = 3 the function is inf (a rate past saturation): the first step bisects [0, 4] to 2
    # (f = 1 >= 0: the new top), then the secant of [0, 2] with -1, 1 is (0 + 2) / 2 = 1, the root
    f, calls = _recording(lambda x: x - 1 if x < 3 else math.inf)
    assert illinois(f, 0.0, 4.0, -1.0, math.inf, f_tol=0.0, x_rel=1e-12, iterations=50) == 1.0
    assert calls == [2.0, 1.0]


def test_illinois_halves_an_end_kept_twice():
    # a step from -1 to +1 at x = 1 on [0, 2]: 1 (f = +1, new top), 0.5 (-1), 0.75 (-1, the top kept
    # twice: its value halves to 0.5), then (0.75 x 0.5 + 1) / 1.5 = 0.91666...
    f, calls = _recording(lambda x: -1.0 if x < 1 else 1.0)
    illinois(f, 0.0, 2.0, -1.0, 1.0, f_tol=0.5, x_rel=1e-9, iterations=4)
    assert calls == [1.0, 0.5, 0.75, (0.75 * 0.5 + 1) / 1.5]


def test_without_a_root_it_returns_the_end_below():
    # the step never has |f| <= 0.5: the bracket closes on x = 1 from both sides and the low end,
    # below the jump, comes back; one step only leaves the starting low end, 0
    step = lambda x: -1.0 if x < 1 else 1.0  # noqa: E731
    lo = illinois(step, 0.0, 2.0, -1.0, 1.0, f_tol=0.5, x_rel=1e-9, iterations=200)
    assert 1 - 1e-9 <= lo < 1
    assert illinois(step, 0.0, 2.0, -1.0, 1.0, f_tol=0.5, x_rel=1e-9, iterations=1) == 0.0


def test_a_curve_within_the_tolerance():
    # x^2 = 2 on [0, 2]: the answer's square is within f_tol of 2
    x = illinois(lambda x: x * x - 2, 0.0, 2.0, -2.0, 2.0, f_tol=1e-12, x_rel=1e-15, iterations=100)
    assert abs(x * x - 2) <= 1e-12
    assert abs(x - math.sqrt(2)) < 1e-12
