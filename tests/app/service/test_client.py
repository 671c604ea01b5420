"""``app.client.AutoparClient``: every endpoint through the real app (ASGI for the tour, real TCP
for waiting and idempotent replay), one exception for error answers, and retries against a
scripted server (503 then 200, 429 with Retry-After, refused connections)."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from app.client import (
    ApiError,
    AutoparClient,
    RetryPolicy,
    ServiceUnreachableError,
    UnexpectedResponseError,
    WaitTimeoutError,
)
from app.client.client import request_body
from app.estimates.schemas import EstimateRequest
from app.profiles.schemas import ProfileCreate
from app.searches.schemas import SearchCreate, SearchRecord
from costmodel.specs import ClusterSpec, ModelSpec, Plan
from tests.app.service.http_server import free_port, scripted_server, serve_app
from tests.app.service.search_helpers import EXHAUSTIVE
from tests.support.paths import DATA_DIR

TINY = ModelSpec(
    name="client-gpt", num_layers=4, hidden_size=256, num_attention_heads=8, vocab_size=1000
)
HEALTH = {"status": "ok", "database": "ok"}


@pytest.fixture
def autopar(client: httpx.Client) -> Iterator[AutoparClient]:
    with AutoparClient(http=client) as wrapped:
        yield wrapped


def test_specs_gpus_presets_and_estimates(autopar: AutoparClient) -> None:
    assert autopar.health().status == "ok"
    assert autopar.version().api == "v1"
    gpus = autopar.list_gpus(name="H100")
    assert gpus.items and all("H100" in gpu.name for gpu in gpus.items)
    assert autopar.get_gpu("A100-80GB").spec.name == "A100-80GB"
    assert "gpt3-175b" in autopar.list_presets().model
    assert autopar.get_preset("training", "gpt3-2k").spec["seq_length"] == 2048

    model = autopar.create_model(TINY)
    assert model.spec == autopar.get_model("client-gpt").spec
    assert [m.name for m in autopar.list_models(name="client-").items] == ["client-gpt"]
    imported = autopar.import_hf_model(
        {"model_type": "llama", "num_hidden_layers": 2, "hidden_size": 128}
        | {"num_attention_heads": 4, "intermediate_size": 256, "vocab_size": 100},
        name="client-hf",
    )
    assert imported.name == "client-hf" and imported.spec.num_layers == 2
    cluster = ClusterSpec.model_validate(
        {"name": "client-cluster", "groups": [{"name": "a", "gpu": "A100-80GB", "num_nodes": 1}]}
    )
    assert autopar.create_cluster(cluster).spec.groups[0].gpus_per_node == 8
    assert autopar.get_cluster("client-cluster").name == "client-cluster"
    assert autopar.list_clusters(preset=False).items[0].name == "client-cluster"

    estimate = autopar.estimate(
        EstimateRequest(
            model_id="client-gpt",
            training="gpt3-2k",
            cluster_id="client-cluster",
            plan=Plan(dp=8, tp=1, pp=1, micro_batch_size=1),
        )
    )
    assert estimate.num_gpus == 8
    autopar.delete_model("client-gpt")
    autopar.delete_cluster("client-cluster")
    with pytest.raises(ApiError) as missing:
        autopar.get_model("client-gpt")
    assert (missing.value.status_code, missing.value.code) == (404, "not_found")


def test_error_answers_are_one_exception_with_the_fields(autopar: AutoparClient) -> None:
    with pytest.raises(ApiError) as refused:
        autopar.create_model(TINY.model_copy(update={"name": "gpt3-175b"}))
    assert refused.value.status_code == 409
    with pytest.raises(ApiError) as invalid:
        autopar.create_search(
            SearchCreate(preset="gpt3-175b", training="gpt3-2k", cluster_id="nowhere")
        )
    error = invalid.value
    assert (error.status_code, error.code) == (422, "unknown_reference")
    assert [detail.field for detail in error.details] == ["cluster_id"]
    assert "cluster_id" in str(error) and "HTTP 422" in str(error)


def test_searches_profiles_and_observations(autopar: AutoparClient) -> None:
    search = autopar.create_search(SearchCreate.model_validate(EXHAUSTIVE))
    assert search.status == "queued"
    assert autopar.list_searches(status="queued").items[0].id == search.id
    assert autopar.search_plans(search.id).items == []
    assert autopar.search_progress(search.id).trials_done == 0
    assert autopar.search_deliveries(search.id).items == []  # no callback_url
    with pytest.raises(ApiError) as no_delivery:
        autopar.retry_delivery(search.id, "0" * 32)
    assert no_delivery.value.status_code == 404
    # No worker serves this app: the search stays queued and waiting gives up.
    with pytest.raises(WaitTimeoutError) as waited:
        autopar.wait_for(search.id, timeout_s=0.2, poll_s=0.05)
    assert waited.value.last.status == "queued"
    assert autopar.cancel_search(search.id).status == "cancelled"
    assert autopar.cancel_search(search.id).status == "cancelled"  # safe to repeat
    assert autopar.wait_for(search.id).status == "cancelled"

    nccl = (NCCL / "all_gather_a100_2x8.txt").read_text()
    profile = autopar.create_profile(
        ProfileCreate.model_validate({"nccl_tests": {"outputs": [nccl], "op": "all_gather"}})
    )
    assert autopar.get_profile(profile.id).id == profile.id
    assert [p.id for p in autopar.list_profiles().items] == [profile.id]
    autopar.delete_profile(profile.id)
    assert autopar.list_observations().items == []
    assert autopar.list_calibrations().items == []


NCCL = DATA_DIR / "nccl"


# Real HTTP ------------------------------------------------------------------------------------
@pytest.fixture
def served(worker_database_url: str) -> Iterator[str]:
    with serve_app(worker_database_url) as url:
        yield url


def test_wait_for_follows_a_real_search_to_its_end(served: str) -> None:
    seen: list[SearchRecord] = []
    with AutoparClient(served) as autopar:
        search = autopar.create_search(SearchCreate.model_validate(EXHAUSTIVE))
        done = autopar.wait_for(search.id, timeout_s=120, poll_s=0.05, on_progress=seen.append)
        assert done.status == "succeeded", done.error
        assert seen[-1] == done and all(record.id == search.id for record in seen)
        plans = autopar.search_plans(search.id).items
        assert plans and plans[0].rank == 1
        assert autopar.get_plan(plans[0].id).id == plans[0].id
        export = autopar.export_plan(plans[0].id, "slurm")
        assert export.num_gpus == plans[0].estimate.num_gpus
        assert [f.name for f in export.files] == ["autopar.sbatch"]


def test_an_idempotency_key_replays_the_same_search_over_http(served: str) -> None:
    request = SearchCreate.model_validate(EXHAUSTIVE | {"name": "once"})
    with AutoparClient(served) as autopar:
        first = autopar.create_search(request, idempotency_key="job-42")
        again = autopar.create_search(request, idempotency_key="job-42")
        assert again.id == first.id
        assert [s.id for s in autopar.list_searches().items if s.name == "once"] == [first.id]
        with pytest.raises(ApiError) as reused:
            autopar.create_search(request.model_copy(update={"top_k": 2}), idempotency_key="job-42")
        assert (reused.value.status_code, reused.value.code) == (409, "idempotency_key_reused")


def test_the_api_key_and_environment_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    with scripted_server([(200, {}, HEALTH)]) as server:
        monkeypatch.setenv("AUTOPAR_URL", server.url)
        monkeypatch.setenv("AUTOPAR_API_KEY", "secret-from-env")
        with AutoparClient() as autopar:
            assert autopar.base_url == server.url
            autopar.health()
        with AutoparClient(server.url, api_key="explicit") as autopar:
            autopar.health()
    assert [seen[2]["Authorization"] for seen in server.seen] == [
        "Bearer secret-from-env",
        "Bearer explicit",
    ]


# Retries --------------------------------------------------------------------------------------
def recording_client(url: str, **policy: Any) -> tuple[AutoparClient, list[float]]:
    pauses: list[float] = []
    retry = RetryPolicy(**({"backoff_s": 0.01} | policy))
    return AutoparClient(url, api_key="", retry=retry, sleep=pauses.append), pauses


def test_a_503_is_retried_until_the_service_answers() -> None:
    unavailable = {"error": {"code": "unavailable", "message": "db down", "details": []}}
    answers = [(503, {}, unavailable), (503, {}, unavailable), (200, {}, HEALTH)]
    with scripted_server(answers) as server:
        autopar, pauses = recording_client(server.url)
        assert autopar.health().status == "ok"
    assert len(server.seen) == 3 and len(pauses) == 2
    # Doubling from backoff_s, each pause jittered down by at most half.
    assert 0.005 <= pauses[0] <= 0.01 <= pauses[1] <= 0.02


def test_retry_after_is_honoured_and_giving_up_raises_the_last_error() -> None:
    limited = {"error": {"code": "rate_limited", "message": "slow down", "details": []}}
    with scripted_server([(429, {"Retry-After": "7"}, limited)]) as server:
        autopar, pauses = recording_client(server.url, attempts=3)
        with pytest.raises(ApiError) as gave_up:
            autopar.list_searches()
    assert pauses == [7.0, 7.0] and len(server.seen) == 3
    assert (gave_up.value.status_code, gave_up.value.code) == (429, "rate_limited")
    assert gave_up.value.headers["retry-after"] == "7"


def test_creating_posts_are_retried_with_one_idempotency_key() -> None:
    unavailable = {"error": {"code": "unavailable", "message": "busy", "details": []}}
    with scripted_server([(503, {"Retry-After": "0"}, unavailable), (201, {}, {})]) as server:
        autopar, _ = recording_client(server.url)
        with pytest.raises(UnexpectedResponseError):  # {} is no model record
            autopar.create_model(TINY)
    keys = [headers["Idempotency-Key"] for _, _, headers in server.seen]
    assert len(keys) == 2 and keys[0] == keys[1] and len(keys[0]) == 32


def test_requests_that_are_not_safe_to_repeat_are_sent_once() -> None:
    unavailable = {"error": {"code": "unavailable", "message": "busy", "details": []}}
    with scripted_server([(503, {}, unavailable)]) as server:
        autopar, pauses = recording_client(server.url)
        with pytest.raises(ApiError):
            autopar.request("POST", "/v1/anything", json={})
    assert len(server.seen) == 1 and pauses == []


def test_an_unreachable_service_is_one_error_after_the_retries() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    autopar, pauses = recording_client(url, attempts=4)
    with pytest.raises(ServiceUnreachableError) as unreachable:
        autopar.get_search("0" * 32)
    assert len(pauses) == 3
    assert str(unreachable.value).startswith(f"cannot reach the autopar service at {url}: ")


def test_write_only_fields_are_sent() -> None:
    class WithSecret(BaseModel):
        name: str
        secret: str | None = Field(default=None, exclude=True)
        unset: int = 3

    assert request_body(WithSecret(name="n", secret="s" * 16)) == {"name": "n", "secret": "s" * 16}
    assert request_body(WithSecret(name="n")) == {"name": "n"}


def test_a_webhook_secret_reaches_the_service(autopar: AutoparClient) -> None:
    # Without its write-only secret (and no server secret) the callback_url would be a 422.
    body = EXHAUSTIVE | {"callback_url": "http://127.0.0.1:9/hook", "callback_secret": "s" * 16}
    search = autopar.create_search(SearchCreate.model_validate(body))
    assert search.callback_url == "http://127.0.0.1:9/hook"
    assert "callback_secret" not in search.model_dump()
