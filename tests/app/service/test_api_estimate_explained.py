"""POST /v1/estimate and the searches API carry the explanations: parameter counts, warnings
on node-spanning groups, heterogeneous plans in words, and the memory headroom searches keep."""

from typing import Any

import httpx
import pytest

from search.objectives import DEFAULT_MAX_MEMORY_FRACTION

FULL = {"micro_batch_size": 1, "recompute": "full", "zero_stage": 1}


def test_an_estimate_reports_total_and_active_parameters(client: httpx.Client) -> None:
    body = {
        "preset": "mixtral-8x7b",
        "training": "llama3-8k",
        "cluster_id": "dgx-h100-16n",
        "plan": {"dp": 16, "tp": 2, "pp": 4, "ep": 4, **FULL},
    }
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 200, response.text
    document = response.json()
    assert document["total_params"] == pytest.approx(46.7e9, rel=0.005)
    assert document["active_params"] == pytest.approx(12.9e9, rel=0.02)
    assert document["warnings"] == [] and document["notes"] == []


def test_an_estimate_warns_when_tensor_parallelism_crosses_nodes(client: httpx.Client) -> None:
    seven: dict[str, Any] = {
        "name": "seven-per-node",
        "groups": [{"name": "g", "gpu": "H100-80GB", "num_nodes": 8, "gpus_per_node": 7}],
    }
    body = {
        "preset": "llama3-8b",
        "training": "llama3-8k",
        "cluster": seven,
        "plan": {"dp": 1, "tp": 8, "pp": 1, **FULL},
    }
    document = client.post("/v1/estimate", json=body).json()
    assert document["feasible"]  # it runs, but
    assert document["warnings"] and "spans 2 nodes" in document["warnings"][0]


def test_a_heterogeneous_estimate_explains_its_layout(client: httpx.Client) -> None:
    stages = [{"num_layers": 40, "group": "h100", "tp": 8, "dp": 2}]
    stages.append({"num_layers": 40, "group": "a100-80", "tp": 8, "dp": 2})
    body = {
        "preset": "llama3-70b",
        "training": "llama3-8k",
        "cluster_id": "mixed-h100-a100-2zone",
        "plan": {"dp": 2, "tp": 8, "pp": 2, "stages": stages, **FULL},
    }
    document = client.post("/v1/estimate", json=body).json()
    assert document["notes"][0].startswith("stage 0 (layers 1-40) runs on 'h100'")
    assert any("'a100-40'" in note and "is unused" in note for note in document["notes"])
    assert any("crosses the us-east-us-west zone link" in w for w in document["warnings"])


def test_searches_keep_memory_headroom_unless_told_otherwise(client: httpx.Client) -> None:
    body = {
        "preset": "gpt-1.7b",
        "training": {"seq_length": 2048, "global_batch_size": 64},
        "cluster_id": "dgx-a100-1n",
        "sampler": "exhaustive",
    }
    queued = client.post("/v1/searches", json=body).json()
    assert queued["request"]["max_memory_fraction"] == DEFAULT_MAX_MEMORY_FRACTION == 0.9
    everything = client.post("/v1/searches", json={**body, "max_memory_fraction": 1}).json()
    assert everything["request"]["max_memory_fraction"] == 1
