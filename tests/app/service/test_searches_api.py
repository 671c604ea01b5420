"""POST/GET /v1/searches without a worker: submitting queues a row (202), every reason a search
cannot run is a 422 naming the field, cancelling a queued search is immediate."""

from typing import Any

import httpx
import pytest

from app.searches.schemas import SEARCH_FIELDS, SearchCreate
from search import SearchRequest
from search.objectives import DEFAULT_MAX_MEMORY_FRACTION
from tests.app.service.api_helpers import Snapshot, assert_error, error_fields

TRAINING = {"seq_length": 2048, "global_batch_size": 64}
SEARCH: dict[str, Any] = {
    "preset": "gpt-1.7b",
    "training": TRAINING,
    "cluster_id": "dgx-a100-1n",
    "sampler": "exhaustive",
    "top_k": 3,
}


def submit(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return client.post("/v1/searches", json=body)


def test_submit_queues_the_search(client: httpx.Client) -> None:
    response = submit(client, {**SEARCH, "name": "first", "priority": 5})
    assert response.status_code == 202, response.text
    search = response.json()
    assert response.headers["location"] == f"/v1/searches/{search['id']}"
    assert search["status"] == "queued"
    assert search["name"] == "first" and search["priority"] == 5
    assert search["study_name"] == f"autopar-search-{search['id']}"
    assert search["progress"] == {
        "trials_done": 0,
        "trials_budget": None,
        "evaluated": None,
        "feasible": None,
        "best": None,
        "elapsed_s": None,
        "eta_s": None,
    }
    # The stored request is a complete SearchRequest: the specs are resolved, not references.
    stored = SearchRequest.model_validate(search["request"])
    assert stored.model.name == "gpt-1.7b" and stored.cluster.name == "dgx-a100-1n"
    assert search["cluster_id"] is not None and search["model_id"] is None

    assert client.get(f"/v1/searches/{search['id']}").json() == search
    plans = client.get(f"/v1/searches/{search['id']}/plans").json()
    assert plans["items"] == [] and plans["status"] == "queued"
    listed = client.get("/v1/searches", params={"status": "queued"}).json()
    assert search["id"] in [item["id"] for item in listed["items"]]


def test_the_model_and_cluster_may_be_named_any_way(client: httpx.Client) -> None:
    cluster = client.get("/v1/clusters/dgx-a100-1n").json()
    model = client.get("/v1/models/gpt-1.7b").json()
    base = {key: value for key, value in SEARCH.items() if key not in ("preset", "cluster_id")}
    requests = set()
    for model_part in ({"preset": "gpt-1.7b"}, {"model_id": model["id"]}, {"model": model["spec"]}):
        for cluster_part in ({"cluster_id": cluster["id"]}, {"cluster": cluster["spec"]}):
            response = submit(client, {**base, **model_part, **cluster_part})
            assert response.status_code == 202, response.text
            request = response.json()["request"]
            requests.add(str(sorted((key, str(value)) for key, value in request.items())))
    assert len(requests) == 1


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        # A cluster that cannot hold the model (given by reference: the reference is blamed).
        ({"preset": "gpt3-175b", "training": "gpt3-2k"}, "cluster_id", "needs at least"),
        # No data-parallel layout divides the batch.
        (
            {
                "training": {"seq_length": 2048, "global_batch_size": 6},
                "constraints": {"dp": [2], "micro_batch_size": [2]},
            },
            "training.global_batch_size",
            "6 is not divisible by dp*micro_batch_size",
        ),
        (
            {
                "training": {"seq_length": 2048, "global_batch_size": 7},
                "constraints": {"dp": {"min": 2, "max": 4}},
            },
            "constraints.dp",
            "no allowed value is valid (dp divides training.global_batch_size=7",
        ),
        # Zero budgets.
        ({"trials": 0}, "trials", "greater than or equal to 1"),
        ({"timeout_s": 0}, "timeout_s", "greater than 0"),
        # Other impossible requests.
        ({"constraints": {"warp": 2}}, "constraints.warp", "unknown dimension"),
        ({"groups": ["nope"]}, "groups", "unknown node group 'nope'"),
        ({"objective": "time_to_train"}, "objective", "needs training.train_tokens"),
        ({"training": "no-such-training"}, "training", "no-such-training"),
        ({"cluster_id": "no-such-cluster"}, "cluster_id", "no stored cluster"),
        ({"model_id": "gpt-1.7b"}, "preset", "give exactly one of model, model_id, preset"),
    ],
)
def test_impossible_searches_are_refused_with_the_reason(
    client: httpx.Client, snapshot: Snapshot, change: dict[str, Any], field: str, reason: str
) -> None:
    before = snapshot()
    response = submit(client, {**SEARCH, **change})
    error = assert_error(response, 422)
    assert field in error_fields(error), error
    detail = next(d for d in error["details"] if d["field"] == field)
    assert reason in detail["reason"], detail
    assert snapshot() == before


def test_an_inline_cluster_too_small_blames_cluster(client: httpx.Client) -> None:
    cluster = client.get("/v1/clusters/dgx-a100-1n").json()["spec"]
    body = {**SEARCH, "cluster_id": None, "cluster": cluster, "preset": "gpt3-175b"}
    error = assert_error(submit(client, body), 422, "invalid_input")
    assert error_fields(error) == ["cluster"]
    assert error["message"].startswith("cluster: gpt3-175b needs at least")


def test_cancel_a_queued_search(client: httpx.Client) -> None:
    search = submit(client, SEARCH).json()
    response = client.post(f"/v1/searches/{search['id']}/cancel")
    assert response.status_code == 202, response.text
    cancelled = response.json()
    assert cancelled["status"] == "cancelled" and cancelled["cancel_requested"]
    assert cancelled["finished_at"] is not None
    # Again: nothing changes.
    again = client.post(f"/v1/searches/{search['id']}/cancel")
    assert again.status_code == 202 and again.json() == cancelled


def test_unknown_ids_are_404(client: httpx.Client) -> None:
    missing = "0" * 32
    assert_error(client.get(f"/v1/searches/{missing}"), 404, "not_found")
    assert_error(client.get("/v1/searches/not-an-id"), 404, "not_found")
    assert_error(client.get(f"/v1/searches/{missing}/plans"), 404, "not_found")
    assert_error(client.post(f"/v1/searches/{missing}/cancel"), 404, "not_found")
    assert_error(client.get(f"/v1/plans/{missing}"), 404, "not_found")


def test_list_pages_newest_first(client: httpx.Client) -> None:
    ids = [submit(client, SEARCH).json()["id"] for _ in range(3)]
    first = client.get("/v1/searches", params={"limit": 2}).json()
    second = client.get("/v1/searches", params={"limit": 2, "cursor": first["next_cursor"]}).json()
    listed = [item["id"] for item in first["items"] + second["items"]]
    assert listed[:3] == ids[::-1]
    assert_error(client.get("/v1/searches", params={"status": "sleeping"}), 422)


def test_the_body_mirrors_search_request() -> None:
    """A field added to SearchRequest must be accepted by POST /v1/searches too."""
    assert set(SEARCH_FIELDS) <= set(SearchCreate.model_fields)
    for name in SEARCH_FIELDS:
        ours, theirs = SearchCreate.model_fields[name], SearchRequest.model_fields[name]
        # The memory headroom defaults to DEFAULT_MAX_MEMORY_FRACTION over HTTP (and in the
        # CLI) whatever SearchRequest's own default is.
        default = DEFAULT_MAX_MEMORY_FRACTION if name == "max_memory_fraction" else theirs.default
        assert (ours.annotation, ours.default, ours.metadata) == (
            theirs.annotation,
            default,
            theirs.metadata,
        ), name
