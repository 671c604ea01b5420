"""The documented contract (issue 13): untimeable plans and bad numbers are 422s naming the field,
a body that is not JSON is a 400, a 405 lists every method of its path, the OpenAPI documents the
statuses every operation may answer, and names match ignoring case alike on every backend."""

from typing import Any

import httpx
import pytest

V100_CLUSTER = {"groups": [{"name": "v", "gpu": "V100-32GB", "num_nodes": 1}]}
PLAN = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1}


def _detail(response: httpx.Response) -> dict[str, Any]:
    details: list[dict[str, Any]] = response.json()["error"]["details"]
    assert details, response.text
    return details[0]


def test_a_plan_on_a_gpu_without_the_precision_is_a_422_naming_the_gpu(
    client: httpx.Client,
) -> None:
    body = {"preset": "gpt-1.7b", "training": "gpt3-2k", "cluster": V100_CLUSTER, "plan": PLAN}
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 422, response.text
    detail = _detail(response)
    assert detail["field"] == "cluster.groups[0].gpu"
    assert "V100-32GB has no BF16 tensor throughput; use fp16" in detail["reason"]
    # With fp16 the same plan is priced, every number a number.
    fp16 = {**body, "training": {"seq_length": 2048, "global_batch_size": 64, "precision": "fp16"}}
    priced = client.post("/v1/estimate", json=fp16)
    assert priced.status_code == 200, priced.text
    assert all(priced.json()[key] is not None for key in ("step_time_s", "tokens_per_s", "mfu"))


def test_a_search_on_a_cluster_that_cannot_train_in_its_precision_is_refused(
    client: httpx.Client,
) -> None:
    body = {"preset": "gpt-1.7b", "training": "gpt3-2k", "cluster": V100_CLUSTER, "trials": 5}
    response = client.post("/v1/searches", json=body)
    assert response.status_code == 422, response.text
    assert "bf16" in response.text


def _gpu_cluster(**gpu: Any) -> dict[str, Any]:
    spec = {"name": "x", "bf16_tflops": 100.0, "hbm_gib": 80, "hbm_GBps": 2000, **gpu}
    return {"groups": [{"name": "g", "gpu": spec, "num_nodes": 1}]}


@pytest.mark.parametrize(
    ("cluster", "field", "reason"),
    [
        (_gpu_cluster(price_per_gpu_hour=False), "gpu.price_per_gpu_hour", "not a boolean"),
        (_gpu_cluster(bf16_tflops=5e-324), "gpu.bf16_tflops", "at least 0.001"),
        (_gpu_cluster(bf16_tflops=0), "gpu", "every TFLOP/s peak is 0"),
        (_gpu_cluster(hbm_GBps=1e-300), "gpu.hbm_GBps", "greater than or equal to 0.001"),
    ],
)
def test_bad_hardware_figures_are_422s_naming_the_field(
    client: httpx.Client, cluster: dict[str, Any], field: str, reason: str
) -> None:
    body = {"preset": "gpt-1.7b", "training": "gpt3-2k", "cluster": cluster, "plan": PLAN}
    response = client.post("/v1/estimate", json=body)
    assert response.status_code == 422, response.text
    detail = _detail(response)
    assert detail["field"] == f"cluster.groups[0].{field}", response.text
    assert reason in detail["reason"]


def test_a_boolean_for_an_integer_is_refused(client: httpx.Client) -> None:
    model = {
        "name": "m",
        "num_layers": 4,
        "hidden_size": 256,
        "num_attention_heads": 4,
        "vocab_size": 1000,
        "moe": {"num_experts": 4, "top_k": 1, "expert_ffn_hidden_size": 64,
                "first_dense_layers": False},
    }  # fmt: skip
    response = client.post("/v1/models", json=model)
    assert response.status_code == 422, response.text
    assert _detail(response)["field"] == "moe.first_dense_layers"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
def test_a_body_that_is_not_declared_json_is_a_400(
    client: httpx.Client, content_type: str | None
) -> None:
    headers = {"content-type": content_type} if content_type else {}
    response = client.post("/v1/estimate", content=b'{"preset": "gpt-1.7b"}', headers=headers)
    assert response.status_code == 400, response.text
    assert "Content-Type must be application/json" in response.json()["error"]["message"]


def test_nan_is_not_finite_rather_than_out_of_bounds(client: httpx.Client) -> None:
    response = client.post(
        "/v1/observations",
        content=b'{"step_time_s": NaN, "preset": "gpt-1.7b"}',
        headers={"content-type": "application/json"},
    )
    assert response.status_code == 422, response.text
    reasons = {d["field"]: d["reason"] for d in response.json()["error"]["details"]}
    assert "finite" in reasons["step_time_s"], reasons


def test_a_405_lists_every_method_of_the_path(client: httpx.Client) -> None:
    response = client.put("/v1/models", json={})
    assert response.status_code == 405
    allowed = {method.strip() for method in response.headers["allow"].split(",")}
    assert {"GET", "POST"} <= allowed, response.headers["allow"]
    item = client.post("/v1/models/some-name", json={})
    assert item.status_code == 405
    assert {"GET", "DELETE"} <= {m.strip() for m in item.headers["allow"].split(",")}


def test_every_operation_documents_307_405_500_and_503(client: httpx.Client) -> None:
    redirect = client.get("/v1/models/", follow_redirects=False)
    assert redirect.status_code == 307 and redirect.headers["location"].endswith("/v1/models")
    document = client.get("/openapi.json").json()
    missing = [
        f"{method.upper()} {path}: {code}"
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        for code in ("307", "405", "500", "503")
        if code not in operation.get("responses", {})
    ]
    assert not missing, missing
    schema = document["components"]["schemas"]["EstimateRequest"]
    assert ["model", "model_id", "preset"] in schema["x-exactly-one-of"]


@pytest.mark.parametrize(("stored", "asked"), [("École-7b", "école-7B"), ("Straße-1", "STRASSE-1")])
def test_names_match_ignoring_case_beyond_ascii(
    client: httpx.Client, stored: str, asked: str
) -> None:
    model = {"name": stored, "num_layers": 2, "hidden_size": 64, "num_attention_heads": 2,
             "vocab_size": 100}  # fmt: skip
    assert client.post("/v1/models", json=model).status_code == 201
    found = client.get(f"/v1/models/{asked}")
    assert found.status_code == 200, found.text
    assert found.json()["name"] == stored
    # The list's ?name= substring filter folds the same way on every backend.
    listed = client.get("/v1/models", params={"name": asked[:-2]})
    assert listed.status_code == 200, listed.text
    assert [item["name"] for item in listed.json()["items"]] == [stored]


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/searches", {"trials": True}, "trials"),
        ("/v1/searches", {"max_memory_fraction": False}, "max_memory_fraction"),
        ("/v1/observations", {"step_time_s": True}, "step_time_s"),
    ],
)
def test_booleans_are_not_numbers_in_requests_either(
    client: httpx.Client, path: str, body: dict[str, Any], field: str
) -> None:
    base = {"preset": "gpt-1.7b", "training": "gpt3-2k", "cluster_id": "dgx-a100-1n"}
    if path == "/v1/observations":
        base["plan"] = PLAN
    response = client.post(path, json={**base, **body})
    assert response.status_code == 422, response.text
    reasons = {d["field"]: d["reason"] for d in response.json()["error"]["details"]}
    assert "not a boolean" in reasons[field], reasons
