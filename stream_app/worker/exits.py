"""How a worker process ends: within a bound, with one last line that says how.

Faust's stop can outlive its reason. A crashed worker was seen waiting 90 s after leaving its
group, deaf to SIGTERM (a second stop only waits for the first); with the brokers gone, the
consumer thread dies in its own stop and Faust waits out that thread's 60 s timeout, past
Kubernetes' grace period. Neither stop has anything left to save: the commit cannot reach a
broker or must not be made after a crash, and the next owner re-reads from the last commit.
So once a crash or a stop begins, a watchdog thread gives Faust a bound to finish in, then
says the last word itself and ends the process with ``os._exit``, which no stuck task,
thread or ``atexit`` join can hold up.

The last word is one event, said once by whichever comes first, the main thread when Faust
returns or the watchdog: ``crash`` naming the error, or ``shutdown`` whose ``mode`` is
``graceful`` (the stop finished in time) or ``forced`` (it did not). Faust also records every
later crash over the first (the agents' ``CancelledError`` as they are torn down), and
raises that instead, a ``BaseException`` that goes past every handler, so a crash could
leave no ``crash`` line. Here the first error is the one named.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Protocol

import faust

from stream_app.observability import logs

CRASH_BOUND = 10.0  # seconds from a crash to the exit (promised: 15)
STOP_BOUND = 15.0  # seconds from the start of a stop (SIGTERM) to the exit (promised: 20)
POLL = 0.1  # seconds between two looks of the watchdog
BACKSTOP = 2.0  # seconds the watchdog's last word and flush may take before it exits anyway


class LastWord:
    """The one event that ends a worker's log, and the exit status that goes with it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.status: int | None = None  # None until said

    def crash(self, error: BaseException | None, status: object = 1, **fields: object) -> int:
        code = status if isinstance(status, int) and status != 0 else 1
        with self._lock:
            if self.status is None:
                self.status = code
                logs.event(
                    "crash",
                    logging.ERROR,
                    error=(str(error) or type(error).__name__)
                    if error is not None
                    else f"the worker exited with status {status}",
                    type=type(error).__name__ if error is not None else "SystemExit",
                    **fields,
                )
            return self.status

    def shutdown(self, mode: str, status: int = 0, **fields: object) -> int:
        with self._lock:
            if self.status is None:
                self.status = status
                level = logging.INFO if status == 0 else logging.ERROR
                logs.event("shutdown", level, mode=mode, **fields)
            return self.status


class Ending(Protocol):
    """What the watchdog watches: a worker, as :class:`BoundedWorker` shows it."""

    @property
    def ending(self) -> bool: ...

    @property
    def reason(self) -> BaseException | None: ...


class Watchdog(threading.Thread):
    """Ends the process ``crash_bound`` seconds after ``worker`` crashed (it has a
    ``reason``), or ``stop_bound`` seconds after it began to stop, whichever is sooner,
    unless it has ended by then."""

    def __init__(
        self,
        worker: Ending,
        last_word: LastWord,
        crash_bound: float = CRASH_BOUND,
        stop_bound: float = STOP_BOUND,
        exit: Callable[[int], object] = os._exit,
    ) -> None:
        super().__init__(name="exit-watchdog", daemon=True)
        self.worker, self.last_word = worker, last_word
        self.crash_bound, self.stop_bound = crash_bound, stop_bound
        self._exit = exit

    def run(self) -> None:
        crash_by = stop_by = float("inf")
        while True:
            now = time.monotonic()
            if crash_by == float("inf") and self.worker.reason is not None:
                crash_by = now + self.crash_bound
            if stop_by == float("inf") and self.worker.ending:
                stop_by = now + self.stop_bound
            if now >= min(crash_by, stop_by):
                self.force(crashed=crash_by <= stop_by)
                return
            time.sleep(POLL)

    def force(self, crashed: bool) -> None:
        """The last word, unless the main thread has said it, then the exit."""
        backstop = threading.Timer(BACKSTOP, self._exit, (1,))  # a stream that blocks
        backstop.daemon = True
        backstop.start()
        reason = self.worker.reason
        if crashed or reason is not None:
            status = self.last_word.crash(reason, stop="forced", bound_s=self.crash_bound)
        else:
            status = self.last_word.shutdown(
                "forced",
                1,
                reason=f"the stop did not finish in {self.stop_bound:g} s",
            )
        _flush()
        self._exit(status)


def _flush() -> None:
    """What is buffered reaches the log before ``os._exit``, which flushes nothing; a stream
    that fails is passed over (the backstop bounds one that blocks)."""
    handlers = [*logging.getLogger().handlers, *logging.getLogger("stream_app.events").handlers]
    streams = [sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__]
    for flushable in [*handlers, *(s for s in streams if s is not None)]:
        with contextlib.suppress(Exception):
            flushable.flush()


class BoundedWorker(faust.Worker):
    """Faust's worker, telling the watchdog when it ends and why, with one-line logs."""

    _reason: BaseException | None = None
    failure: BaseException | None = None  # what start-up raised, when it did
    _ending = False
    _stopping = False

    @property
    def crash_reason(self) -> BaseException | None:
        return self._reason

    @crash_reason.setter
    def crash_reason(self, reason: BaseException | None) -> None:
        """Keeps the first crash's error: the crashes after it are its consequences, the
        cancellation of what the first one stopped above all. A stop cancels the agents
        before it stops them, and Faust takes an agent cancelled while not stopped for one
        to restart, crashing it: a cancellation once a stop has begun is that teardown,
        not a crash."""
        first = self._reason
        if reason is None:
            self._reason = None
        elif isinstance(reason, asyncio.CancelledError) and self._stopping:
            return
        elif first is None or isinstance(first, asyncio.CancelledError):
            self._reason = reason

    async def stop(self) -> None:
        self._stopping = True
        await super().stop()

    @property
    def ending(self) -> bool:
        """A stop or a crash has begun: SIGTERM, an error, or start-up failed."""
        return self._ending or self.should_stop

    @property
    def reason(self) -> BaseException | None:
        return self.crash_reason or self.failure

    def on_worker_shutdown(self) -> None:
        """Faust calls this when its run ends, before it stops the app; an error that ended
        start-up is then on its way out."""
        failure = sys.exc_info()[1]
        if isinstance(failure, Exception):
            self.failure = failure
        self._ending = True
        super().on_worker_shutdown()

    def on_setup_root_logger(self, logger: logging.Logger, level: int) -> None:
        super().on_setup_root_logger(logger, level)
        logs.one_line_library_logs(logger)
