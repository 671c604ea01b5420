"""Goodput over the API: estimates report it, reliability and checkpoint specs are validated,
searches accept the goodput objectives."""

from typing import Any

import httpx

from app.estimates.schemas import EstimateResponse
from tests.app.service.api_helpers import assert_error, error_fields

TRAINING = {"seq_length": 4096, "global_batch_size": 512, "train_tokens": 1e12}
PLAN = {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1}
CLUSTER = {
    "groups": [
        {
            "name": "h100",
            "gpu": "H100-80GB",
            "num_nodes": 10,
            "price_per_gpu_hour": 2.0,
            "reliability": {"checkpoint_write_GBps_per_node": 1.0, "restart_s": 300},
        }
    ]
}
REQUEST: dict[str, Any] = {"preset": "llama2-7b", "training": TRAINING, "cluster": CLUSTER}


def test_estimate_reports_goodput(client: httpx.Client) -> None:
    training = {**TRAINING, "checkpoint": {"strategy": "async", "hot_spare_nodes": 1}}
    response = client.post("/v1/estimate", json={**REQUEST, "training": training, "plan": PLAN})
    assert response.status_code == 200, response.text
    result = EstimateResponse.model_validate(response.json())
    assert result.goodput is not None and 0 < result.goodput.goodput < 1
    assert result.goodput.checkpoint_strategy == "async"
    assert result.goodput.hot_spare_nodes == 1  # 2 nodes idle, 1 kept as a spare
    assert result.effective_tokens_per_s is not None
    assert result.effective_tokens_per_s < result.tokens_per_s
    assert result.usd_to_train is not None and result.usd_to_train > 0


def test_bad_reliability_names_the_field(client: httpx.Client) -> None:
    group = {**CLUSTER["groups"][0], "reliability": {"gpu_failures_per_node_day": -1}}
    body = {**REQUEST, "cluster": {"groups": [group]}, "plan": PLAN}
    error = assert_error(client.post("/v1/estimate", json=body), 422)
    assert "cluster.groups[0].reliability.gpu_failures_per_node_day" in error_fields(error)
    training = {**TRAINING, "checkpoint": {"strategy": "never"}}
    error = assert_error(
        client.post("/v1/estimate", json={**REQUEST, "training": training, "plan": PLAN}), 422
    )
    assert "training.checkpoint.strategy" in error_fields(error)


def test_searches_accept_the_goodput_objectives(client: httpx.Client) -> None:
    search = {"preset": "gpt-1.7b", "training": TRAINING, "cluster": CLUSTER}
    for objective in ("goodput", "pareto_goodput"):
        response = client.post(
            "/v1/searches", json={**search, "objective": objective, "sampler": "exhaustive"}
        )
        assert response.status_code == 202, response.text
