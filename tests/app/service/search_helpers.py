"""Searches run by real workers: a committed database shared by a test module, the API over it,
and helpers to wait for and inspect what the workers did."""

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import optuna
from anyio.from_thread import start_blocking_portal
from fastapi import FastAPI
from sqlalchemy import Engine, delete, update
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine, make_session_factory
from app.main import create_app
from app.orm import SearchRow, utcnow
from app.settings import Settings
from app.workers import repository
from app.workers.service import SearchWorker, WorkerOptions
from search import SearchRequest, run_search
from tests.app.service.api_helpers import asgi_client

# Small spaces and budgets: a search takes well under a second of cost-model time.
TRAINING = {"seq_length": 2048, "global_batch_size": 64}
EXHAUSTIVE: dict[str, Any] = {
    "preset": "gpt-1.7b",
    "training": TRAINING,
    "cluster_id": "dgx-a100-1n",
    "sampler": "exhaustive",
    "top_k": 5,
    "constraints": {"tp": [1, 2], "recompute": ["none", "selective"]},
}
TPE: dict[str, Any] = {**EXHAUSTIVE, "sampler": "tpe", "trials": 8, "seed": 7}
# Generous: only a hung worker takes this long; nothing asserts on durations.
WAIT_S = 120.0


@dataclass
class Live:
    """The API on a committed database, and workers for it."""

    url: str
    engine: Engine
    sessions: sessionmaker[Session]
    http: httpx.Client

    def worker(self, worker_id: str, *, lease_s: float = 30.0) -> SearchWorker:
        return SearchWorker(
            session_factory=self.sessions,
            database_url=self.url,
            options=WorkerOptions(lease_s=lease_s, poll_s=0.05, heartbeat_s=0.05),
            worker_id=worker_id,
        )

    def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        response = self.http.post("/v1/searches", json=body)
        assert response.status_code == 202, response.text
        return dict(response.json())

    def search(self, search_id: str) -> dict[str, Any]:
        response = self.http.get(f"/v1/searches/{search_id}")
        assert response.status_code == 200, response.text
        return dict(response.json())

    def plans(self, search_id: str) -> list[dict[str, Any]]:
        response = self.http.get(f"/v1/searches/{search_id}/plans")
        assert response.status_code == 200, response.text
        return list(response.json()["items"])

    def run_some_trials(self, worker_id: str, *, lease_s: float, trials: int = 3) -> SearchRow:
        """Claim the next search as ``worker_id`` and run ``trials`` trials of its study, then
        stop as a worker that died or is shutting down stops: its claim stays on the row."""
        with self.sessions() as session:
            claimed = repository.claim_next(session, worker_id=worker_id, lease_s=lease_s)
        assert claimed is not None
        done: list[int] = []
        run_search(
            SearchRequest.model_validate(claimed.request),
            storage=self.url,
            study_name=claimed.optuna_study_name,
            progress=lambda done_trials, _budget, _best: done.append(done_trials),
            should_stop=lambda: len(done) >= trials,
        )
        return claimed

    def expire_lease(self, search_id: str) -> None:
        """What time does to a dead worker's claim (without waiting for it)."""
        with self.sessions() as session:
            session.execute(
                update(SearchRow)
                .where(SearchRow.id == search_id)
                .values(lease_expires_at=utcnow().replace(year=2000))
            )
            session.commit()

    def study(self, search: dict[str, Any]) -> optuna.Study:
        return optuna.load_study(study_name=search["study_name"], storage=self.url)


@contextmanager
def live_service(url: str) -> Iterator[Live]:
    engine = make_engine(url)
    sessions = make_session_factory(engine)
    settings = Settings(database_url=url, migrate_on_startup=False, embedded_worker=False)
    app = create_app(settings, session_factory=sessions)
    try:
        with asgi_client(app) as http:
            yield Live(url=url, engine=engine, sessions=sessions, http=http)
    finally:
        # Searches of one test must not be claimed by the workers of the next.
        with engine.begin() as connection:
            connection.execute(delete(SearchRow))
        engine.dispose()


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"gave up waiting for {what}"
        time.sleep(0.02)


@contextmanager
def serving(app: FastAPI) -> Iterator[httpx.Client]:
    """The app with its lifespan run, as a server runs it (startup, then shutdown)."""
    with (
        start_blocking_portal() as portal,
        portal.wrap_async_context_manager(app.router.lifespan_context(app)),
        asgi_client(app) as http,
    ):
        yield http
