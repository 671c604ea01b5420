"""Pooled PostgreSQL connections checked for life without a round trip when they were just used.

SQLAlchemy's ``pool_pre_ping`` sends ``SELECT 1`` on every checkout: under load that is one of a
cached estimate's three round trips, ~0.17 ms of the API process's CPU (``benchmarks/
bench_request_cpu.py``) plus the database backend's, for a connection that served a request a
millisecond ago. What the ping is for -- a connection the server closed (a restart, an
administrator's ``pg_terminate_backend``, an idle timeout), or that a network dropped -- shows
locally first in the common cases: the server's goodbye (an error message, then FIN) or the
kernel's verdict (keepalives, ``tcp_user_timeout``: ``app.db``) makes the idle socket readable
or in error, and an idle connection in autocommit is sent nothing else. So a checkout pings
only when the socket has something pending, or when the connection sat idle long enough for a
silent drop to be possible and not yet seen by the kernel (the same test the Go MySQL driver's
``connCheck`` makes before reusing a connection). A failed ping discards the connection and the
pool hands out another (SQLAlchemy's ``DisconnectionError`` protocol for checkout listeners).

A connection that breaks within ``IDLE_PING_S`` of its last use with no sign on the socket (a
black hole that began in between) fails its next statement instead of the ping: the request
gets the documented 503 within the client deadline, as it would when the ping itself hung.
"""

import select
import time
from typing import Any

from sqlalchemy import Engine, event, exc
from sqlalchemy.pool import ConnectionPoolEntry, PoolProxiedConnection

# A connection idle longer than this is pinged as before. Under load every pooled connection
# is reused within milliseconds; one second still pings after any pause a person would notice.
IDLE_PING_S = 1.0
_CHECKED_IN_AT = "autopar_checked_in_at"
_READABLE_OR_FAILED = select.POLLIN | select.POLLPRI | select.POLLERR | select.POLLHUP


def check_liveness_on_checkout(engine: Engine) -> None:
    """Install the check on ``engine`` (instead of ``pool_pre_ping``, which must be off)."""

    @event.listens_for(engine, "checkin")
    def _remember_use(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info[_CHECKED_IN_AT] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _check(
        dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: PoolProxiedConnection
    ) -> None:
        checked_in_at = record.info.pop(_CHECKED_IN_AT, None)
        if checked_in_at is None:
            return  # just connected
        idle_s = time.monotonic() - checked_in_at
        if idle_s <= IDLE_PING_S and not _socket_readable_or_failed(dbapi_connection):
            return
        try:
            alive = engine.dialect.do_ping(dbapi_connection)
        except Exception as error:  # any failure: the connection is not fit to hand out
            raise exc.DisconnectionError(f"pooled connection failed its ping: {error}") from error
        if not alive:
            raise exc.DisconnectionError("pooled connection failed its ping")


def _socket_readable_or_failed(dbapi_connection: Any) -> bool:
    """Whether the socket has data pending, a hang-up or an error right now (no waiting)."""
    try:
        fd = dbapi_connection.pgconn.socket
    except Exception:  # closed on our side (psycopg raises for a finished connection)
        return True
    poller = select.poll()
    poller.register(fd, _READABLE_OR_FAILED)
    return bool(poller.poll(0))
