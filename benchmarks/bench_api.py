"""``POST /v1/estimate`` under load: latency percentiles and throughput of a live `autopar serve`.

Starts ``autopar serve`` on a free loopback port (a fresh temporary SQLite database unless
``--database-url`` names another, e.g. PostgreSQL), then keeps ``--clients`` concurrent httpx
clients posting estimate requests for ``--duration`` seconds after a warm-up, each sending its
next request as soon as the previous answer arrives. Run with ``make bench-api`` or

    .venv/bin/python benchmarks/bench_api.py --database-url postgresql+psycopg://postgres@127.0.0.1:5432/bench

Target: p99 < 50 ms with zero errors at 32 clients. Client and server share the machine, so
the figures include the client's own CPU use.
"""

import argparse
import asyncio
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx
from proc_cpu import tree_cpu_s  # benchmarks/, on the path as the script's folder
from server_health import wait_until_healthy

# The request every client sends: a preset model and a stored preset cluster (one database
# lookup) with an inline training spec and plan, as a typical API user would.
REQUEST = {
    "preset": "llama2-7b",
    "training": {"seq_length": 4096, "global_batch_size": 512},
    "cluster_id": "dgx-a100-8n",
    "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1},
}


@dataclass
class Tally:
    latencies_s: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_server(
    database_url: str, port: int, workers: int, access_log: bool
) -> subprocess.Popen[bytes]:
    executable = Path(sys.executable).parent / "autopar"
    command = [str(executable), "serve", "--port", str(port), "--workers", str(workers)]
    if not access_log:
        command.append("--no-access-log")
    env = {**os.environ, "AUTOPAR_DATABASE_URL": database_url, "AUTOPAR_LOG_LEVEL": "warning"}
    return subprocess.Popen(command, env=env)


async def client_loop(base_url: str, stop_at: float, tally: Tally | None) -> None:
    # One connection per simulated client: a single AsyncClient shared by all of them spends
    # more time in its connection pool's bookkeeping than the server spends answering.
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        while time.perf_counter() < stop_at:
            start = time.perf_counter()
            try:
                response = await client.post("/v1/estimate", json=REQUEST)
                outcome = str(response.status_code)
            except httpx.HTTPError as exc:
                outcome = type(exc).__name__
            if tally is not None:
                tally.latencies_s.append(time.perf_counter() - start)
                tally.statuses[outcome] += 1


async def load(base_url: str, clients: int, seconds: float, tally: Tally | None) -> float:
    started = time.perf_counter()
    stop_at = started + seconds
    await asyncio.gather(*(client_loop(base_url, stop_at, tally) for _ in range(clients)))
    return time.perf_counter() - started


def server_cpu_s(pid: int) -> float | None:
    """CPU seconds used so far by the server and its worker processes (Linux /proc)."""
    try:
        return tree_cpu_s(pid)
    except (OSError, ValueError, IndexError):
        return None


def percentile(sorted_values: list[float], fraction: float) -> float:
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def report(
    tally: Tally, elapsed_s: float, database: str, clients: int, server_cpu: float | None
) -> dict[str, object]:
    latencies_ms = sorted(value * 1e3 for value in tally.latencies_s)
    total = len(latencies_ms)
    errors = total - tally.statuses.get("200", 0)
    return {
        "database": database,
        "clients": clients,
        "duration_s": round(elapsed_s, 1),
        "requests": total,
        "errors": errors,
        "statuses": dict(tally.statuses),
        "requests_per_s": round(total / elapsed_s, 1),
        "p50_ms": round(percentile(latencies_ms, 0.50), 2),
        "p90_ms": round(percentile(latencies_ms, 0.90), 2),
        "p99_ms": round(percentile(latencies_ms, 0.99), 2),
        "max_ms": round(latencies_ms[-1], 2),
        "mean_ms": round(statistics.fmean(latencies_ms), 2),
        # Server CPU per request separates the server's cost from the client's and from other
        # load on the machine, which the latencies include.
        "server_cpu_ms_per_request": (
            round(server_cpu * 1e3 / total, 3) if server_cpu is not None and total else None
        ),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: a fresh temporary SQLite file")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--workers", type=int, default=1, help="autopar serve --workers")
    parser.add_argument("--duration", type=float, default=30.0, help="seconds measured")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds before measuring")
    parser.add_argument("--access-log", action="store_true", help="keep uvicorn's access log")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        database_url = args.database_url or f"sqlite:///{Path(folder) / 'bench.db'}"
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        server = start_server(database_url, port, args.workers, args.access_log)
        try:
            wait_until_healthy(base_url, server, timeout_s=60)
            check = httpx.post(f"{base_url}/v1/estimate", json=REQUEST, timeout=30)
            if check.status_code != 200:
                raise SystemExit(f"estimate request fails: {check.status_code} {check.text}")
            asyncio.run(load(base_url, args.clients, args.warmup, tally=None))
            tally = Tally()
            cpu_before = server_cpu_s(server.pid)
            elapsed = asyncio.run(load(base_url, args.clients, args.duration, tally))
            cpu_after = server_cpu_s(server.pid)
        finally:
            server.send_signal(signal.SIGINT)
            try:
                server.wait(timeout=15)
            except subprocess.TimeoutExpired:
                server.kill()
    backend = database_url.split(":", 1)[0].split("+", 1)[0]
    server_cpu = (
        cpu_after - cpu_before if cpu_before is not None and cpu_after is not None else None
    )
    result = report(tally, elapsed, backend, args.clients, server_cpu)
    if args.json:
        print(json.dumps(result))
        return
    print(
        f"POST /v1/estimate on {backend}, {result['clients']} clients, {result['duration_s']} s: "
        f"{result['requests']} requests, {result['errors']} errors, "
        f"{result['requests_per_s']} req/s\n"
        f"latency ms: p50 {result['p50_ms']}  p90 {result['p90_ms']}  p99 {result['p99_ms']}  "
        f"max {result['max_ms']}  mean {result['mean_ms']}\n"
        f"server CPU per request: {result['server_cpu_ms_per_request']} ms; "
        f"load average {result['load_average_1min']}; statuses: {result['statuses']}"
    )


if __name__ == "__main__":
    main()
