"""The service prices the same inputs once (app.common.estimate_memo) and keeps the answer it
sent (app.estimates.service.answers): a repeat is the same answer, and any change to what was
priced (a stored cluster replaced under its name, another plan, a calibration) is priced
afresh."""

from collections.abc import Callable
from typing import Any, cast

import httpx
import pytest

from app.common import pricing
from app.common.estimate_memo import EstimateMemo
from app.common.lru import LruCache
from app.estimates import service
from app.estimates.schemas import EstimateResponse
from costmodel import estimate
from costmodel.catalog import load_preset
from costmodel.specs import Estimate, Plan, TrainingSpec

REQUEST: dict[str, Any] = {
    "preset": "llama2-7b",
    "training": {"seq_length": 4096, "global_batch_size": 512},
    "cluster_id": "dgx-a100-8n",
    "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1},
}


@pytest.fixture
def memo(monkeypatch: pytest.MonkeyPatch, answers: LruCache[bytes, bytes]) -> EstimateMemo:
    """A fresh memo for this test (the process's own outlives tests), and no answers kept."""
    fresh = EstimateMemo()
    monkeypatch.setattr(pricing, "estimates", fresh)
    return fresh


@pytest.fixture
def answers(monkeypatch: pytest.MonkeyPatch) -> LruCache[bytes, bytes]:
    fresh: LruCache[bytes, bytes] = LruCache(16)
    monkeypatch.setattr(service, "answers", fresh)
    return fresh


def test_a_repeated_request_is_priced_once_and_answered_alike(
    client: httpx.Client, memo: EstimateMemo, answers: LruCache[bytes, bytes]
) -> None:
    first = client.post("/v1/estimate", json=REQUEST)
    second = client.post("/v1/estimate", json=REQUEST)
    assert first.status_code == second.status_code == 200, first.text
    assert first.headers["content-type"] == "application/json"
    # The kept answer is sent as it was: priced once, and not even looked up in the memo again.
    assert second.content == first.content
    assert (memo.misses, memo.hits, len(memo), len(answers)) == (1, 0, 1, 1)
    # ... and it is the response model's JSON, as priced afresh.
    fresh = estimate(
        load_preset("model", REQUEST["preset"]),
        TrainingSpec(**REQUEST["training"]),
        load_preset("cluster", REQUEST["cluster_id"]),
        Plan(**REQUEST["plan"]),
    )
    assert first.json() == EstimateResponse(**dict(fresh)).model_dump(mode="json")
    other_plan = {**REQUEST, "plan": {**REQUEST["plan"], "micro_batch_size": 2}}
    third = client.post("/v1/estimate", json=other_plan)
    assert third.status_code == 200 and third.json() != first.json()
    assert (memo.misses, len(answers)) == (2, 2)


def test_a_stored_cluster_replaced_under_its_name_is_priced_anew(
    client: httpx.Client, memo: EstimateMemo
) -> None:
    spec = load_preset("cluster", "dgx-a100-8n").model_dump(mode="json")
    created = client.post("/v1/clusters", json={**spec, "name": "mine"})
    assert created.status_code == 201, created.text
    body = {**REQUEST, "cluster_id": "mine"}
    before = client.post("/v1/estimate", json=body).json()
    assert client.delete(f"/v1/clusters/{created.json()['id']}").status_code == 204
    # The same name, now H100 nodes: the estimate follows the stored spec, not the memory.
    h100 = {**spec, "name": "mine"}
    h100["groups"] = [{**group, "gpu": "H100-80GB"} for group in spec["groups"]]
    assert client.post("/v1/clusters", json=h100).status_code == 201
    after = client.post("/v1/estimate", json=body).json()
    assert after["step_time_s"] < before["step_time_s"]
    assert memo.misses == 2 and memo.hits == 0


def test_the_memory_keeps_the_most_recently_used() -> None:
    memo = EstimateMemo(max_entries=2)
    priced: list[int] = []

    def pricer(tag: int) -> Callable[[], Estimate]:
        def price() -> Estimate:
            priced.append(tag)
            return cast(Estimate, tag)  # the memo stores whatever it is given

        return price

    keys = [EstimateMemo.key(Plan(dp=dp, tp=1, pp=1, micro_batch_size=1)) for dp in (1, 2, 3)]
    assert len(set(keys)) == 3
    memo.get_or_price(keys[0], pricer(0))
    memo.get_or_price(keys[1], pricer(1))
    memo.get_or_price(keys[0], pricer(0))  # 0 is now the most recent
    memo.get_or_price(keys[2], pricer(2))  # evicts 1
    memo.get_or_price(keys[0], pricer(0))
    memo.get_or_price(keys[1], pricer(1))
    assert priced == [0, 1, 2, 1]
    assert len(memo) == 2


def test_keys_tell_every_input_apart() -> None:
    plan = Plan(dp=8, tp=8, pp=1, micro_batch_size=1)
    other = plan.model_copy(update={"micro_batch_size": 2})
    assert EstimateMemo.key(plan, None) != EstimateMemo.key(other, None)
    # An absent input is not the same as the next one moved up.
    assert EstimateMemo.key(plan, None) != EstimateMemo.key(None, plan)
    assert EstimateMemo.key(plan, None) == EstimateMemo.key(plan.model_copy(), None)


def test_an_unpriceable_plan_is_refused_every_time(
    client: httpx.Client, memo: EstimateMemo
) -> None:
    body = {**REQUEST, "plan": {**REQUEST["plan"], "group": "nowhere"}}
    for _ in range(2):
        assert client.post("/v1/estimate", json=body).status_code == 422
    assert len(memo) == 0 and memo.misses == 2
