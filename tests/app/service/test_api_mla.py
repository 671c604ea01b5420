"""Multi-head latent attention over HTTP: import a DeepSeek-V3 config, price the preset, and
refuse a sequence longer than the model's positions."""

import httpx

from costmodel.catalog import load_model_preset
from tests.app.service.api_helpers import assert_error, error_fields
from tests.support.hf_configs import DEEPSEEK_V3

PLAN = {"dp": 16, "tp": 1, "pp": 4, "ep": 16, "micro_batch_size": 1, "recompute": "full"}


def test_import_hf_stores_the_mla_block(client: httpx.Client) -> None:
    response = client.post("/v1/models/import-hf?name=my-deepseek", json=DEEPSEEK_V3)
    assert response.status_code == 201, response.text
    spec = response.json()["spec"]
    assert spec["mla"] == {
        "q_lora_rank": 1536,
        "kv_lora_rank": 512,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
    }
    assert spec["max_position_embeddings"] == 163840
    preset = load_model_preset("deepseek-v3").model_dump(mode="json")
    assert {**spec, "name": "deepseek-v3"} == preset
    # What is not priced exactly comes back with the stored model, never silently dropped.
    warnings = response.json()["warnings"]
    assert any("multi-token-prediction module is not modelled" in w for w in warnings)


def test_estimate_refuses_a_sequence_beyond_max_position_embeddings(client: httpx.Client) -> None:
    body = {
        "preset": "deepseek-v3",
        "cluster_id": "dgx-h100-16n",
        "plan": PLAN,
        "training": {"seq_length": 4096, "global_batch_size": 64, "precision": "fp8"},
    }
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 200, response.text
    assert response.json()["num_gpus"] == 64
    too_long = {**body, "training": {**body["training"], "seq_length": 200_000}}
    error = assert_error(client.post("/v1/estimate", json=too_long), 422)
    assert error_fields(error) == ["training.seq_length"]
    assert "exceeds model 'deepseek-v3' max_position_embeddings (163840)" in error["message"]
