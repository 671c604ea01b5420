"""A burst of searches against ``autopar serve`` and separate ``autopar worker`` processes.

Starts ``autopar serve`` (embedded worker off) on a free loopback port and a fresh database
(a temporary SQLite file unless ``--database-url`` names another, e.g. an empty PostgreSQL
database), then ``--workers`` ``autopar worker`` processes, submits ``--searches`` small searches
as fast as ``--concurrency`` clients can, and waits for all of them (at most ``--timeout`` s).

Reports, from the database itself: searches per status (all must succeed), that none was lost
(one row per accepted submission, each with its ranked plans stored), the queue wait (created ->
started: p50 / p95 / max), the run time (started -> finished), the wall time from the first
submission to the last finish, and the throughput. Exit status 1 when a search is missing,
unfinished or not succeeded. Run with ``make bench-burst`` or

    .venv/bin/python benchmarks/bench_search_burst.py --database-url postgresql+psycopg://...
"""

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

import httpx
from server_health import wait_until_healthy  # benchmarks/, on the path as the script's folder
from sqlalchemy import create_engine, func, select
from sqlalchemy.orm import Session

from app.orm import PlanRow, SearchRow

# A small search: an 8B model on one 8-GPU node, every plan enumerated (a fraction of a second
# of CPU each), so the figures measure the queue and the workers rather than one long search.
SEARCH = {
    "preset": "llama3-8b",
    "training": {"seq_length": 4096, "global_batch_size": 64},
    "cluster_id": "dgx-a100-1n",
    "sampler": "exhaustive",
    "top_k": 5,
}
BIN = Path(sys.executable).parent


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start(command: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)


async def submit_all(base_url: str, count: int, concurrency: int) -> tuple[list[str], Counter[str]]:
    """POST ``count`` searches with ``concurrency`` clients; the accepted ids and every status."""
    ids: list[str] = []
    statuses: Counter[str] = Counter()
    queue: asyncio.Queue[int] = asyncio.Queue()
    for index in range(count):
        queue.put_nowait(index)

    async def client_loop() -> None:
        async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:
            while not queue.empty():
                index = queue.get_nowait()
                body = {**SEARCH, "name": f"burst-{index}"}
                try:
                    response = await client.post("/v1/searches", json=body)
                except httpx.HTTPError as exc:
                    statuses[type(exc).__name__] += 1
                    continue
                statuses[str(response.status_code)] += 1
                if response.status_code == 202:
                    ids.append(response.json()["id"])

    await asyncio.gather(*(client_loop() for _ in range(concurrency)))
    return ids, statuses


def wait_for_all(session: Session, ids: list[str], timeout_s: float) -> bool:
    """Poll the database until every search in ``ids`` has finished; False on timeout."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        unfinished = session.scalar(
            select(func.count())
            .select_from(SearchRow)
            .where(SearchRow.id.in_(ids), SearchRow.status.in_(("queued", "running")))
        )
        session.rollback()  # a fresh snapshot next time
        if unfinished == 0:
            return True
        time.sleep(0.5)
    return False


def seconds(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)

    def at(fraction: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(fraction * len(ordered)) - 1))]

    return {
        "p50": round(at(0.50), 3),
        "p95": round(at(0.95), 3),
        "max": round(ordered[-1], 3),
        "mean": round(statistics.fmean(ordered), 3),
    }


def account(session: Session, ids: list[str], submit_started: datetime) -> dict[str, object]:
    rows = session.scalars(select(SearchRow).where(SearchRow.id.in_(ids))).all()
    plan_counts = dict(
        session.execute(
            select(PlanRow.search_id, func.count())
            .where(PlanRow.search_id.in_(ids), PlanRow.rank.is_not(None))
            .group_by(PlanRow.search_id)
        ).all()
    )
    by_status = Counter(row.status for row in rows)
    started = [row for row in rows if row.started_at is not None]
    finished = [row for row in rows if row.finished_at is not None]
    waits = [(row.started_at - row.created_at).total_seconds() for row in started]  # type: ignore[operator]
    runs = [
        (row.finished_at - row.started_at).total_seconds()  # type: ignore[operator]
        for row in started
        if row.finished_at is not None
    ]
    last_finish = max((row.finished_at for row in finished), default=None)  # type: ignore[type-var]
    wall_s = (last_finish - submit_started).total_seconds() if last_finish else None
    without_plans = [row.id for row in rows if plan_counts.get(row.id, 0) == 0]
    return {
        "rows": len(rows),
        "statuses": dict(by_status),
        "lost": len(set(ids) - {row.id for row in rows}),
        "without_plans": len(without_plans),
        "plans_per_search": seconds([float(plan_counts.get(row.id, 0)) for row in rows])
        if rows
        else None,
        "attempts_max": max((row.attempts for row in rows), default=0),
        "queue_wait_s": seconds(waits) if waits else None,
        "run_s": seconds(runs) if runs else None,
        "wall_s": round(wall_s, 2) if wall_s else None,
        "searches_per_s": round(len(finished) / wall_s, 2) if wall_s else None,
    }


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", help="default: a fresh temporary SQLite file")
    parser.add_argument("--searches", type=int, default=200)
    parser.add_argument("--workers", type=int, default=2, help="autopar worker processes")
    parser.add_argument("--concurrency", type=int, default=16, help="submitting clients")
    parser.add_argument("--poll-s", type=float, default=0.2, help="autopar worker --poll-s")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds to wait for all")
    parser.add_argument("--json", action="store_true", help="print the result as one JSON line")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as folder:
        database_url = args.database_url or f"sqlite:///{Path(folder) / 'burst.db'}"
        port = free_port()
        base_url = f"http://127.0.0.1:{port}"
        env = {
            **os.environ,
            "AUTOPAR_DATABASE_URL": database_url,
            "AUTOPAR_EMBEDDED_WORKER": "false",
            "AUTOPAR_LOG_LEVEL": "warning",
        }
        logs = Path(folder)
        processes: list[subprocess.Popen[bytes]] = []
        server = start(
            [str(BIN / "autopar"), "serve", "--port", str(port), "--no-access-log"],
            env,
            logs / "server.log",
        )
        processes.append(server)
        engine = create_engine(database_url)
        try:
            wait_until_healthy(base_url, server, timeout_s=120)  # it has migrated the database
            for index in range(args.workers):
                processes.append(
                    start(
                        [str(BIN / "autopar"), "worker", "--poll-s", str(args.poll_s)],
                        env,
                        logs / f"worker-{index}.log",
                    )
                )
            time.sleep(2)  # the workers import the search stack before they poll
            submit_started = datetime.now().astimezone()
            clock = time.perf_counter()
            ids, submit_statuses = asyncio.run(
                submit_all(base_url, args.searches, args.concurrency)
            )
            submit_s = time.perf_counter() - clock
            with Session(engine) as session:
                finished_in_time = wait_for_all(session, ids, args.timeout)
                result = account(session, ids, submit_started)
        finally:
            for process in reversed(processes):
                stop(process)
            engine.dispose()
        worker_errors = sum(
            log.read_text(errors="replace").count("Traceback") for log in logs.glob("*.log")
        )
    backend = database_url.split(":", 1)[0].split("+", 1)[0]
    result = {
        "database": backend,
        "searches": args.searches,
        "workers": args.workers,
        "accepted": len(ids),
        "submit_statuses": dict(submit_statuses),
        "submit_s": round(submit_s, 2),
        "all_finished_in_time": finished_in_time,
        **result,
        "tracebacks_in_logs": worker_errors,
        "load_average_1min": round(os.getloadavg()[0], 2),
    }
    ok = (
        len(ids) == args.searches
        and result["lost"] == 0
        and result["statuses"] == {"succeeded": args.searches}
        and result["without_plans"] == 0
    )
    if args.json:
        print(json.dumps(result))
    else:
        print(json.dumps(result, indent=2))
        print("OK: every search succeeded, none lost" if ok else "FAILED", file=sys.stderr)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
