"""The server's limits, each a clear 4xx that names what to change: a cluster's GPUs (in every
request that takes one), a search's trials and time budget, and the searches one tenant may
have queued or running at once (429 with Retry-After). Another tenant is not held back by them.
"""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from sqlalchemy import Connection, update
from sqlalchemy.orm import Session, sessionmaker

from app.auth import create_key
from app.main import create_app
from app.orm import SearchRow
from app.settings import Settings
from tests.app.service.api_helpers import asgi_client, assert_error

MAX_GPUS = 64  # dgx-a100-8n has 64, dgx-h100-16n 128
MAX_TRIALS = 500
MAX_TIMEOUT_S = 120.0
MAX_ACTIVE = 2
SEARCH: dict[str, Any] = {
    "preset": "llama3-8b",
    "training": "llama3-8k",
    "cluster_id": "dgx-a100-8n",
    "trials": 50,
}
PLAN = {"dp": 64, "tp": 1, "pp": 1, "micro_batch_size": 1, "zero_stage": 3, "recompute": "full"}


def big_cluster(nodes: int) -> dict[str, Any]:
    return {
        "name": "big",
        "groups": [{"name": "h100", "gpu": "H100-80GB", "num_nodes": nodes, "gpus_per_node": 8}],
    }


@pytest.fixture
def limited(service_database_url: str, db_connection: Connection) -> Iterator[httpx.Client]:
    """The API with small limits, on the per-test connection that is rolled back afterwards."""
    settings = Settings(
        database_url=service_database_url,
        migrate_on_startup=False,
        embedded_worker=False,
        max_cluster_gpus=MAX_GPUS,
        max_search_trials=MAX_TRIALS,
        max_search_timeout_s=MAX_TIMEOUT_S,
        max_active_searches_per_tenant=MAX_ACTIVE,
    )
    factory = sessionmaker(
        bind=db_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    with asgi_client(create_app(settings, session_factory=factory)) as http:
        yield http


def limit_error(response: httpx.Response, status_code: int, field: str) -> str:
    error = assert_error(response, status_code, "limit_exceeded")
    assert [detail["field"] for detail in error["details"]] == [field], error
    return str(error["message"])


# ---- cluster size ------------------------------------------------------------------------------
def test_storing_a_cluster_over_the_limit_is_a_422(limited: httpx.Client) -> None:
    message = limit_error(limited.post("/v1/clusters", json=big_cluster(9)), 422, "groups")
    assert "72 GPUs" in message and f"at most {MAX_GPUS} GPUs" in message
    assert "AUTOPAR_MAX_CLUSTER_GPUS" in message
    assert limited.post("/v1/clusters", json=big_cluster(8)).status_code == 201


EXTRA: dict[str, dict[str, Any]] = {
    "/v1/estimate": {"plan": PLAN},
    "/v1/searches": {},
    "/v1/observations": {"plan": PLAN, "step_time_s": 10.0},
}


@pytest.mark.parametrize("path", sorted(EXTRA))
def test_an_inline_cluster_over_the_limit_is_a_422(limited: httpx.Client, path: str) -> None:
    body = {
        "preset": "llama3-8b",
        "training": "llama3-8k",
        "cluster": big_cluster(9),
        **EXTRA[path],
    }
    message = limit_error(limited.post(path, json=body), 422, "cluster")
    assert f"at most {MAX_GPUS} GPUs" in message


def test_a_stored_cluster_over_the_limit_is_a_422_at_cluster_id(limited: httpx.Client) -> None:
    """dgx-h100-16n (128 GPUs) is a preset, stored before the limit was set this low."""
    body = {**SEARCH, "cluster_id": "dgx-h100-16n"}
    message = limit_error(limited.post("/v1/searches", json=body), 422, "cluster_id")
    assert "128 GPUs" in message
    estimate = {**body, "plan": PLAN}
    estimate.pop("trials")
    limit_error(limited.post("/v1/estimate", json=estimate), 422, "cluster_id")


def test_a_cluster_at_the_limit_is_priced(limited: httpx.Client) -> None:
    body = {"preset": "llama3-8b", "training": "llama3-8k", "cluster_id": "dgx-a100-8n"}
    response = limited.post("/v1/estimate", json={**body, "plan": PLAN})
    assert response.status_code == 200, response.text


def test_the_default_limit_admits_real_clusters(client: httpx.Client) -> None:
    """16,384 H100 (Llama 3 405B's run) is far below the default 2^20 GPUs."""
    assert client.post("/v1/clusters", json=big_cluster(2048)).status_code == 201


# ---- a search's budget -------------------------------------------------------------------------
def test_trials_over_the_limit_are_a_422(limited: httpx.Client) -> None:
    body = {**SEARCH, "trials": MAX_TRIALS + 1}
    message = limit_error(limited.post("/v1/searches", json=body), 422, "trials")
    assert f"at most {MAX_TRIALS}" in message and "AUTOPAR_MAX_SEARCH_TRIALS" in message
    ok = limited.post("/v1/searches", json={**SEARCH, "trials": MAX_TRIALS})
    assert ok.status_code == 202, ok.text


def test_a_time_budget_over_the_limit_is_a_422(limited: httpx.Client) -> None:
    body = {**SEARCH, "timeout_s": MAX_TIMEOUT_S + 0.5}
    message = limit_error(limited.post("/v1/searches", json=body), 422, "timeout_s")
    assert "at most 120 s" in message and "AUTOPAR_MAX_SEARCH_TIMEOUT_S" in message
    ok = limited.post("/v1/searches", json={**SEARCH, "timeout_s": MAX_TIMEOUT_S})
    assert ok.status_code == 202, ok.text


def test_a_refused_search_stores_nothing(limited: httpx.Client) -> None:
    limited.post("/v1/searches", json={**SEARCH, "trials": MAX_TRIALS + 1})
    assert limited.get("/v1/searches").json()["items"] == []


# ---- active searches per tenant ----------------------------------------------------------------
def submit(client: httpx.Client, **headers: str) -> httpx.Response:
    return client.post("/v1/searches", json=SEARCH, headers=headers)


def test_one_search_more_than_the_tenant_may_have_active_is_a_429(
    limited: httpx.Client, db_connection: Connection
) -> None:
    ids = [submit(limited).json()["id"] for _ in range(MAX_ACTIVE)]
    refused = submit(limited)
    message = assert_error(refused, 429, "too_many_active_searches")["message"]
    assert int(refused.headers["Retry-After"]) >= 1
    assert f"{MAX_ACTIVE} searches queued or running" in message
    assert "AUTOPAR_MAX_ACTIVE_SEARCHES_PER_TENANT" in message
    assert len(limited.get("/v1/searches").json()["items"]) == MAX_ACTIVE

    # A running search counts too; a finished or cancelled one frees its place.
    with Session(bind=db_connection, join_transaction_mode="create_savepoint") as session:
        session.execute(update(SearchRow).where(SearchRow.id == ids[0]).values(status="running"))
        session.commit()
    assert submit(limited).status_code == 429
    assert limited.post(f"/v1/searches/{ids[1]}/cancel").status_code == 202
    assert submit(limited).status_code == 202
    assert submit(limited).status_code == 429
    with Session(bind=db_connection, join_transaction_mode="create_savepoint") as session:
        session.execute(update(SearchRow).where(SearchRow.id == ids[0]).values(status="succeeded"))
        session.commit()
    assert submit(limited).status_code == 202


def test_the_active_limit_is_per_tenant(limited: httpx.Client, db_connection: Connection) -> None:
    with Session(
        bind=db_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    ) as session:
        _, acme = create_key(session, tenant="acme")
        _, globex = create_key(session, tenant="globex")
    for _ in range(MAX_ACTIVE):
        assert submit(limited, Authorization=f"Bearer {acme}").status_code == 202
    assert submit(limited, Authorization=f"Bearer {acme}").status_code == 429
    # globex's queue is its own: acme's searches do not count against it.
    for _ in range(MAX_ACTIVE):
        assert submit(limited, Authorization=f"Bearer {globex}").status_code == 202
    assert submit(limited, Authorization=f"Bearer {globex}").status_code == 429


def test_limits_are_settings_with_documented_defaults() -> None:
    settings = Settings()
    assert settings.max_cluster_gpus == 2**20
    assert settings.max_search_trials == 100_000
    assert settings.max_search_timeout_s == 86_400
    assert settings.max_active_searches_per_tenant == 500


def test_limits_are_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUTOPAR_MAX_CLUSTER_GPUS", "4096")
    monkeypatch.setenv("AUTOPAR_MAX_SEARCH_TRIALS", "10")
    monkeypatch.setenv("AUTOPAR_MAX_SEARCH_TIMEOUT_S", "30")
    monkeypatch.setenv("AUTOPAR_MAX_ACTIVE_SEARCHES_PER_TENANT", "3")
    limits = Settings().service_limits()
    assert (limits.max_cluster_gpus, limits.max_search_trials) == (4096, 10)
    assert (limits.max_search_timeout_s, limits.max_active_searches_per_tenant) == (30, 3)
