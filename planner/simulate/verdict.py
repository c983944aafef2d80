"""The overload verdict: does the deployment keep up with the arrivals, and does it thrash?"""

from __future__ import annotations

from planner.simulate.model import OverloadVerdict

MIN_REQUESTS = 20  # fewer arrivals are too few to tell a growing queue from noise
SERVED_FRACTION = 0.95  # overloaded when requests finish below this share of the arrival rate ...
QUEUE_GROWTH_FRACTION = 0.10  # ... and the queue grows by more than this share of the window's arrivals
MIN_QUEUE_GROWTH = 5
THRASHING_FRACTION = 0.25  # thrashing: more than this share of prefill work redone after preemption


def overload_verdict(arrivals: list[float], finish_times: list[float], queue_at_mid: int, queue_at_end: int, prefill_tokens: int, preempted_tokens: int) -> OverloadVerdict:
    """Judge the second half of the arrivals (middle arrival to last): arrival rate, the rate at
    which requests finished in the same window, and the waiting queue at both ends.

    ``arrivals`` is sorted; ``finish_times`` holds when each finished request ended.
    """
    n = len(arrivals)
    thrashing = prefill_tokens > 0 and preempted_tokens > THRASHING_FRACTION * prefill_tokens
    thrash_note = f" Thrashing: {preempted_tokens / prefill_tokens:.0%} of the prefill work was recomputed after preemptions." if thrashing else ""
    mid = n // 2
    span = arrivals[-1] - arrivals[mid] if n else 0.0
    if n < MIN_REQUESTS or span <= 0:
        why = f"too few requests ({n}) to judge a trend" if n < MIN_REQUESTS else "every request arrives at once (a burst): no arrival rate to compare"
        return OverloadVerdict(overloaded=False, thrashing=thrashing, arrival_rate_per_s=None, served_rate_per_s=None, sustainable_rate_per_s=None,
                               queue_at_mid=queue_at_mid, queue_at_end=queue_at_end, message=f"No verdict: {why}.{thrash_note}")  # fmt: skip
    t0, t1 = arrivals[mid], arrivals[-1]
    arrived = n - 1 - mid
    arrival_rate = arrived / span
    served = sum(1 for t in finish_times if t0 < t <= t1) / span
    growth = queue_at_end - queue_at_mid
    overloaded = served < SERVED_FRACTION * arrival_rate and growth > max(MIN_QUEUE_GROWTH, QUEUE_GROWTH_FRACTION * arrived)
    if overloaded:
        message = (
            f"Overloaded: requests arrive at {arrival_rate:,.3g}/s but finish at {served:,.3g}/s; the waiting queue grew from "
            f"{queue_at_mid:,} to {queue_at_end:,} over the second half of the arrivals, so latency grows without bound. "
            "Lower the rate or add replicas."
        )
    else:
        message = f"Keeps up: requests arrive at {arrival_rate:,.3g}/s and finish at {served:,.3g}/s; waiting queue {queue_at_mid:,} then {queue_at_end:,}."
    return OverloadVerdict(
        overloaded=overloaded,
        thrashing=thrashing,
        arrival_rate_per_s=arrival_rate,
        served_rate_per_s=served,
        sustainable_rate_per_s=served if overloaded else None,
        queue_at_mid=queue_at_mid,
        queue_at_end=queue_at_end,
        message=message + thrash_note,
    )
