"""The server's lanes: bounded pools of work with bounded queues, which refuse what they cannot take.

A request that computes runs in a lane (:class:`Lane`): at most ``workers`` at a time, at most
``waiting`` more queued behind them, each queued one for at most ``wait`` seconds. What does not fit
is refused at once with :class:`Busy`, which the server answers ``503`` with ``Retry-After``: a burst
of requests ends in answers, never in a server whose threads all wait. Each lane counts what it ran
and what it refused (``/api/settings`` shows the counts under ``load``).

>>> lane = Lane("heavy", workers=1, waiting=0, wait=1.0, retry_after=5)
>>> with lane.slot():
...     lane.slot().__enter__()
Traceback (most recent call last):
...
ctxembed.serve.lanes.Busy: the server is busy: 1 heavy request(s) running and 0 waiting; try again in 5 s
>>> lane.counts()["refused"]
1
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


class Busy(Exception):
    """A request the server cannot take now (a full lane or too many connections): 503, Retry-After."""

    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class Lane:
    """At most ``workers`` requests at a time, at most ``waiting`` queued behind them for at most
    ``wait`` seconds each; anything more is refused with :class:`Busy` (``retry_after`` seconds)."""

    def __init__(self, name: str, *, workers: int, waiting: int, wait: float, retry_after: int):
        self.name, self.workers, self.waiting, self.wait, self.retry_after = name, workers, waiting, wait, retry_after
        self._free = threading.Condition()
        self.running = self.queued = 0
        self.served = self.refused = 0

    @contextmanager
    def slot(self) -> Iterator[None]:
        """Run the block in this lane: at once when a worker is free, after a bounded wait in the queue,
        or not at all (:class:`Busy`)."""
        with self._free:
            if self.running >= self.workers:
                self._queue()
            self.running += 1
        try:
            yield
        finally:
            with self._free:
                self.running -= 1
                self.served += 1
                self._free.notify()

    def _queue(self) -> None:
        """Wait (holding the condition's lock between waits) until a worker is free; Busy when the
        queue is full or the wait passes ``wait`` seconds."""
        if self.queued >= self.waiting:
            self.refused += 1
            raise Busy(
                f"the server is busy: {self.running} {self.name} request(s) running and {self.queued} waiting; "
                f"try again in {self.retry_after} s",
                self.retry_after,
            )
        self.queued += 1
        try:
            deadline = time.monotonic() + self.wait
            while self.running >= self.workers:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.refused += 1
                    raise Busy(
                        f"the server is busy: waited {self.wait:g} s for one of {self.workers} {self.name} "
                        f"worker(s); try again in {self.retry_after} s",
                        self.retry_after,
                    )
                self._free.wait(left)
        finally:
            self.queued -= 1

    def counts(self) -> dict:
        """What the lane holds now and has done: for ``/api/settings`` and the busy line."""
        with self._free:
            return {
                "workers": self.workers,
                "queue": self.waiting,
                "running": self.running,
                "waiting": self.queued,
                "served": self.served,
                "refused": self.refused,
            }


# Light requests (what the page sends at each pause in typing: a millisecond or two each) run four at a
# time and may queue 32 deep; heavy ones one at a time, 8 queued. Together at most 45 connections wait
# in a lane, fewer than the server's 64, so the page and its settings always find a connection.
LIGHT, HEAVY = "light", "heavy"


def lanes() -> dict[str, Lane]:
    """A server's two lanes, fresh (each server counts its own)."""
    return {
        LIGHT: Lane(LIGHT, workers=4, waiting=32, wait=5.0, retry_after=1),
        HEAVY: Lane(HEAVY, workers=1, waiting=8, wait=30.0, retry_after=5),
    }
