"""More requests in flight than threads and pooled connections must queue, not deadlock.

FastAPI's usual shape (sync endpoints, a sync generator session dependency) needs a second
thread to serialize each response while the request still holds its pooled connection; with
the thread pool and the connection pool both exhausted, everyone waits for everyone until the
pool times out. ``app.db.run_in_session`` releases the connection before the thread.
"""

import asyncio

import anyio.to_thread
import httpx

from app.db import make_engine, make_session_factory
from app.main import create_app
from app.settings import Settings

ESTIMATE = {
    "preset": "llama2-7b",
    "training": {"seq_length": 4096, "global_batch_size": 512},
    "cluster_id": "dgx-a100-8n",
    "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1},
}


def test_requests_beyond_threads_and_connections_complete(service_database_url: str) -> None:
    # One connection, two threads, twenty requests: a deadlock would surface as pool timeouts.
    engine = make_engine(service_database_url, pool_size=1, max_overflow=0, pool_timeout=5)
    app = create_app(
        Settings(database_url=service_database_url, migrate_on_startup=False),
        session_factory=make_session_factory(engine),
    )

    async def scenario() -> list[int]:
        anyio.to_thread.current_default_thread_limiter().total_tokens = 2
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            with anyio.fail_after(60):
                responses = await asyncio.gather(
                    *(
                        client.post("/v1/estimate", json=ESTIMATE)
                        if index % 2
                        else client.get("/v1/clusters/dgx-a100-8n")
                        for index in range(20)
                    )
                )
        return [response.status_code for response in responses]

    try:
        assert asyncio.run(scenario()) == [200] * 20
    finally:
        engine.dispose()
