"""POST /v1/estimate: every way of naming the inputs prices the same plan; bad ones are 422."""

from typing import Any

import httpx
import pytest

import costmodel
from app.estimates.schemas import EstimateResponse
from costmodel.catalog import load_preset
from costmodel.specs import Estimate
from tests.app.service.api_helpers import assert_error, error_fields

TRAINING = {"seq_length": 4096, "global_batch_size": 512}
PLAN = {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1}
REQUEST: dict[str, Any] = {
    "preset": "llama2-7b",
    "training": TRAINING,
    "cluster_id": "dgx-a100-8n",
    "plan": PLAN,
}


def post(client: httpx.Client, body: dict[str, Any]) -> httpx.Response:
    return client.post("/v1/estimate", json=body)


def test_preset_model_and_stored_cluster(client: httpx.Client) -> None:
    response = post(client, REQUEST)
    assert response.status_code == 200, response.text
    result = EstimateResponse.model_validate(response.json())
    assert result.calibration is None
    expected = costmodel.estimate(
        load_preset("model", "llama2-7b"), TRAINING, load_preset("cluster", "dgx-a100-8n"), PLAN
    )
    assert Estimate.model_validate(result.model_dump(exclude={"calibration"})) == expected
    assert result.feasible and result.num_gpus == 64


def test_every_way_to_name_model_and_cluster_agrees(client: httpx.Client) -> None:
    model_spec = load_preset("model", "llama2-7b").model_dump(mode="json")
    cluster_spec = load_preset("cluster", "dgx-a100-8n").model_dump(mode="json")
    stored_model = client.post("/v1/models", json={**model_spec, "name": "my-7b"}).json()
    stored_cluster = client.get("/v1/clusters/dgx-a100-8n").json()
    variants = [
        {"preset": "LLAMA2-7B"},
        {"model_id": "llama2-7b"},
        {"model_id": stored_model["id"]},
        {"model_id": "my-7b"},
        {"model": model_spec},
    ]
    clusters = [
        {"cluster_id": "dgx-a100-8n"},
        {"cluster_id": stored_cluster["id"]},
        {"cluster": cluster_spec},
    ]
    results = set()
    for model_part in variants:
        for cluster_part in clusters:
            body = {"training": TRAINING, "plan": PLAN, **model_part, **cluster_part}
            response = post(client, body)
            assert response.status_code == 200, (body, response.text)
            results.add(response.json()["step_time_s"])
    assert len(results) == 1


def test_training_and_plan_presets_by_name(client: httpx.Client) -> None:
    body = {
        "preset": "llama3-70b",
        "training": "llama3-8k",
        "cluster_id": "dgx-h100-16n",
        "plan": "tp8-pp4-dp4",
    }
    response = post(client, body)
    assert response.status_code == 200, response.text
    expected = costmodel.estimate(*(load_preset(kind, name) for kind, name in _preset_names(body)))
    assert response.json()["step_time_s"] == pytest.approx(expected.step_time_s)


def _preset_names(body: dict[str, str]) -> list[tuple[Any, str]]:
    return [
        ("model", body["preset"]),
        ("training", body["training"]),
        ("cluster", body["cluster_id"]),
        ("plan", body["plan"]),
    ]


def test_infeasible_plan_is_an_answer_not_an_error(client: httpx.Client) -> None:
    body = {**REQUEST, "preset": "llama2-70b", "plan": {**PLAN, "dp": 64, "tp": 1}}
    response = post(client, body)
    assert response.status_code == 200, response.text
    result = response.json()
    assert result["feasible"] is False
    assert any("memory" in reason for reason in result["reasons"])


def test_unpriceable_plan_is_422_naming_the_field(client: httpx.Client) -> None:
    error = assert_error(post(client, {**REQUEST, "plan": {**PLAN, "group": "nope"}}), 422)
    assert error["code"] == "invalid_plan"
    assert error_fields(error) == ["plan.group"]
    assert "nope" in error["message"]


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"model_id": "llama2-7b"}, "preset"),  # two model sources
        ({"preset": None}, "model"),  # none
        ({"cluster": {"groups": []}}, "cluster.groups"),  # invalid inline cluster
        ({"cluster": {"groups": [{"name": "g", "gpu": "L40S", "num_nodes": 1}]}}, "cluster_id"),
        ({"cluster_id": None}, "cluster"),
        ({"model_id": "nope", "preset": None}, "model_id"),
        ({"preset": "nope"}, "preset"),
        ({"cluster_id": "nope"}, "cluster_id"),
        ({"training": "nope"}, "training"),
        ({"plan": "nope"}, "plan"),
        ({"training": {"seq_length": 0, "global_batch_size": 8}}, "training.seq_length"),
        ({"plan": {**PLAN, "tp": 0}}, "plan.tp"),
        ({"plan": {**PLAN, "zero_stage": 4}}, "plan.zero_stage"),
        ({"plan": {**PLAN, "vpp": 2}}, "plan"),  # cross-field rule of the spec
        ({"surprise": 1}, "surprise"),
    ],
)
def test_bad_requests_name_the_field(
    client: httpx.Client, change: dict[str, Any], field: str
) -> None:
    body = {key: value for key, value in {**REQUEST, **change}.items() if value is not None}
    error = assert_error(post(client, body), 422)
    assert field in error_fields(error), error


def test_unknown_gpu_in_inline_cluster(client: httpx.Client) -> None:
    cluster = {"groups": [{"name": "g", "gpu": "TPU-v9", "num_nodes": 8}]}
    body = {**REQUEST, "cluster": cluster}
    del body["cluster_id"]
    error = assert_error(post(client, body), 422)
    assert error_fields(error) == ["cluster.groups[0].gpu"]


def test_absurd_gpu_counts_are_refused(client: httpx.Client) -> None:
    for group in (
        {"name": "g", "gpu": "H100-80GB", "num_nodes": 0},
        {"name": "g", "gpu": "H100-80GB", "num_nodes": 1_000_000_000},
        {"name": "g", "gpu": "H100-80GB", "num_nodes": 1, "gpus_per_node": 10**9},
        {"name": "g", "gpu": "H100-80GB", "num_nodes": 1, "inter_node_GBps": -5},
    ):
        body = {**REQUEST, "cluster": {"groups": [group]}}
        del body["cluster_id"]
        error = assert_error(post(client, body), 422)
        fields = error_fields(error)
        assert fields and all(str(field).startswith("cluster.groups[0].") for field in fields)


def test_bad_inline_training_names_only_the_real_field(client: httpx.Client) -> None:
    # ``training`` accepts a spec or a preset name: the "not a string" complaint of the other
    # branch must not reach the user next to the real problem.
    response = post(client, {**REQUEST, "training": {**TRAINING, "seq_length": 0}})
    assert response.status_code == 422, response.text
    assert error_fields(response.json()["error"]) == ["training.seq_length"]
