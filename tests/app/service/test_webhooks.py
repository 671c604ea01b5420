"""Webhooks end to end: searches with a ``callback_url`` run by real workers, POSTing to a real
HTTP server on 127.0.0.1 that records what it gets; the delivery log in the API; the refusals
of bad callbacks."""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from sqlalchemy import delete, select, update

from app.auth import create_key
from app.main import create_app
from app.orm import ApiKeyRow, SearchRow, WebhookDeliveryRow, utcnow
from app.settings import Settings
from app.webhooks import repository as deliveries
from app.webhooks.sender import DeliveryPolicy
from app.webhooks.signing import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, verify
from app.workers import repository as workers
from app.workers.service import SearchWorker, WorkerOptions
from tests.app.service.api_helpers import asgi_client, assert_error, error_fields
from tests.app.service.search_helpers import EXHAUSTIVE, Live, wait_for

SECRET = "receiver-secret-0123456789"
SERVER_SECRET = "server-wide-secret-abcdef"
# Fast retries: 0.05 s, then 0.1 s; three attempts in all.
POLICY = DeliveryPolicy(max_attempts=3, backoff_s=0.05, backoff_max_s=0.1, timeout_s=5.0)


# A real receiver ------------------------------------------------------------------------------
@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    def payload(self) -> dict[str, Any]:
        return dict(json.loads(self.body))


@dataclass
class Receiver:
    """Answers each POST with the next of ``statuses`` (then 200), after ``gate`` opens."""

    url: str
    requests: list[Received] = field(default_factory=list)
    statuses: list[int] = field(default_factory=list)
    gate: threading.Event = field(default_factory=threading.Event)
    arrived: threading.Event = field(default_factory=threading.Event)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    state = Receiver(url="")
    state.gate.set()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["Content-Length"]))
            state.requests.append(Received(self.path, dict(self.headers), body, time.time()))
            state.arrived.set()
            state.gate.wait(30)
            code = state.statuses.pop(0) if state.statuses else 200
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, format: str, *args: Any) -> None:
            pass  # quiet test output

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks/autopar?team=ml"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.gate.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def closed_port_url() -> str:
    """A URL nothing listens on (the port was just free)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/hook"


# Workers --------------------------------------------------------------------------------------
def make_worker(
    live: Live, name: str, *, secret: str | None = None, policy: DeliveryPolicy = POLICY
) -> SearchWorker:
    return SearchWorker(
        session_factory=live.sessions,
        database_url=live.url,
        options=WorkerOptions(
            lease_s=30.0,
            poll_s=0.05,
            heartbeat_s=0.05,
            webhooks=policy,
            webhook_secret=secret,
            webhook_poll_s=0.02,
        ),
        worker_id=name,
    )


@contextmanager
def running(worker: SearchWorker) -> Iterator[SearchWorker]:
    """``worker.run_forever`` in a thread, as ``autopar worker`` runs it."""
    thread = threading.Thread(target=worker.run_forever, daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(30)
        assert not thread.is_alive()


def with_callback(url: str, secret: str | None = SECRET, **extra: Any) -> dict[str, Any]:
    body = {**EXHAUSTIVE, "callback_url": url, **extra}
    if secret is not None:
        body["callback_secret"] = secret
    return body


def deliveries_of(live: Live, search_id: str) -> list[dict[str, Any]]:
    response = live.http.get(f"/v1/searches/{search_id}/deliveries")
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["search_id"] == search_id
    return list(body["items"])


def wait_until_ended(live: Live, search_id: str) -> dict[str, Any]:
    def ended() -> bool:
        items = deliveries_of(live, search_id)
        return bool(items) and items[0]["status"] != "pending"

    wait_for(ended, f"the webhook of search {search_id} to be delivered or failed")
    [delivery] = deliveries_of(live, search_id)
    return delivery


def when(text: str) -> datetime:
    return datetime.fromisoformat(text)


# Delivery -------------------------------------------------------------------------------------
def test_a_finished_search_posts_one_signed_webhook(live: Live, receiver: Receiver) -> None:
    created = live.http.post("/v1/searches", json=with_callback(receiver.url))
    assert created.status_code == 202, created.text
    search = created.json()
    assert search["callback_url"] == receiver.url
    with running(make_worker(live, "w1")):
        delivery = wait_until_ended(live, search["id"])
        time.sleep(0.3)  # the worker polls on: nothing is sent twice
    assert len(receiver.requests) == 1
    [got] = receiver.requests
    assert got.path == "/hooks/autopar?team=ml"

    # What the receiver checks: the signature over the raw body, within the time tolerance.
    header = got.headers[SIGNATURE_HEADER]
    timestamp = int(header.split(",")[0].removeprefix("t="))
    assert abs(timestamp - got.at) < 5
    assert verify(SECRET, header, got.body)
    assert not verify(SECRET, header, got.body.replace(b"succeeded", b"failed"))
    assert not verify("not-the-secret-at-all", header, got.body)
    assert not verify(SECRET, header, got.body, now=timestamp + 301)  # a replay, later
    assert got.headers[EVENT_HEADER] == "search.succeeded"
    assert got.headers["Content-Type"] == "application/json"

    # The payload: the search as the API shows it, its best plan, links.
    payload = got.payload()
    assert payload["event"] == "search.succeeded"
    assert payload["delivery_id"] == got.headers[DELIVERY_HEADER] == delivery["id"]
    done = live.search(search["id"])
    assert done["status"] == "succeeded"
    assert payload["search"] == done
    best = live.plans(search["id"])[0]
    assert payload["best_plan"]["id"] == best["id"] == done["progress"]["best"]["plan_id"]
    assert payload["best_plan"]["rank"] == 1
    assert payload["best_plan"]["tokens_per_s"] == best["estimate"]["tokens_per_s"]
    assert payload["best_plan"]["step_time_s"] == best["estimate"]["step_time_s"]
    assert payload["best_plan"]["plan"] == best["plan"]
    assert payload["links"] == {
        "search": f"/v1/searches/{search['id']}",
        "plans": f"/v1/searches/{search['id']}/plans",
        "export": f"/v1/plans/{best['id']}/export?format={{format}}",
    }
    export = live.http.get(payload["links"]["export"].format(format="megatron"))
    assert export.status_code == 200, export.text

    # The delivery log.
    assert delivery["event"] == "search.succeeded" and delivery["url"] == receiver.url
    assert delivery["status"] == "delivered" and delivery["attempts"] == 1
    assert delivery["next_attempt_at"] is None and delivery["delivered_at"] is not None
    [attempt] = delivery["log"]
    assert attempt["attempt"] == 1 and attempt["status_code"] == 200
    assert attempt["error"] is None and 0 <= attempt["duration_s"] < 5

    # The secret is never shown: not on submit, read, list, plans, deliveries, nor sent.
    shown = [
        created.text,
        live.http.get(f"/v1/searches/{search['id']}").text,
        live.http.get("/v1/searches").text,
        live.http.get(f"/v1/searches/{search['id']}/plans").text,
        live.http.get(f"/v1/searches/{search['id']}/deliveries").text,
        got.body.decode(),
    ]
    for text in shown:
        assert SECRET not in text
    assert "callback_secret" not in json.dumps(done)


def test_a_failing_receiver_is_retried_with_backoff(live: Live, receiver: Receiver) -> None:
    receiver.statuses = [500, 503]  # then 200
    search = live.submit(with_callback(receiver.url))
    with running(make_worker(live, "w1")):
        delivery = wait_until_ended(live, search["id"])
    assert delivery["status"] == "delivered" and delivery["attempts"] == 3
    log = delivery["log"]
    assert [entry["status_code"] for entry in log] == [500, 503, 200]
    assert [entry["attempt"] for entry in log] == [1, 2, 3]
    # Each retry waited its backoff (0.05 s, then 0.1 s) after the attempt before it.
    starts = [when(entry["at"]) for entry in log]
    assert starts[1] - starts[0] >= timedelta(seconds=0.05)
    assert starts[2] - starts[1] >= timedelta(seconds=0.1)

    # Every attempt is the same delivery (one id to de-duplicate on), each signed afresh.
    assert len(receiver.requests) == 3
    assert {got.headers[DELIVERY_HEADER] for got in receiver.requests} == {delivery["id"]}
    assert len({got.body for got in receiver.requests}) == 1
    for got in receiver.requests:
        assert verify(SECRET, got.headers[SIGNATURE_HEADER], got.body)


def test_a_receiver_that_is_down_fails_the_delivery_and_retry_tries_again(
    live: Live, receiver: Receiver
) -> None:
    search = live.submit(with_callback(closed_port_url()))
    with running(make_worker(live, "w1")):
        delivery = wait_until_ended(live, search["id"])
    assert live.search(search["id"])["status"] == "succeeded"  # the search itself is fine
    assert delivery["status"] == "failed" and delivery["attempts"] == POLICY.max_attempts
    assert delivery["next_attempt_at"] is None and delivery["delivered_at"] is None
    assert len(delivery["log"]) == POLICY.max_attempts
    for entry in delivery["log"]:
        assert entry["status_code"] is None
        assert "ConnectError" in entry["error"] and len(entry["error"]) <= 300

    # Once the receiver is back, a retry sends it again: one more attempt.
    retry_path = f"/v1/searches/{search['id']}/deliveries/{delivery['id']}/retry"
    with live.sessions() as session:
        session.execute(
            update(SearchRow).where(SearchRow.id == search["id"]).values(callback_url=receiver.url)
        )
        session.execute(
            update(WebhookDeliveryRow)
            .where(WebhookDeliveryRow.id == delivery["id"])
            .values(url=receiver.url)
        )
        session.commit()
    requeued = live.http.post(retry_path)
    assert requeued.status_code == 202, requeued.text
    assert requeued.json()["status"] == "pending"
    assert make_worker(live, "w2").deliver_webhooks() == 1
    [again] = deliveries_of(live, search["id"])
    assert again["status"] == "delivered" and again["attempts"] == POLICY.max_attempts + 1
    assert again["log"][-1]["status_code"] == 200 and len(receiver.requests) == 1

    # Only a failed delivery can be retried; unknown ones are 404.
    assert_error(live.http.post(retry_path), 409, "conflict")
    unknown = f"/v1/searches/{search['id']}/deliveries/0123456789abcdef0123456789abcdef/retry"
    assert_error(live.http.post(unknown), 404, "not_found")


def test_cancelling_a_queued_search_sends_search_cancelled(live: Live, receiver: Receiver) -> None:
    search = live.submit(with_callback(receiver.url))
    cancelled = live.http.post(f"/v1/searches/{search['id']}/cancel")
    assert cancelled.status_code == 202 and cancelled.json()["status"] == "cancelled"
    [queued] = deliveries_of(live, search["id"])  # written with the cancellation
    assert queued["event"] == "search.cancelled" and queued["status"] == "pending"
    assert queued["attempts"] == 0 and queued["log"] == []
    # Cancelling again is a no-op: no second webhook.
    assert live.http.post(f"/v1/searches/{search['id']}/cancel").status_code == 202
    assert len(deliveries_of(live, search["id"])) == 1

    with running(make_worker(live, "w1")):
        delivery = wait_until_ended(live, search["id"])
    assert delivery["status"] == "delivered"
    [got] = receiver.requests
    payload = got.payload()
    assert payload["event"] == got.headers[EVENT_HEADER] == "search.cancelled"
    assert payload["search"]["status"] == "cancelled"
    assert payload["best_plan"] is None and payload["links"]["export"] is None
    assert verify(SECRET, got.headers[SIGNATURE_HEADER], got.body)


def test_a_failed_search_sends_search_failed(live: Live, receiver: Receiver) -> None:
    search = live.submit(with_callback(receiver.url))
    broken = {**search["request"], "top_k": 0}  # a stored request the worker cannot run
    with live.sessions() as session:
        session.execute(
            update(SearchRow).where(SearchRow.id == search["id"]).values(request=broken)
        )
        session.commit()
    worker = make_worker(live, "w1")
    assert worker.run_once() == search["id"]
    assert worker.deliver_webhooks() == 1
    [got] = receiver.requests
    payload = got.payload()
    assert payload["event"] == "search.failed"
    assert payload["search"]["status"] == "failed" and "top_k" in payload["search"]["error"]
    assert payload["best_plan"] is None


def test_a_search_abandoned_by_its_workers_sends_search_failed(
    live: Live, receiver: Receiver
) -> None:
    search = live.submit(with_callback(receiver.url))
    with live.sessions() as session:  # its third worker died: the next claim fails it
        session.execute(
            update(SearchRow)
            .where(SearchRow.id == search["id"])
            .values(
                status="running",
                attempts=workers.MAX_ATTEMPTS,
                lease_owner="dead",
                lease_expires_at=utcnow() - timedelta(seconds=1),
                started_at=utcnow() - timedelta(seconds=60),
            )
        )
        session.commit()
    worker = make_worker(live, "w1")
    assert worker.run_once() is None
    [delivery] = deliveries_of(live, search["id"])
    assert delivery["event"] == "search.failed"
    assert worker.deliver_webhooks() == 1
    payload = receiver.requests[0].payload()
    assert payload["search"]["status"] == "failed"
    assert "renewing the lease" in payload["search"]["error"]


def test_the_servers_secret_signs_when_the_search_has_none(live: Live, receiver: Receiver) -> None:
    settings = Settings(
        database_url=live.url,
        migrate_on_startup=False,
        embedded_worker=False,
        webhook_secret=SERVER_SECRET,
    )
    with asgi_client(create_app(settings, session_factory=live.sessions)) as http:
        created = http.post("/v1/searches", json=with_callback(receiver.url, secret=None))
    assert created.status_code == 202, created.text
    assert SERVER_SECRET not in created.text
    worker = make_worker(live, "w1", secret=SERVER_SECRET)
    assert worker.run_once() == created.json()["id"]
    assert worker.deliver_webhooks() == 1
    [got] = receiver.requests
    assert verify(SERVER_SECRET, got.headers[SIGNATURE_HEADER], got.body)
    assert not verify(SECRET, got.headers[SIGNATURE_HEADER], got.body)


def test_a_slow_receiver_does_not_hold_up_the_searches(live: Live, receiver: Receiver) -> None:
    receiver.gate.clear()  # the receiver holds the first webhook until the test lets go
    first = live.submit(with_callback(receiver.url))
    patient = DeliveryPolicy(max_attempts=3, timeout_s=60.0)  # the held request must not time out
    with running(make_worker(live, "w1", policy=patient)):
        assert receiver.arrived.wait(60), "the first webhook never came"
        second = live.submit(EXHAUSTIVE)
        wait_for(lambda: live.search(second["id"])["status"] == "succeeded", "the 2nd search")
        [in_flight] = deliveries_of(live, first["id"])
        assert in_flight["status"] == "pending" and in_flight["log"] == []  # still sending
        receiver.gate.set()
        delivery = wait_until_ended(live, first["id"])
    assert delivery["status"] == "delivered" and delivery["attempts"] == 1


def test_two_workers_never_send_one_delivery_twice(live: Live, receiver: Receiver) -> None:
    search = live.submit(with_callback(receiver.url))
    assert make_worker(live, "runner").run_once() == search["id"]
    [delivery] = deliveries_of(live, search["id"])

    # The claim itself: of two claims on the same due delivery, the second finds it taken.
    now = utcnow()
    with live.sessions() as session:
        first = deliveries.claim(
            session, delivery_id=delivery["id"], attempts=0, now=now, hold_s=60
        )
        second = deliveries.claim(
            session, delivery_id=delivery["id"], attempts=0, now=now, hold_s=60
        )
        assert first is not None and first.attempt == 1 and second is None
        # Not due again until the claim runs out (the claimer died mid-send, say).
        assert deliveries.due(session, now=now + timedelta(seconds=59), limit=10) == []
        assert deliveries.due(session, now=now + timedelta(seconds=61), limit=10) == [
            (delivery["id"], 1)
        ]
        session.execute(
            update(WebhookDeliveryRow)
            .where(WebhookDeliveryRow.id == delivery["id"])
            .values(attempts=0, next_attempt_at=now)
        )
        session.commit()

    # Four workers racing over it: one POST.
    racers = [make_worker(live, f"r{i}") for i in range(4)]
    barrier = threading.Barrier(len(racers))
    made: list[int] = []

    def race(worker: SearchWorker) -> None:
        barrier.wait()
        made.append(worker.deliver_webhooks())

    threads = [threading.Thread(target=race, args=(worker,)) for worker in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(made) == [0, 0, 0, 1]
    assert len(receiver.requests) == 1
    [done] = deliveries_of(live, search["id"])
    assert done["status"] == "delivered" and done["attempts"] == 1


# The API --------------------------------------------------------------------------------------
@pytest.fixture
def tenant_keys(live: Live) -> Iterator[dict[str, str]]:
    """API keys of two tenants (access control on), removed afterwards (off again)."""
    with live.sessions() as session:
        _, acme = create_key(session, tenant="acme")
        _, globex = create_key(session, tenant="globex")
    try:
        yield {"acme": acme, "globex": globex}
    finally:
        with live.sessions() as session:
            session.execute(delete(ApiKeyRow))
            session.commit()


def test_a_delivery_belongs_to_its_searchs_tenant(
    live: Live, receiver: Receiver, tenant_keys: dict[str, str]
) -> None:
    acme = {"Authorization": f"Bearer {tenant_keys['acme']}"}
    globex = {"Authorization": f"Bearer {tenant_keys['globex']}"}
    created = live.http.post("/v1/searches", json=with_callback(receiver.url), headers=acme)
    assert created.status_code == 202, created.text
    search_id = created.json()["id"]
    worker = make_worker(live, "w1")
    assert worker.run_once() == search_id
    with live.sessions() as session:
        [row] = session.scalars(
            select(WebhookDeliveryRow).where(WebhookDeliveryRow.search_id == search_id)
        ).all()
        assert row.tenant == "acme"
    path = f"/v1/searches/{search_id}/deliveries"
    assert live.http.get(path, headers=acme).json()["items"][0]["id"] == row.id
    assert_error(live.http.get(path, headers=globex), 404, "not_found")
    assert_error(live.http.post(f"{path}/{row.id}/retry", headers=globex), 404, "not_found")
    assert_error(live.http.get(path), 401, "unauthorized")


def test_deliveries_of_unknown_searches_are_404_and_of_others_empty(live: Live) -> None:
    assert_error(live.http.get("/v1/searches/nope/deliveries"), 404, "not_found")
    unknown = "0123456789abcdef0123456789abcdef"
    assert_error(live.http.get(f"/v1/searches/{unknown}/deliveries"), 404, "not_found")
    search = live.submit(EXHAUSTIVE)
    assert search["callback_url"] is None
    assert deliveries_of(live, search["id"]) == []
    live.http.post(f"/v1/searches/{search['id']}/cancel")
    assert deliveries_of(live, search["id"]) == []  # no callback_url: nothing to send


def test_the_openapi_document_shows_the_deliveries_and_hides_the_secret(
    client: httpx.Client,
) -> None:
    document = client.get("/openapi.json").json()
    assert "/v1/searches/{search_id}/deliveries" in document["paths"]
    assert "/v1/searches/{search_id}/deliveries/{delivery_id}/retry" in document["paths"]
    schemas = document["components"]["schemas"]
    assert schemas["SearchCreate"]["properties"]["callback_secret"]["writeOnly"] is True
    assert "callback_secret" not in schemas["SearchRecord"]["properties"]
    assert "callback_url" in schemas["SearchRecord"]["properties"]


BASE: dict[str, Any] = {**EXHAUSTIVE, "callback_secret": SECRET}


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({**BASE, "callback_url": "ftp://example.com/hook"}, "callback_url", "http"),
        ({**BASE, "callback_url": "example.com/hook"}, "callback_url", "http"),
        ({**BASE, "callback_url": "http:///hook"}, "callback_url", "host"),
        ({**BASE, "callback_url": "https://exa mple.com/"}, "callback_url", "whitespace"),
        ({**BASE, "callback_url": "https://example.com:99999/"}, "callback_url", "port"),
        ({**BASE, "callback_url": "https://[::1/"}, "callback_url", "URL"),
        ({**BASE, "callback_url": "https://hooks..example.com/"}, "callback_url", "host"),
        ({**BASE, "callback_url": f"https://{'a' * 64}.example.com/"}, "callback_url", "host"),
        ({**BASE, "callback_url": "https://e.com/" + "a" * 2000}, "callback_url", "2000"),
        ({**BASE, "callback_url": 42}, "callback_url", "string"),
        (
            {**EXHAUSTIVE, "callback_url": "https://e.com/", "callback_secret": "short"},
            "callback_secret",
            "16",
        ),
        (
            {**EXHAUSTIVE, "callback_url": "https://e.com/", "callback_secret": "x" * 201},
            "callback_secret",
            "200",
        ),
        ({**EXHAUSTIVE, "callback_url": "https://e.com/"}, "callback_url", "AUTOPAR_WEBHOOK"),
        (BASE, "callback_secret", "callback_url"),
    ],
)
def test_bad_callbacks_are_422_naming_the_field(
    client: httpx.Client, snapshot: Any, body: dict[str, Any], field: str, words: str
) -> None:
    before = snapshot()
    response = client.post("/v1/searches", json=body)
    error = assert_error(response, 422, "invalid_input")
    assert error_fields(error) == [field], error
    assert words in error["details"][0]["reason"], error
    assert SECRET not in response.text
    assert snapshot() == before
