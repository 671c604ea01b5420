"""Faults: a database that goes away, hangs or blips, and workers that die.

A database outage is not a worker's death: a worker that could not renew waits it out, takes
back what it still owns, and gives back an attempt a takeover spent on it; requests fail fast
with 503 and recover by themselves. A worker killed mid-trial costs its search one attempt, no
plan, and no trial of its budget; a dead worker of the same host is replaced at once.

The PostgreSQL tests put ``tcp_proxy.FaultProxy`` between the service and the server; they run
where the PostgreSQL backend does (``AUTOPAR_TEST_POSTGRES_URL``), and are marked ``slow``.
"""

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, TypeVar

import httpx
import optuna
import pytest
from optuna.trial import TrialState
from sqlalchemy import Engine, select, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session, sessionmaker

from app.db import DatabaseTimeouts, make_engine, make_session_factory
from app.loop_reads import loop_reads_of
from app.main import create_app
from app.orm import PlanRow, SearchRow, utcnow
from app.settings import Settings
from app.workers import identity, repository
from app.workers.service import SearchWorker, WorkerOptions
from tests.app.service.api_helpers import asgi_client
from tests.app.service.search_helpers import TPE, Live, serving, wait_for
from tests.app.service.tcp_proxy import FaultProxy, fault_proxy
from tests.support.paths import REPO_ROOT

T = TypeVar("T")
ROOT = REPO_ROOT
# Small limits, so an outage is noticed in about a second (what settings would set).
FAST = DatabaseTimeouts(connect_s=1, statement_s=1, pool_s=2)
# A request that has not answered by then hangs: the failure these tests exist for.
ANSWER_BOUND_S = 20.0


# Helpers -------------------------------------------------------------------------------------
def answered(call: Callable[[], T], bound_s: float = ANSWER_BOUND_S) -> T:
    """``call()``'s result; fails the test if it does not return within ``bound_s`` (hung)."""
    results: list[T] = []
    errors: list[BaseException] = []

    def run() -> None:
        try:
            results.append(call())
        except BaseException as exc:  # re-raised in the test's thread
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(bound_s)
    assert not thread.is_alive(), f"no answer within {bound_s:g} s: the call hangs"
    if errors:
        raise errors[0]
    return results[0]


def study_trials(live: Live, search_id: str) -> list[optuna.trial.FrozenTrial]:
    return live.study(live.search(search_id)).get_trials(deepcopy=False)


def assert_consistent(live: Live, search_id: str) -> dict[str, Any]:
    """The end state nothing half-wrote: succeeded, no trial left running (queued moves the
    search did not get to may stay queued), the trial count the study's, and one plan row per
    plan, each from a completed trial."""
    done = live.search(search_id)
    assert done["status"] == "succeeded", done
    trials = study_trials(live, search_id)
    assert TrialState.RUNNING not in {trial.state for trial in trials}
    complete = {t.number for t in trials if t.state == TrialState.COMPLETE}
    assert done["progress"]["trials_done"] == len(complete)
    with live.sessions() as session:
        rows = session.scalars(select(PlanRow).where(PlanRow.search_id == search_id)).all()
    assert rows and len({row.plan_hash for row in rows}) == len(rows)
    assert all(row.trial_number in complete for row in rows if row.trial_number is not None)
    return done


def dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


# Workers and the database: the rules ------------------------------------------------------
def test_a_worker_takes_back_a_search_it_still_owns_without_an_attempt(live: Live) -> None:
    search = live.submit(TPE)
    with live.sessions() as session:
        first = repository.claim_next(session, worker_id="a", lease_s=60)
        assert first is not None and first.attempts == 1
        # E.g. its ranking could not be written while the database was away: its lease is
        # alive, and it is between searches, so it takes the search back at once.
        again = repository.claim_next(session, worker_id="a", lease_s=60)
        assert again is not None and again.id == search["id"] and again.attempts == 1
        assert repository.claim_next(session, worker_id="b", lease_s=60) is None


def test_a_worker_that_lost_its_lease_alive_gives_the_attempt_back(live: Live) -> None:
    search = live.submit(TPE)
    start = utcnow()
    with live.sessions() as session:
        assert repository.claim_next(session, worker_id="a", lease_s=60, now=start)
        later = start + timedelta(seconds=61)  # "a" could not renew: the database was away
        taken = repository.claim_next(session, worker_id="b", lease_s=60, now=later)
        assert taken is not None and taken.attempts == 2
        # "a" comes back, finds the lease gone, stops, and says it did not die.
        assert repository.refund_attempt(session, search_id=search["id"], worker_id="a")
    assert live.search(search["id"])["attempts"] == 1
    assert live.search(search["id"])["worker"] == "b"


def test_a_ranking_waits_for_the_database_instead_of_being_lost(
    live: Live, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = repository.finish
    failures = [2]

    def flaky(session: Session, **kwargs: Any) -> bool:
        if failures[0]:
            failures[0] -= 1
            raise OperationalError("UPDATE", {}, ConnectionError("server closed the connection"))
        return real(session, **kwargs)

    monkeypatch.setattr(repository, "finish", flaky)
    search = live.submit(TPE)
    assert live.worker("w1").run_once() == search["id"]
    done = assert_consistent(live, search["id"])
    assert done["attempts"] == 1 and failures == [0]


@pytest.mark.skipif(identity.host_suffix() is None, reason="needs /proc (Linux)")
def test_a_dead_worker_of_this_host_is_replaced_at_once(live: Live) -> None:
    search = live.submit(TPE)
    suffix = identity.host_suffix()
    dead = f"{socket.gethostname()}-{dead_pid()}-0a0b0c{suffix}"
    alive = identity.new_worker_id()
    identity.register(alive)  # a live worker of this very process
    try:
        with live.sessions() as session:
            assert repository.claim_next(session, worker_id=alive, lease_s=600)
        assert live.worker("w2").run_once() is None  # its owner lives: the lease stands
        live.expire_lease(search["id"])  # back to the start: give it to the dead one
        with live.sessions() as session:
            session.execute(
                update(SearchRow)
                .where(SearchRow.id == search["id"])
                .values(lease_owner=dead, lease_expires_at=utcnow() + timedelta(seconds=600))
            )
            session.commit()
        # The dead one's lease has ten minutes to run; its host's next worker does not wait.
        assert live.worker("w2").run_once() == search["id"]
    finally:
        identity.unregister(alive)
    done = assert_consistent(live, search["id"])
    assert done["attempts"] == 2  # a real death: it counts


def test_the_time_budget_is_the_whole_search_s(live: Live) -> None:
    search = live.submit({**TPE, "trials": 100_000, "timeout_s": 30})
    live.run_some_trials("doomed", lease_s=600)
    # Its worker ran for the whole budget (as its last heartbeat recorded), then died.
    with live.sessions() as session:
        session.execute(
            update(SearchRow)
            .where(SearchRow.id == search["id"])
            .values(progress={"run_s": 30.0, "trials_budget": 100_000})
        )
        session.commit()
    live.expire_lease(search["id"])
    assert live.worker("w2").run_once() == search["id"]
    ended = live.search(search["id"])
    assert ended["status"] == "succeeded" and ended["outcome"]["status"] == "timeout"
    complete = [t for t in study_trials(live, search["id"]) if t.state == TrialState.COMPLETE]
    assert len(complete) == 3  # nothing left of the budget: no new trial
    assert live.plans(search["id"])


def test_trials_left_running_or_queued_are_failed_when_the_study_resumes(live: Live) -> None:
    search = live.submit({**TPE, "trials": 8})
    live.run_some_trials("doomed", lease_s=600)
    # The dead worker was mid-trial, with a trial queued behind it.
    study = live.study(live.search(search["id"]))
    orphan = study.ask()
    study.enqueue_trial(orphan.params or {"tp": 1})
    live.expire_lease(search["id"])
    assert live.worker("w2").run_once() == search["id"]
    ended = assert_consistent(live, search["id"])
    trials = study_trials(live, search["id"])
    assert trials[orphan.number].state == TrialState.FAIL
    # The budget counts completed trials: the orphan took no one's place.
    assert ended["progress"]["trials_done"] == 8


# A killed worker process -----------------------------------------------------------------
@pytest.mark.slow
def test_a_worker_killed_mid_trial_loses_nothing(live: Live) -> None:
    search = live.submit({**TPE, "trials": 800, "top_k": 50, "warm_start": False})
    autopar = Path(sys.executable).with_name("autopar")
    env = {
        **os.environ,
        "AUTOPAR_DATABASE_URL": live.url,
        "AUTOPAR_MIGRATE_ON_STARTUP": "false",
        "AUTOPAR_LOG_LEVEL": "warning",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    # A lease of 8 s: a heartbeat (with the trials since the last) every 2 s.
    worker = subprocess.Popen(
        [str(autopar), "worker", "--lease-s", "8", "--poll-s", "0.05"], env=env, cwd=ROOT
    )

    def under_way() -> bool:
        assert worker.poll() is None, "the worker process exited"
        return bool(live.search(search["id"])["progress"]["trials_done"] >= 100)

    try:
        wait_for(under_way, "the worker to write some trials", timeout_s=60)
    finally:
        worker.send_signal(signal.SIGKILL)
        worker.wait()
    killed = live.search(search["id"])
    assert killed["status"] == "running" and killed["attempts"] == 1
    written = len(study_trials(live, search["id"]))
    assert 0 < written < 800

    # The lease has seconds to run, but its process is gone: this host's next worker does not
    # wait for it (item: a restarted server reclaims its previous instance's searches).
    with live.sessions() as session:
        row = session.get(SearchRow, search["id"])
        assert row is not None and row.lease_expires_at is not None
        assert row.lease_expires_at > utcnow()
    survivor = live.worker("survivor", lease_s=8)
    if identity.host_suffix() is None:  # no /proc: the lease must run out first
        live.expire_lease(search["id"])
    assert survivor.run_once() == search["id"]
    done = assert_consistent(live, search["id"])
    assert done["attempts"] == 2
    assert done["progress"]["trials_done"] == 800  # the budget: completed trials


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.slow
@pytest.mark.skipif(identity.host_suffix() is None, reason="needs /proc (Linux)")
def test_a_restarted_server_takes_back_its_dead_instance_s_search_at_once(live: Live) -> None:
    search = live.submit({**TPE, "trials": 800, "warm_start": False})
    env = {
        **os.environ,
        "AUTOPAR_DATABASE_URL": live.url,
        "AUTOPAR_PORT": str(free_port()),
        "AUTOPAR_WORKER_LEASE_S": "30",
        "AUTOPAR_WORKER_POLL_S": "0.05",
        "AUTOPAR_LOG_LEVEL": "warning",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    server = subprocess.Popen(
        [str(Path(sys.executable).with_name("autopar")), "serve"], env=env, cwd=ROOT
    )

    def claimed() -> bool:
        assert server.poll() is None, "the server exited"
        return bool(live.search(search["id"])["status"] == "running")

    try:
        wait_for(claimed, "the embedded worker to claim the search", timeout_s=60)
        time.sleep(1)  # mid-search
    finally:
        server.send_signal(signal.SIGKILL)
        server.wait()
    with live.sessions() as session:
        row = session.get(SearchRow, search["id"])
        assert row is not None and row.lease_expires_at is not None
        dead_lease_ends = row.lease_expires_at

    # The server comes back (in this process): its embedded worker takes the search over while
    # the dead instance's lease still runs, instead of waiting it out.
    settings = Settings(
        database_url=live.url, migrate_on_startup=False, worker_poll_s=0.05, worker_lease_s=30
    )
    with serving(create_app(settings)):
        wait_for(lambda: live.search(search["id"])["attempts"] == 2, "the takeover")
        assert utcnow() < dead_lease_ends
        wait_for(lambda: live.search(search["id"])["status"] == "succeeded", "the search")
    assert_consistent(live, search["id"])


# PostgreSQL behind a faulty network ------------------------------------------------------
@dataclass
class Proxied:
    """The API and workers reaching the database through ``proxy``."""

    live: Live  # the test's own view of the database, direct
    proxy: FaultProxy
    url: str
    engine: Engine
    sessions: sessionmaker[Session]
    http: httpx.Client

    def worker(self, worker_id: str) -> SearchWorker:
        return SearchWorker(
            session_factory=self.sessions,
            database_url=self.url,
            options=WorkerOptions(lease_s=2, poll_s=0.05, heartbeat_s=0.25, db_timeouts=FAST),
            worker_id=worker_id,
        )


@pytest.fixture
def proxied(live: Live, database_backend: str) -> Iterator[Proxied]:
    assert database_backend == "postgresql"
    direct = make_url(live.url)
    with fault_proxy(direct.host or "127.0.0.1", direct.port or 5432) as proxy:
        url = direct.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        engine = make_engine(url, FAST)
        sessions = make_session_factory(engine)
        settings = Settings(database_url=url, migrate_on_startup=False, embedded_worker=False)
        app = create_app(settings, session_factory=sessions)
        try:
            with asgi_client(app) as http:
                yield Proxied(live, proxy, url, engine, sessions, http)
        finally:
            proxy.heal()
            engine.dispose()


def assert_unavailable(response: httpx.Response) -> None:
    assert response.status_code == 503, response.text
    assert response.json()["error"]["code"] == "unavailable"
    assert int(response.headers["retry-after"]) >= 1


MODEL = {
    "name": "fault-gpt",
    "num_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 8,
    "vocab_size": 1000,
}


@pytest.mark.slow
@pytest.mark.postgresql_only
def test_requests_fail_fast_while_the_database_refuses_and_recover(proxied: Proxied) -> None:
    http = proxied.http
    assert http.get("/healthz").status_code == 200  # a pooled connection, then the outage
    proxied.proxy.refuse()
    deadline = time.monotonic() + 5  # refused for 5 s
    while time.monotonic() < deadline:
        assert_unavailable(answered(lambda: http.get("/healthz")))
        assert_unavailable(answered(lambda: http.post("/v1/models", json=MODEL)))
        time.sleep(0.5)
    proxied.proxy.heal()
    assert answered(lambda: http.get("/healthz")).status_code == 200
    assert answered(lambda: http.get("/v1/models/fault-gpt")).status_code == 404  # not written
    assert answered(lambda: http.post("/v1/models", json=MODEL)).status_code == 201


@pytest.mark.slow
@pytest.mark.postgresql_only
def test_requests_fail_fast_in_a_black_hole_and_nothing_commits_later(proxied: Proxied) -> None:
    http = proxied.http
    model = {**MODEL, "name": "black-hole-gpt"}
    assert http.get("/healthz").status_code == 200
    proxied.proxy.black_hole()
    started = time.monotonic()
    try:
        # Each answers (a 503) instead of hanging, the pooled connection's and new ones.
        assert_unavailable(answered(lambda: http.get("/healthz")))
        assert_unavailable(answered(lambda: http.post("/v1/models", json=model)))
        assert_unavailable(answered(lambda: http.get("/v1/models")))
        time.sleep(max(0.0, 12 - (time.monotonic() - started)))  # the black hole lasts ~12 s
    finally:
        proxied.proxy.heal()
    assert answered(lambda: http.get("/healthz")).status_code == 200
    # The refused POST was rolled back, not committed once the network came back.
    time.sleep(1)
    assert answered(lambda: http.get("/v1/models/black-hole-gpt")).status_code == 404
    assert answered(lambda: http.post("/v1/models", json=model)).status_code == 201


@pytest.mark.slow
@pytest.mark.postgresql_only
def test_a_black_hole_holds_the_event_loop_for_the_leash_only(proxied: Proxied) -> None:
    """A read run in the event loop (app.loop_reads) when the network goes silent holds the loop
    for ``loop_read_s``, not for the client deadline: a request that needs no database answers
    meanwhile; the read answers its 503 from the thread pool; reads come back to the loop."""
    http = proxied.http
    loop_reads = loop_reads_of(proxied.engine)
    assert loop_reads is not None
    loop_reads.pause_s = 1.0
    assert http.get("/openapi.json").status_code == 200  # built once, before the outage
    assert http.get("/v1/searches/none").status_code == 404
    wait_for(lambda: loop_reads.open, "the loop's connection")
    proxied.proxy.black_hole()
    try:
        answers: list[httpx.Response] = []
        read = threading.Thread(target=lambda: answers.append(http.get("/v1/searches/none")))
        read.start()
        time.sleep(0.1)  # the read is in the loop, waiting for its answer
        started = time.monotonic()
        assert http.get("/openapi.json").status_code == 200
        held_s = time.monotonic() - started
        read.join(ANSWER_BOUND_S)
        assert not read.is_alive(), "the read hangs"
    finally:
        proxied.proxy.heal()
    assert held_s < FAST.loop_read_s + 0.5 < FAST.client_s
    assert_unavailable(answers[0])
    # Once the pause is over, a read reopens the loop's connection (in a worker thread).
    wait_for(
        lambda: (
            answered(lambda: http.get("/v1/searches/none")).status_code == 404 and loop_reads.open
        ),
        "reads back in the loop",
    )


@pytest.mark.slow
@pytest.mark.postgresql_only
def test_three_blips_during_one_search_do_not_fail_it(proxied: Proxied) -> None:
    live = proxied.live
    search = live.submit({**TPE, "trials": 100_000, "timeout_s": 10, "warm_start": False})
    workers = [proxied.worker("w1"), proxied.worker("w2")]
    threads = [threading.Thread(target=worker.run_forever) for worker in workers]
    for thread in threads:
        thread.start()
    try:
        wait_for(lambda: live.search(search["id"])["status"] == "running", "a claim")
        for _ in range(3):
            time.sleep(1.5)
            proxied.proxy.refuse()  # longer than the lease (2 s): it expires meanwhile
            time.sleep(2.5)
            proxied.proxy.heal()
        wait_for(
            lambda: live.search(search["id"])["status"] not in ("queued", "running"),
            "the search to end",
            timeout_s=60,
        )
    finally:
        for worker in workers:
            worker.stop()
        for thread in threads:
            thread.join(30)
    done = assert_consistent(live, search["id"])
    assert done["attempts"] == 1  # no outage was counted as a death
    assert done["outcome"]["status"] == "timeout"
