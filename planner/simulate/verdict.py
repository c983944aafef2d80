"""The overload verdict: does the deployment keep up with the arrivals, and does it thrash?"""

from __future__ import annotations

from planner.simulate.model import OverloadVerdict, Rejection

MIN_REQUESTS = 20  # fewer arrivals are too few to tell a growing queue from noise
SERVED_FRACTION = 0.95  # overloaded when requests finish below this share of the arrival rate ...
QUEUE_GROWTH_FRACTION = 0.10  # ... and the queue grows by more than this share of the window's arrivals
MIN_QUEUE_GROWTH = 5
THRASHING_FRACTION = 0.25  # thrashing: more than this share of prefill work redone after preemption


def rejection_sentence(reason: str, count: int, limit: int, largest: int, policy: str) -> str:
    """One sentence for ``count`` requests rejected for ``reason`` (see REJECTION_REASONS)."""
    n = f"{count:,} request{'s' if count != 1 else ''}"
    if reason == "step_budget":
        return (f"{n} with a prompt longer than the {limit:,}-token step budget (up to {largest:,} tokens): {policy} runs a whole prompt in one step; "
                "the chunked policy splits prompts, or raise the max batched tokens")  # fmt: skip
    if reason == "pool":
        return f"{n} whose prompt + output (up to {largest:,} tokens) exceeds the whole KV pool of {limit:,} tokens: no engine could hold them"
    return f"{n} longer than the {limit:,}-token static reservation (up to {largest:,} tokens)"


def with_rejections(verdict: OverloadVerdict, rejections: list[Rejection], total: int) -> OverloadVerdict:
    """The verdict with the rejected requests counted, each reason in words: they never ran, so no
    latency percentile includes them, and a run that rejects some does not simply keep up."""
    rejected = sum(x.count for x in rejections)
    if not rejected:
        return verdict
    share = f"{rejected:,} of {total:,} requests ({rejected / total:.0%}) were rejected at arrival and are in no latency figure: "
    return verdict.model_copy(update={"rejected": rejected, "message": verdict.message + " " + share + "; ".join(x.message for x in rejections) + "."})


def verdict_label(overload: OverloadVerdict, total: int, stopped_early: str | None = None) -> str:
    """The verdict in a few words, for a table cell: rejections first, as they change the answer."""
    words = "overloaded" if overload.overloaded else "keeps up" if overload.arrival_rate_per_s else "no verdict"
    if overload.rejected:
        words = f"rejects {overload.rejected:,} of {total:,}" + ("; the rest " + words if overload.arrival_rate_per_s else "")
    return words + (", thrashing" if overload.thrashing else "") + (", stopped early" if stopped_early else "")


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
