"""Faults the fake GitHub injects: server errors, rate limits, dropped connections, slowness."""

from __future__ import annotations

import random
import threading
from collections import deque
from enum import Enum


class Fault(Enum):
    SERVER_ERROR = "500"
    BAD_GATEWAY = "502"
    SECONDARY_RATE_LIMIT = "secondary_rate_limit"  # 403 with Retry-After
    SECONDARY_RATE_LIMIT_BARE = "secondary_rate_limit_bare"  # 403, no Retry-After
    TOO_MANY_REQUESTS = "429"
    RESET = "reset"  # the connection drops before the request is handled
    RESET_AFTER_WRITE = "reset_after_write"  # handled (a POST took effect), then the line drops
    SLOW = "slow"
    GRAPHQL_TIMEOUT = "graphql_timeout"  # HTTP 200, `errors`: GitHub's "something went wrong"
    BAD_REQUEST = "400"  # what GitHub answers a body it cannot parse


class FaultPlan:
    """Which requests fail: an explicit queue first, then a seeded random share of requests."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: deque[Fault] = deque()
        self._rate = 0.0
        self._kinds: tuple[Fault, ...] = ()
        self._random = random.Random(0)
        self.injected: list[Fault] = []

    def queue(self, *faults: Fault) -> None:
        with self._lock:
            self._queue.extend(faults)

    def randomly(self, rate: float, kinds: tuple[Fault, ...], seed: int = 0) -> None:
        with self._lock:
            self._rate, self._kinds, self._random = rate, kinds, random.Random(seed)

    def clear(self) -> None:
        with self._lock:
            self._queue.clear()
            self._rate = 0.0

    def next(self) -> Fault | None:
        with self._lock:
            fault: Fault | None = None
            if self._queue:
                fault = self._queue.popleft()
            elif self._rate and self._random.random() < self._rate:
                fault = self._random.choice(self._kinds)
            if fault is not None:
                self.injected.append(fault)
            return fault
