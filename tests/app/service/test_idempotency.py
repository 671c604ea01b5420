"""``Idempotency-Key`` on the creating POSTs: a replay answers the stored response and creates
nothing; the same key with another request is a 409; bad keys are a 422 naming the header."""

import secrets
import threading
from datetime import timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, func, insert, select
from sqlalchemy.orm import Session

from app.auth import create_key
from app.modelspecs import service as models_service
from app.orm import DEFAULT_TENANT, IdempotencyKeyRow, ModelSpecRow, SearchRow, utcnow
from tests.app.service.api_helpers import Snapshot, assert_error, error_fields
from tests.app.service.http_server import serve_app
from tests.app.service.search_helpers import EXHAUSTIVE

MODEL = {"name": "idem-gpt", "num_layers": 4, "hidden_size": 256}
MODEL |= {"num_attention_heads": 8, "vocab_size": 1000}
CLUSTER = {
    "name": "idem-cluster",
    "groups": [{"name": "a", "gpu": "A100-80GB", "num_nodes": 1, "gpus_per_node": 8}],
}
HF_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 256,
    "num_attention_heads": 8,
    "intermediate_size": 512,
    "vocab_size": 1000,
}


def post(client: httpx.Client, path: str, body: Any, key: str | None) -> httpx.Response:
    headers = {"Idempotency-Key": key} if key is not None else {}
    return client.post(path, json=body, headers=headers)


def count(connection: Connection, table: Any) -> int:
    return int(connection.execute(select(func.count()).select_from(table)).scalar_one())


@pytest.mark.parametrize(
    ("path", "body", "status_code", "table"),
    [
        ("/v1/models", MODEL, 201, ModelSpecRow),
        ("/v1/models/import-hf?name=idem-hf", HF_CONFIG, 201, ModelSpecRow),
        ("/v1/searches", EXHAUSTIVE, 202, SearchRow),
    ],
)
def test_a_replay_answers_the_stored_response_and_creates_nothing(
    client: httpx.Client,
    db_connection: Connection,
    snapshot: Snapshot,
    path: str,
    body: dict[str, Any],
    status_code: int,
    table: Any,
) -> None:
    rows_before = count(db_connection, table)
    first = post(client, path, body, "key-1")
    assert first.status_code == status_code, first.text
    assert "idempotent-replayed" not in first.headers
    assert count(db_connection, table) == rows_before + 1
    stored = snapshot()

    # The same document re-encoded (other key order) is the same request.
    replay = post(client, path, dict(reversed(list(body.items()))), "key-1")
    assert replay.status_code == status_code, replay.text
    assert replay.json() == first.json()
    assert replay.headers["location"] == first.headers["location"]
    assert replay.headers["idempotent-replayed"] == "true"
    assert snapshot() == stored  # nothing new, not even a second key row

    # Without a key (or with another one) it is a new request as before.
    again = post(client, path.replace("idem-hf", "idem-hf-2"), body | {"name": "other"}, "key-2")
    assert again.status_code == status_code, again.text
    assert again.json()["id"] != first.json()["id"]


def test_the_same_key_with_another_request_is_a_conflict(
    client: httpx.Client, snapshot: Snapshot
) -> None:
    assert post(client, "/v1/models", MODEL, "shared").status_code == 201
    stored = snapshot()
    other_body = assert_error(post(client, "/v1/models", MODEL | {"num_layers": 8}, "shared"), 409)
    assert other_body["code"] == "idempotency_key_reused"
    assert "Idempotency-Key 'shared'" in other_body["message"]
    other_path = assert_error(post(client, "/v1/clusters", CLUSTER, "shared"), 409)
    assert other_path["code"] == "idempotency_key_reused"
    other_query = post(client, "/v1/models/import-hf?name=a", HF_CONFIG, "hf")
    assert other_query.status_code == 201
    assert_error(post(client, "/v1/models/import-hf?name=b", HF_CONFIG, "hf"), 409)
    stored["model_specs"] = snapshot()["model_specs"]
    stored["idempotency_keys"] = snapshot()["idempotency_keys"]
    assert snapshot() == stored


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "must be 1 to 200 characters long"),
        ("k" * 201, "must be 1 to 200 characters long"),
        ("tab\there", "must hold printable ASCII characters only"),
    ],
)
def test_bad_keys_are_refused_naming_the_header(
    client: httpx.Client, snapshot: Snapshot, key: str, reason: str
) -> None:
    stored = snapshot()
    error = assert_error(post(client, "/v1/models", MODEL, key), 422, "invalid_input")
    assert error_fields(error) == ["Idempotency-Key"]
    assert error["details"][0]["reason"] == reason
    assert snapshot() == stored


def test_a_failed_request_releases_its_key(client: httpx.Client, db_connection: Connection) -> None:
    assert_error(post(client, "/v1/models", MODEL | {"num_layers": 0}, "retry-me"), 422)
    assert count(db_connection, IdempotencyKeyRow) == 0
    # Nothing was created, so the corrected request may use the key.
    assert post(client, "/v1/models", MODEL, "retry-me").status_code == 201


def _reserve(connection: Connection, key: str, *, age: timedelta, **values: Any) -> None:
    row = {"id": f"{len(key):032x}", "tenant": DEFAULT_TENANT, "key": key}
    row |= {"request_hash": "0" * 64, "created_at": utcnow() - age}
    connection.execute(insert(IdempotencyKeyRow).values(row | values))


def test_a_duplicate_while_the_first_is_in_flight_is_told_to_retry(
    client: httpx.Client, db_connection: Connection
) -> None:
    first = post(client, "/v1/models", MODEL, "in-flight")
    assert first.status_code == 201
    db_connection.execute(
        IdempotencyKeyRow.__table__.update().values(status_code=None, response=None)
    )
    response = post(client, "/v1/models", MODEL, "in-flight")
    error = assert_error(response, 409, "idempotency_in_progress")
    assert "still being answered" in error["message"]
    assert response.headers["retry-after"] == "1"


def test_stale_reservations_expired_keys_and_other_tenants_do_not_block(
    client: httpx.Client, db_connection: Connection
) -> None:
    # A reservation whose process died before answering (and whose model is gone).
    assert post(client, "/v1/models", MODEL | {"name": "m0"}, "stale").status_code == 201
    assert client.delete("/v1/models/m0").status_code == 204
    db_connection.execute(
        IdempotencyKeyRow.__table__.update().values(
            status_code=None, created_at=utcnow() - timedelta(minutes=10)
        )
    )
    _reserve(db_connection, "old", age=timedelta(hours=25), status_code=201, response={})
    _reserve(db_connection, "theirs", age=timedelta(0), tenant="other-team", status_code=201)
    for index, key in enumerate(("stale", "old", "theirs")):
        response = post(client, "/v1/models", MODEL | {"name": f"m{index}"}, key)
        assert response.status_code == 201, response.text
        assert "idempotent-replayed" not in response.headers
    keys = db_connection.execute(select(IdempotencyKeyRow.tenant, IdempotencyKeyRow.key)).all()
    mine = [(DEFAULT_TENANT, key) for key in ("stale", "old", "theirs")]
    assert sorted(keys) == sorted([*mine, ("other-team", "theirs")])


def test_a_duplicate_sent_while_the_first_runs_is_told_to_retry_then_replays(
    worker_database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over real HTTP, two connections: the second request with the key arrives while the first
    is inside its service call."""
    entered, release = threading.Event(), threading.Event()
    create_model = models_service.create_model

    def held(session: Any, *, spec: Any) -> Any:
        entered.set()
        assert release.wait(30)
        return create_model(session, spec=spec)

    monkeypatch.setattr(models_service, "create_model", held)
    key, body = f"job-{secrets.token_hex(4)}", MODEL | {"name": f"held-{secrets.token_hex(4)}"}
    first: dict[str, httpx.Response] = {}
    with serve_app(worker_database_url) as url:

        def send_first() -> None:
            with httpx.Client(base_url=url, timeout=60) as http:
                first["response"] = post(http, "/v1/models", body, key)

        sender = threading.Thread(target=send_first)
        sender.start()
        assert entered.wait(30)
        with httpx.Client(base_url=url, timeout=60) as http:
            duplicate = post(http, "/v1/models", body, key)
            release.set()
            sender.join(60)
            replay = post(http, "/v1/models", body, key)
            http.delete(f"/v1/models/{body['name']}")
    assert_error(duplicate, 409, "idempotency_in_progress")
    assert duplicate.headers["retry-after"] == "1"
    assert first["response"].status_code == 201, first["response"].text
    assert replay.status_code == 201 and replay.headers["idempotent-replayed"] == "true"
    assert replay.json() == first["response"].json()


CREATING_POSTS = [
    "/v1/models",
    "/v1/models/import-hf",
    "/v1/clusters",
    "/v1/searches",
    "/v1/profiles",
    "/v1/observations",
    "/v1/plans/{plan_id}/observations",
    "/v1/calibrations",
]


def test_the_openapi_documents_the_header_on_every_creating_post(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    for path in CREATING_POSTS:
        operation = paths[path]["post"]
        headers = [p for p in operation["parameters"] if p["in"] == "header"]
        assert [p["name"] for p in headers] == ["Idempotency-Key"], path
        assert "24 h" in headers[0]["description"]
        assert "409" in operation["responses"], path
    assert not any(
        p.get("in") == "header" for p in paths["/v1/estimate"]["post"].get("parameters", [])
    )


def test_keys_belong_to_the_callers_tenant(client: httpx.Client, db_connection: Connection) -> None:
    with Session(
        bind=db_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    ) as session:
        _, acme = create_key(session, tenant="acme")
        _, globex = create_key(session, tenant="globex", searches_per_minute=1)

    def as_(
        token: str, body: dict[str, Any], path: str = "/v1/models", key: str = "nightly"
    ) -> httpx.Response:
        headers = {"Idempotency-Key": key, "Authorization": f"Bearer {token}"}
        return client.post(path, json=body, headers=headers)

    theirs = as_(acme, MODEL)
    ours = as_(globex, MODEL | {"num_layers": 8})  # the same key, another tenant: no conflict
    assert (theirs.status_code, ours.status_code) == (201, 201)
    assert "idempotent-replayed" not in ours.headers
    assert as_(acme, MODEL).json()["id"] == theirs.json()["id"]
    assert as_(globex, MODEL | {"num_layers": 8}).json()["id"] == ours.json()["id"]
    # A replayed search creates nothing, so it does not count against the submission limit.
    search = as_(globex, EXHAUSTIVE, "/v1/searches", key="search")
    assert search.status_code == 202, search.text
    replay = as_(globex, EXHAUSTIVE, "/v1/searches", key="search")
    assert replay.status_code == 202 and replay.json()["id"] == search.json()["id"]
