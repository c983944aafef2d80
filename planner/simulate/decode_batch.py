"""The decoders: the lazy batch of sequences that advance one token per step, and the stalled
ones outside it (new, or skipped when the step had no room for them).

Touching every decoding sequence every step would make a step cost O(running sequences). The
batch instead keeps a global ``tick`` (decode steps so far) and, per member, the tick at which it
joined with its token counters at that moment; a member's counters are worked out only when it
leaves. What must happen to a member on a given tick is scheduled in advance: crossing a block
boundary (it needs one more KV block before that step) and its end (done or cancelled after that
step). Scheduled events carry the member's ``version`` so that a member who left (preempted,
skipped) and came back does not act on stale ones.
"""

from __future__ import annotations

from planner.simulate.request import SimRequest


class DecodeBatch:
    __slots__ = ("members", "stalled", "tick", "context_tokens", "last_tick_s", "block_tokens", "dynamic", "_crossings", "_ends")

    def __init__(self, block_tokens: int, dynamic: bool) -> None:
        self.members: dict[SimRequest, None] = {}  # insertion order = join order
        self.stalled: list[SimRequest] = []  # decoders outside the batch, in the order they stalled
        self.tick = 0
        self.context_tokens = 0  # sum of the members' cached tokens (K/V read per decode step)
        self.last_tick_s = 0.0  # when the last decode step ended
        self.block_tokens = block_tokens
        self.dynamic = dynamic  # blocks grow with the sequence (else reserved up front)
        self._crossings: dict[int, list[tuple[SimRequest, int]]] = {}  # tick -> members needing a block before it
        self._ends: dict[int, list[tuple[SimRequest, int]]] = {}  # tick -> members ending after it

    def __len__(self) -> int:
        return len(self.members)

    def __contains__(self, r: SimRequest) -> bool:
        return r in self.members

    def cached_tokens(self, r: SimRequest) -> int:
        return r.base_computed + self.tick - r.base_tick

    def join(self, r: SimRequest, end_generated: int) -> None:
        """``r`` decodes from this tick on until it has ``end_generated`` tokens."""
        tick = self.tick
        cached = r.computed
        r.base_tick = tick
        r.base_generated = r.generated
        r.base_computed = cached
        self.members[r] = None
        self.context_tokens += cached
        end = tick + (end_generated - r.generated)
        _add(self._ends, end, r)
        if self.dynamic:
            # cached % block == 0 is handled by the replica this tick; the next crossing is a block later
            crossing = tick + (self.block_tokens - cached % self.block_tokens)
            if crossing < end:
                _add(self._crossings, crossing, r)

    def leave(self, r: SimRequest) -> None:
        """Take ``r`` out, writing back the tokens it generated while in the batch."""
        steps = self.tick - r.base_tick
        cached = r.base_computed + steps
        r.generated = r.base_generated + steps
        r.computed = cached
        if steps:
            r.last_token_s = self.last_tick_s
        self.context_tokens -= cached
        del self.members[r]
        r.version += 1

    def newest(self) -> SimRequest:
        return next(reversed(self.members))

    def stall(self, r: SimRequest) -> None:
        """``r`` decodes from the next step on; it joins the batch when there is room."""
        self.stalled.append(r)

    def remove(self, r: SimRequest) -> None:
        """``r`` stops decoding (preempted): out of the batch, its counters written back, or out
        of the stalled list."""
        if r in self.members:
            self.leave(r)
        else:
            self.stalled.remove(r)

    def schedule(self, room: int, crossing: set[SimRequest]) -> tuple[list[SimRequest], list[SimRequest]]:
        """Who decodes in the coming step, at most ``room``: the most recently joined members step
        out (they stall), then stalled decoders join, in the order they stalled, while there is
        room. Returns the joiners and the decoders of ``crossing`` that run (they get their new
        block; each has its next crossing scheduled a block later)."""
        members = self.members
        while len(members) > room:
            r = self.newest()
            self.leave(r)
            self.stalled.append(r)
        room -= len(members)
        stalled = self.stalled
        joiners: list[SimRequest] = []
        if stalled and room > 0:
            if room >= len(stalled):
                joiners, self.stalled = stalled, []
            else:
                joiners, self.stalled = stalled[:room], stalled[room:]
            for r in joiners:
                self.join(r, r.decode_end())
        grown = []
        if crossing:
            tick = self.tick
            for r in crossing:
                if r in members:
                    grown.append(r)
                    if r.base_tick != tick:  # joiners scheduled their next crossing in join()
                        self.next_crossing_in_a_block(r)
        return joiners, grown

    def crossings_now(self) -> set[SimRequest]:
        """Decoders whose next token needs a new block in the coming step: members due now, and
        stalled ones at a block boundary."""
        due = self._crossings.pop(self.tick, None)
        members = self.members
        crossing = {r for r, v in due if r.version == v and r in members} if due else set()
        if self.stalled:
            block = self.block_tokens
            for r in self.stalled:
                if r.computed % block == 0:
                    crossing.add(r)
        return crossing

    def next_crossing_in_a_block(self, r: SimRequest) -> None:
        tick = self.tick + self.block_tokens
        ev = self._crossings.get(tick)
        if ev is None:
            self._crossings[tick] = [(r, r.version)]
        else:
            ev.append((r, r.version))

    def advance(self, t: float) -> list[SimRequest]:
        """Every member produced one token in the step that ended at ``t``; returns the members
        whose run ends with it (still members: the caller makes them leave)."""
        self.context_tokens += len(self.members)
        self.tick += 1
        self.last_tick_s = t
        due = self._ends.pop(self.tick, None)
        if not due:
            return []
        members = self.members
        return [r for r, v in due if r.version == v and r in members]


def _add(events: dict[int, list[tuple[SimRequest, int]]], tick: int, r: SimRequest) -> None:
    ev = events.get(tick)
    if ev is None:
        events[tick] = [(r, r.version)]
    else:
        ev.append((r, r.version))
