"""CPU per request of the app itself: raw ASGI calls in one process, no HTTP server, no sockets.

What ``benchmarks/bench_api_wrk.sh`` measures less the server and the network, so a change to
the request path shows here on its own, with less noise than a load test. Each scenario runs
``--requests`` requests from ``--concurrency`` concurrent callers, ``--rounds`` times; the
figures are the CPU seconds of the whole process (every thread) and of the event loop's thread
per request, min and median over the rounds.

Usage: .venv/bin/python benchmarks/bench_request_cpu.py [--database-url URL] [--scenario ...]
  default database: a fresh SQLite file in a temporary folder (migrated and loaded first).
"""

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

# The same request as benchmarks/estimate_post.lua: a preset model on a stored preset cluster.
ESTIMATE_BODY = json.dumps(
    {
        "preset": "llama2-7b",
        "training": {"seq_length": 4096, "global_batch_size": 512},
        "cluster_id": "dgx-a100-8n",
        "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1},
    }
).encode()
SCENARIOS = {
    "estimate": ("POST", "/v1/estimate", ESTIMATE_BODY),
    "healthz": ("GET", "/healthz", b""),  # the floor: routing, middleware, one query
}

App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


async def call(app: App, method: str, path: str, body: bytes) -> int:
    """One request through the ASGI app; its status."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"bench"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 1),
        "server": ("127.0.0.1", 80),
        "state": {},
    }
    statuses: list[int] = []

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    await app(scope, receive, send)
    return statuses[0]


async def measure(app: App, scenario: str, requests: int, concurrency: int) -> tuple[float, float]:
    """CPU ms per request: the process's and the event loop thread's."""
    method, path, body = SCENARIOS[scenario]

    async def caller(count: int) -> None:
        for _ in range(count):
            status = await call(app, method, path, body)
            if status != 200:
                raise SystemExit(f"error: {scenario}: status {status}")

    process_s, thread_s = time.process_time(), time.thread_time()
    await asyncio.gather(*(caller(requests // concurrency) for _ in range(concurrency)))
    done = requests // concurrency * concurrency
    return (
        (time.process_time() - process_s) / done * 1e3,
        (time.thread_time() - thread_s) / done * 1e3,
    )


async def main(args: argparse.Namespace) -> None:
    from app.main import create_app

    app = create_app()
    async with app.router.lifespan_context(app):
        for scenario in args.scenario:
            await measure(app, scenario, 200, args.concurrency)  # warm-up: caches, pools
            rounds = [
                await measure(app, scenario, args.requests, args.concurrency)
                for _ in range(args.rounds)
            ]
            process_ms = [r[0] for r in rounds]
            loop_ms = [r[1] for r in rounds]
            print(
                f"{scenario}: {min(process_ms):.2f} ms CPU per request (median "
                f"{statistics.median(process_ms):.2f}), event loop thread {min(loop_ms):.2f} "
                f"ms (median {statistics.median(loop_ms):.2f}); {args.rounds} x "
                f"{args.requests} requests, {args.concurrency} concurrent"
            )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--database-url", help="default: a fresh SQLite file")
    parser.add_argument(
        "--scenario", nargs="+", choices=sorted(SCENARIOS), default=["estimate", "healthz"]
    )
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    return parser.parse_args()


if __name__ == "__main__":
    arguments = parse_args()
    with tempfile.TemporaryDirectory() as folder:
        url = arguments.database_url or f"sqlite:///{Path(folder) / 'bench.db'}"
        os.environ["AUTOPAR_DATABASE_URL"] = url
        os.environ["AUTOPAR_EMBEDDED_WORKER"] = "false"
        os.environ.setdefault("AUTOPAR_LOG_LEVEL", "warning")
        asyncio.run(main(arguments))
        sys.stdout.flush()
