"""Access control over HTTP: API keys name a tenant; another tenant's rows are not there (404)
for reads, writes, deletes, exports and lists; presets stay shared and read-only; revoked and
unknown keys are refused; the submission limit answers 429 with Retry-After; tokens are never
stored or logged in clear."""

import hashlib
import json
import logging
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, select, text
from sqlalchemy.orm import Session
from starlette.requests import Request

from app.auth import create_key, revoke_key
from app.auth.access import admit_deferred, defer_admission
from app.orm import ApiKeyRow, Base, PlanRow
from app.tenancy import tenant_of
from tests.app.service.api_helpers import assert_error
from tests.support.calibration_data import TRUTH, measured, observations
from tests.support.calibration_data import unmeasured_profile as synthetic_profile

MODEL = {
    "name": "tiny",
    "num_layers": 4,
    "hidden_size": 512,
    "num_attention_heads": 8,
    "vocab_size": 32000,
}
SEARCH = {
    "preset": "llama3-8b",
    "training": {"seq_length": 4096, "global_batch_size": 64},
    "cluster_id": "dgx-a100-1n",
    "sampler": "exhaustive",
}
DENSE = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 1, "recompute": "full"}
Keys = dict[str, str]


def auth(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def admin_session(db_connection: Connection) -> Session:
    return Session(
        bind=db_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )


@pytest.fixture
def keys(db_connection: Connection) -> Keys:
    with admin_session(db_connection) as session:
        _, acme = create_key(session, tenant="acme", name="acme-ci")
        _, globex = create_key(session, tenant="globex")
    return {"acme": acme, "globex": globex}


def store_plan(client: httpx.Client, db_connection: Connection, token: str) -> tuple[str, str]:
    """A search of the key's tenant and one plan row of it, as its worker would store it."""
    response = client.post("/v1/searches", json=SEARCH, headers=auth(token))
    assert response.status_code == 202, response.text
    search = response.json()
    with admin_session(db_connection) as session:
        search_tenant = session.execute(
            text("SELECT tenant FROM searches WHERE id = :id"), {"id": search["id"]}
        ).scalar_one()
        row = PlanRow(
            search_id=search["id"],
            tenant=search_tenant,
            rank=1,
            plan=DENSE,
            plan_hash=hashlib.sha256(json.dumps(DENSE, sort_keys=True).encode()).hexdigest(),
            feasible=True,
        )
        session.add(row)
        session.commit()
        return search["id"], row.id


# ---- turning access control on ----------------------------------------------------------------
def test_without_keys_the_service_is_open(client: httpx.Client) -> None:
    assert client.get("/v1/models").status_code == 200


def test_the_first_key_turns_access_control_on(client: httpx.Client, keys: Keys) -> None:
    error = assert_error(client.get("/v1/models"), 401, "unauthorized")
    assert "API key" in error["message"]
    response = client.get("/v1/models")
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert_error(client.get("/v1/models", headers={"Authorization": "Basic abc"}), 401)
    assert_error(client.get("/v1/models", headers=auth("ap_not-a-key")), 401)
    assert client.get("/v1/models", headers=auth(keys["acme"])).status_code == 200
    # Probes, the version and the built-in presets need no key.
    assert client.get("/healthz").status_code == 200
    assert client.get("/v1/version").status_code == 200
    assert client.get("/v1/presets").status_code == 200


def test_a_revoked_key_is_refused_at_once(
    client: httpx.Client, db_connection: Connection, keys: Keys
) -> None:
    assert client.get("/v1/searches", headers=auth(keys["globex"])).status_code == 200
    with admin_session(db_connection) as session:
        key_id = session.scalars(select(ApiKeyRow.id).where(ApiKeyRow.tenant == "globex")).one()
        revoke_key(session, key=key_id)
    assert_error(client.get("/v1/searches", headers=auth(keys["globex"])), 401)
    assert client.get("/v1/searches", headers=auth(keys["acme"])).status_code == 200


def test_a_refused_key_is_a_401_whatever_else_is_wrong(client: httpx.Client, keys: Keys) -> None:
    # The key is checked in the service's thread (app.db.run_in_session); a request failing
    # before it (its body, a header, its path) is still refused as unauthorized first.
    for headers in ({}, auth("ap_not-a-key")):
        assert_error(client.post("/v1/estimate", json={"plan": 1}, headers=headers), 401)
        assert_error(client.post("/v1/estimate", content=b"{", headers=headers), 401)
        long_key = {**headers, "Idempotency-Key": "x" * 201}
        assert_error(client.post("/v1/searches", json=SEARCH, headers=long_key), 401)
        assert_error(client.get(f"/v1/searches/{'a' * 201}", headers=headers), 401)
    # With a valid key the same requests get their own errors.
    assert (
        client.post("/v1/estimate", json={"plan": 1}, headers=auth(keys["acme"])).status_code == 422
    )
    assert client.get(f"/v1/searches/{'a' * 201}", headers=auth(keys["acme"])).status_code == 422


def test_a_session_not_admitted_yet_cannot_reach_the_database(db_connection: Connection) -> None:
    session = admin_session(db_connection)
    defer_admission(Request({"type": "http", "headers": []}), session, require_auth=False)
    with pytest.raises(RuntimeError, match="before the request was admitted"):
        session.execute(text("SELECT 1"))
    admit_deferred(session)  # what run_in_session does first, in the service's thread
    assert session.execute(text("SELECT 1")).scalar() == 1
    assert tenant_of(session) == "default"
    session.close()


# ---- isolation --------------------------------------------------------------------------------
def test_specs_of_another_tenant_are_not_there(client: httpx.Client, keys: Keys) -> None:
    acme, globex = auth(keys["acme"]), auth(keys["globex"])
    created = client.post("/v1/models", json=MODEL, headers=acme)
    assert created.status_code == 201, created.text
    model_id = created.json()["id"]
    assert client.get(f"/v1/models/{model_id}", headers=acme).status_code == 200
    assert_error(client.get(f"/v1/models/{model_id}", headers=globex), 404)
    assert_error(client.get("/v1/models/tiny", headers=globex), 404)
    assert_error(client.delete(f"/v1/models/{model_id}", headers=globex), 404)
    names = [m["name"] for m in client.get("/v1/models?limit=200", headers=globex).json()["items"]]
    assert "tiny" not in names and "llama3-8b" in names  # presets are shared
    # The same name is free in another tenant; a preset's name is taken everywhere.
    assert client.post("/v1/models", json=MODEL, headers=globex).status_code == 201
    preset = client.get("/v1/models/llama3-8b", headers=globex).json()
    assert_error(client.post("/v1/models", json=preset["spec"], headers=globex), 409)
    assert_error(client.delete("/v1/models/llama3-8b", headers=globex), 409)
    # A search may not use another tenant's stored model.
    body = {**SEARCH, "model_id": model_id}
    del body["preset"]
    response = client.post("/v1/searches", json=body, headers=acme)
    assert response.status_code == 202, response.text
    assert_error(client.post("/v1/searches", json=body, headers=globex), 422)
    assert client.get(f"/v1/models/{model_id}", headers=acme).json()["name"] == "tiny"


def test_searches_plans_and_exports_of_another_tenant_are_not_there(
    client: httpx.Client, db_connection: Connection, keys: Keys
) -> None:
    acme, globex = auth(keys["acme"]), auth(keys["globex"])
    search_id, plan_id = store_plan(client, db_connection, keys["acme"])
    assert client.get(f"/v1/searches/{search_id}", headers=acme).status_code == 200
    assert client.get(f"/v1/plans/{plan_id}", headers=acme).status_code == 200
    export = client.get(f"/v1/plans/{plan_id}/export?format=megatron", headers=acme)
    assert export.status_code == 200, export.text
    for path in (
        f"/v1/searches/{search_id}",
        f"/v1/searches/{search_id}/plans",
        f"/v1/plans/{plan_id}",
        f"/v1/plans/{plan_id}/export?format=megatron",
        f"/v1/plans/{plan_id}/observations",
    ):
        assert_error(client.get(path, headers=globex), 404)
    assert_error(client.post(f"/v1/searches/{search_id}/cancel", headers=globex), 404)
    assert client.get("/v1/searches", headers=globex).json()["items"] == []
    observed = {"step_time_s": 1.0, "name": "run"}
    assert_error(
        client.post(f"/v1/plans/{plan_id}/observations", json=observed, headers=globex), 404
    )
    # Nothing of acme's changed.
    assert client.get(f"/v1/searches/{search_id}", headers=acme).json()["status"] == "queued"


def test_measurements_and_calibrations_of_another_tenant_are_not_there(
    client: httpx.Client, keys: Keys
) -> None:
    acme, globex = auth(keys["acme"]), auth(keys["globex"])
    profiles, observed = measured([synthetic_profile()], observations(), TRUTH)
    body = {"profile": profiles[0].model_dump(mode="json")}
    profile_id = client.post("/v1/profiles", json=body, headers=acme).json()["id"]
    for item in observed:
        run = item.model_dump(mode="json", include={"model", "training", "cluster", "plan"})
        run.update(name=item.name, source=item.source, step_time_s=item.step_time_s)
        assert client.post("/v1/observations", json=run, headers=acme).status_code == 201
    assert_error(client.get(f"/v1/profiles/{profile_id}", headers=globex), 404)
    assert_error(client.delete(f"/v1/profiles/{profile_id}", headers=globex), 404)
    assert client.get("/v1/observations", headers=globex).json()["items"] == []
    fit = {"name": "lab", "profile_ids": [profile_id], "observation_sources": ["cpu runs"]}
    assert_error(client.post("/v1/calibrations", json=fit, headers=globex), 422)
    created = client.post("/v1/calibrations", json=fit, headers=acme)
    assert created.status_code == 201, created.text
    assert_error(client.get("/v1/calibrations/lab", headers=globex), 404)
    estimate = {"preset": "llama3-8b", "training": SEARCH["training"]}
    estimate |= {"cluster_id": "dgx-a100-1n", "plan": DENSE, "calibration": "lab"}
    assert client.post("/v1/estimate", json=estimate, headers=acme).status_code == 200
    assert_error(client.post("/v1/estimate", json=estimate, headers=globex), 422)
    assert client.get("/v1/profiles", headers=globex).json()["items"] == []
    assert client.get("/v1/calibrations", headers=globex).json()["items"] == []


# ---- limits and secrecy -----------------------------------------------------------------------
def test_the_submission_limit_is_per_key(client: httpx.Client, db_connection: Connection) -> None:
    with admin_session(db_connection) as session:
        _, limited = create_key(session, tenant="acme", searches_per_minute=2)
        _, other = create_key(session, tenant="acme")
    for _ in range(2):
        assert client.post("/v1/searches", json=SEARCH, headers=auth(limited)).status_code == 202
    response = client.post("/v1/searches", json=SEARCH, headers=auth(limited))
    error = assert_error(response, 429, "rate_limited")
    assert "2 searches per minute" in error["message"]
    # The oldest of the two searches is seconds old: it leaves the one-minute window in ~60 s.
    assert 55 <= int(response.headers["Retry-After"]) <= 61
    assert client.post("/v1/searches", json=SEARCH, headers=auth(other)).status_code == 202
    # Reads are not limited.
    assert client.get("/v1/searches", headers=auth(limited)).status_code == 200


def test_tokens_are_never_stored_or_logged_in_clear(
    client: httpx.Client,
    keys: Keys,
    snapshot: Callable[[], dict[str, list[str]]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    client.get("/v1/models", headers=auth(keys["acme"]))
    client.get("/v1/models", headers=auth(keys["acme"][:-1] + "x"))
    client.post("/v1/searches", json=SEARCH, headers=auth(keys["acme"]))
    stored = json.dumps(snapshot())
    logged = caplog.text
    for token in keys.values():
        secret = token[len("ap_") + 8 :]
        assert secret not in stored and secret not in logged
        assert hashlib.sha256(token.encode()).hexdigest() in stored
    assert set(Base.metadata.tables) >= {"api_keys"}


def _tenant_of(db_connection: Connection, table: str, row_id: str) -> Any:
    statement = text(f"SELECT tenant FROM {table} WHERE id = :id")
    return db_connection.execute(statement, {"id": row_id}).scalar_one()


def test_rows_are_stamped_with_the_callers_tenant(
    client: httpx.Client, db_connection: Connection, keys: Keys
) -> None:
    model = client.post("/v1/models", json=MODEL, headers=auth(keys["globex"])).json()
    search = client.post("/v1/searches", json=SEARCH, headers=auth(keys["globex"])).json()
    assert _tenant_of(db_connection, "model_specs", model["id"]) == "globex"
    assert _tenant_of(db_connection, "searches", search["id"]) == "globex"
    preset = client.get("/v1/models/llama3-8b", headers=auth(keys["globex"])).json()
    assert _tenant_of(db_connection, "model_specs", preset["id"]) is None
