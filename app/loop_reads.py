"""PostgreSQL reads run in the event loop's own thread, on a short leash.

The hot read-only requests (``app.db.run_read_in_session``: an estimate, a search's status and
plans, a plan) spend less on their two round trips to PostgreSQL than on the hop to a pool thread
and back: under load, on a 2-core machine, that hop (a queue, two wake-ups, the GIL handed over
while the other threads and the database want the same cores) made a cached estimate cost
1.9-2.1 instead of 1.6-1.7 ms of API CPU: 752-898 instead of 1,013-1,123 req/s, p99 116-172
instead of 80-94 ms, at 64 connections (wrk, 2 processes; README, Speed). So they run right in
the loop, as on SQLite, for as long as PostgreSQL answers promptly. What must not happen is a
database that stops answering stalling the loop, so:

- The loop has a connection of its own (a pool of one, ``LoopReads.engine``) and never opens it:
  connecting may take the whole connect timeout, so a connection is opened in a worker thread
  and handed over; until it is there, reads go through the thread pool as before.
- Each exchange on it in the loop has a deadline of ``DatabaseTimeouts.loop_read_s`` (0.5 s),
  not the statement timeout: a black hole, a lock held by a migration, or a server in trouble
  stalls the loop that long, once.
- A read that fails there on the connection (its deadline, a disconnect) runs again in the
  thread pool with the usual timeouts -- it wrote nothing, so the retry is safe -- and reads
  stay in the thread pool for ``PAUSE_S``.

A database a network away is better read from the thread pool, whose threads overlap their
waits while the loop cannot: ``loop_read_s`` 0 (``AUTOPAR_DB_LOOP_READ_TIMEOUT_S``) keeps them
there.
"""

import asyncio
import logging
import time
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from contextvars import ContextVar
from weakref import WeakKeyDictionary

from sqlalchemy import Engine, event, exc

logger = logging.getLogger(__name__)

# After a read failed in the loop: long enough that a database in trouble costs the loop one
# stall per this period at most, short enough that the fast path is back soon after recovery.
PAUSE_S = 10.0

# The errors that mean the connection, not the request, failed: the read is retried outside the
# loop. Anything else (a 404, a refused key, a bug) is the request's answer.
CONNECTION_FAILURES = (
    exc.OperationalError,
    exc.InterfaceError,
    exc.DisconnectionError,
    exc.TimeoutError,
)

_DEADLINE_S: ContextVar[float | None] = ContextVar("autopar_loop_read_deadline_s", default=None)


def loop_read_deadline_s() -> float | None:
    """The deadline of each exchange of the in-loop read running in this context, or None
    outside one (``app.db.DeadlineConnection`` waits no longer; connecting is refused)."""
    return _DEADLINE_S.get()


class LoopReads:
    """The event loop's own connection to PostgreSQL (``engine``: autocommit, a pool of one)
    and whether reads may run on it now."""

    def __init__(self, engine: Engine, *, deadline_s: float, pause_s: float = PAUSE_S) -> None:
        self.engine = engine
        self.deadline_s = deadline_s
        self.pause_s = pause_s
        self._paused_until = 0.0
        # Whether the pool's one connection was opened and has not failed since. (After a
        # failure the pool keeps its slot but not the connection, and reconnects on the next
        # checkout, which the loop must not make.)
        self._open = False
        self._opening = False

    @property
    def open(self) -> bool:
        """Whether a read may run in the loop now: not paused, and the connection open."""
        return self._open and time.monotonic() >= self._paused_until

    def ready(self) -> bool:
        """``open``, and if not for want of the connection, the connection is (re)opened in a
        worker thread for the reads after this one. Call from the loop's thread."""
        if self.open:
            return True
        if not self._opening and time.monotonic() >= self._paused_until:
            self._opening = True
            opening = asyncio.get_running_loop().run_in_executor(None, self._connect)
            opening.add_done_callback(self._connected)
        return False

    @contextmanager
    def reading_in_loop(self) -> Iterator[None]:
        """Within: every exchange with the database waits ``deadline_s`` at most, and none
        connects."""
        token = _DEADLINE_S.set(self.deadline_s)
        try:
            yield
        finally:
            _DEADLINE_S.reset(token)

    def pause(self, error: BaseException) -> None:
        """Send reads to the thread pool for ``pause_s`` after ``error``."""
        self._paused_until = time.monotonic() + self.pause_s
        self._open = False
        logger.warning(
            "PostgreSQL reads leave the event loop for %g s (they run in the thread pool): %s",
            self.pause_s,
            str(error).partition("\n")[0] or type(error).__name__,
        )

    @property
    def paused(self) -> bool:
        return time.monotonic() < self._paused_until

    def _connect(self) -> None:
        with self.engine.connect():
            pass  # checked in again at once: the loop's pool now holds an open connection

    def _connected(self, opening: "asyncio.Future[None] | Future[None]") -> None:
        self._opening = False
        if opening.cancelled():  # the loop is closing
            return
        error = opening.exception()
        if error is None:
            self._open = True
        else:
            self.pause(error)


_OF_ENGINE: "WeakKeyDictionary[Engine, LoopReads]" = WeakKeyDictionary()


def attach(engine: Engine, loop_reads: LoopReads) -> None:
    """Make ``loop_reads`` the event loop's connection for reads of ``engine``'s database; it is
    disposed of with ``engine``."""
    _OF_ENGINE[engine] = loop_reads

    def _dispose(_engine: Engine) -> None:
        loop_reads.engine.dispose()

    event.listen(engine, "engine_disposed", _dispose)


def loop_reads_of(engine: Engine) -> LoopReads | None:
    """The loop's reads of ``engine``, or None (not PostgreSQL with psycopg)."""
    return _OF_ENGINE.get(engine)
