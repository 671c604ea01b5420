"""How each API process runs its requests: the threads the blocking services run on, and the
startup objects taken out of the garbage collector's way. Measured with
``benchmarks/bench_api_wrk.sh`` (2 processes, 64 connections, this 2-core machine, SQLite,
POST /v1/estimate): 40 threads (anyio's default) 759 req/s, p99 250 ms; 8 threads 934 req/s,
p99 194 ms; 4 threads 1,048 req/s, p99 192 ms; 4 threads and the freeze 1,098 req/s, p99 96 ms.
"""

import gc

import anyio.to_thread

from app.settings import Settings


def tune_process(settings: Settings) -> None:
    """Apply ``settings``' request threads and startup freeze to this process. Call from inside
    the running event loop (the lifespan), after startup's own allocations."""
    # Services hold the GIL nearly all the time they run (SQLite, the cost model, pydantic), so
    # more runnable threads add only GIL hand-offs and unfair wake-ups, not throughput. A service
    # that waits (a PostgreSQL round trip, a lock) waits at most the database timeouts.
    limiter = anyio.to_thread.current_default_thread_limiter()
    limiter.total_tokens = settings.request_threads
    if settings.freeze_startup_objects:
        # Everything alive after startup (modules, the app and its routes, pydantic and SQLAlchemy
        # schemas: ~500k objects) lives as long as the process. Frozen, the oldest generation's
        # collections stop walking them; those walks were the 100+ ms stalls in the p99 above.
        gc.collect()
        gc.freeze()
