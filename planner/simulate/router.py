"""Routers: which replica a new request goes to. One small class per rule."""

from __future__ import annotations

from typing import ClassVar

from planner.simulate.replica import Replica
from planner.simulate.request import SimRequest


class Router:
    name: ClassVar[str]
    needs_current_load: ClassVar[bool] = False  # True: every replica is brought up to the arrival time first

    def __init__(self, replicas: list[Replica]) -> None:
        self.replicas = replicas

    def choose(self, r: SimRequest) -> Replica:
        raise NotImplementedError


class RoundRobinRouter(Router):
    """Replica 0, 1, ..., R-1, 0, ... in arrival order."""

    name = "round-robin"

    def __init__(self, replicas: list[Replica]) -> None:
        super().__init__(replicas)
        self._next = 0

    def choose(self, r: SimRequest) -> Replica:
        rep = self.replicas[self._next]
        self._next = (self._next + 1) % len(self.replicas)
        return rep


class LeastOutstandingTokensRouter(Router):
    """The replica with the fewest prompt + output tokens of unfinished requests at arrival
    (ties: the lowest number)."""

    name = "least-outstanding-tokens"
    needs_current_load = True

    def choose(self, r: SimRequest) -> Replica:
        return min(self.replicas, key=_load)


def _load(rep: Replica) -> tuple[int, int]:
    return rep.outstanding_tokens, rep.number


ROUTER_CLASSES: dict[str, type[Router]] = {c.name: c for c in (RoundRobinRouter, LeastOutstandingTokensRouter)}
