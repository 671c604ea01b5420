"""Bad input on every endpoint: each is a clear 4xx in the one error body, never a 500, and
nothing already stored changes."""

import json
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.app.service.api_helpers import assert_error, error_fields

MODEL = {
    "name": "ok-model",
    "num_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "vocab_size": 100,
}
CLUSTER = {"name": "ok-cluster", "groups": [{"name": "g", "gpu": "A100-80GB", "num_nodes": 1}]}
HF_CONFIG = {
    "model_type": "llama",
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "num_attention_heads": 4,
    "intermediate_size": 128,
    "vocab_size": 100,
}
ESTIMATE = {
    "preset": "llama2-7b",
    "training": {"seq_length": 4096, "global_batch_size": 512},
    "cluster_id": "dgx-a100-8n",
    "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1},
}
# Body endpoint -> a valid body (to derive bad ones from).
BODIES: dict[str, dict[str, Any]] = {
    "/v1/models": MODEL,
    "/v1/clusters": CLUSTER,
    "/v1/models/import-hf": HF_CONFIG,
    "/v1/estimate": ESTIMATE,
}
JSON_HEADERS = {"content-type": "application/json"}


@pytest.fixture
def seeded(client: httpx.Client) -> httpx.Client:
    """Some user data besides the presets, so 'nothing changed' covers user rows too."""
    assert client.post("/v1/models", json={**MODEL, "name": "seed-model"}).status_code == 201
    assert client.post("/v1/clusters", json={**CLUSTER, "name": "seed-cluster"}).status_code == 201
    return client


def test_the_valid_bodies_are_valid(client: httpx.Client) -> None:
    """The baseline for every case below: without the damage, each request succeeds."""
    for path, body in BODIES.items():
        response = client.post(path, json=body)
        assert response.status_code in (200, 201), (path, response.text)


RAW_BODIES = {
    "truncated JSON": (b'{"name": ', 400, "malformed_json"),
    "not JSON": (b"num_layers=2", 400, "malformed_json"),
    "trailing garbage": (b'{"name": "x"} tail', 400, "malformed_json"),
    "invalid UTF-8": (b"\xff\xfe\xfd", 400, None),
    "empty": (b"", 422, "invalid_input"),
    "null": (b"null", 422, "invalid_input"),
    "array": (b"[1, 2]", 422, "invalid_input"),
    "string": (b'"model"', 422, "invalid_input"),
    "number": (b"42", 422, "invalid_input"),
    "deep nesting": (b"[" * 50_000 + b"]" * 50_000, 400, None),
    "huge integer": (b'{"num_layers": ' + b"9" * 5000 + b"}", 400, None),
}


@pytest.mark.parametrize("path", list(BODIES))
@pytest.mark.parametrize("case", list(RAW_BODIES))
def test_unreadable_bodies(seeded: httpx.Client, snapshot: Any, path: str, case: str) -> None:
    content, status, code = RAW_BODIES[case]
    before = snapshot()
    response = seeded.post(path, content=content, headers=JSON_HEADERS)
    if path == "/v1/models/import-hf" and case == "empty":
        status = 422  # a body-only endpoint: the missing body is the field error
    assert_error(response, status, code)
    assert snapshot() == before


def _without(body: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in body.items() if k != key}


def _group(**changes: Any) -> dict[str, Any]:
    """The valid cluster with its one node group changed."""
    return {**CLUSTER, "groups": [{**CLUSTER["groups"][0], **changes}]}


def _plan(**changes: Any) -> dict[str, Any]:
    return {**ESTIMATE, "plan": {**ESTIMATE["plan"], **changes}}


MOE_TOP_K_TOO_BIG = {"num_experts": 2, "top_k": 4, "expert_ffn_hidden_size": 8}
UNKNOWN_ZONE_LINK = [{"zones": ["default", "mars"], "bandwidth_GBps": 1}]

# (path, body, a field the details must name)
FIELD_CASES: list[tuple[str, dict[str, Any], str | None]] = [
    ("/v1/models", _without(MODEL, "num_layers"), "num_layers"),
    ("/v1/models", {**MODEL, "num_layers": "two"}, "num_layers"),
    ("/v1/models", {**MODEL, "num_layers": 0}, "num_layers"),
    ("/v1/models", {**MODEL, "num_layers": 10**9}, "num_layers"),
    ("/v1/models", {**MODEL, "hidden_size": -64}, "hidden_size"),
    ("/v1/models", {**MODEL, "hidden_size": 2.5}, "hidden_size"),
    ("/v1/models", {**MODEL, "activation": "relu"}, "activation"),
    ("/v1/models", {**MODEL, "num_layer": 2}, "num_layer"),
    ("/v1/models", {**MODEL, "name": ""}, "name"),
    ("/v1/models", {**MODEL, "name": "x" * 201}, "name"),
    ("/v1/models", {**MODEL, "name": "nul\u0000name"}, "name"),
    ("/v1/models", {**MODEL, "moe": MOE_TOP_K_TOO_BIG}, "moe"),
    ("/v1/clusters", {**CLUSTER, "groups": []}, "groups"),
    ("/v1/clusters", _group(num_nodes=0), "groups[0].num_nodes"),
    ("/v1/clusters", _group(num_nodes=10**9), "groups[0].num_nodes"),
    ("/v1/clusters", _group(gpus_per_node=10**9), "groups[0].gpus_per_node"),
    ("/v1/clusters", _group(intra_node_GBps=-300), "groups[0].intra_node_GBps"),
    ("/v1/clusters", _group(gpu="H999"), "groups[0].gpu"),
    ("/v1/clusters", _group(gpu={"name": "X", "bf16_tflops": 1}), "groups[0].gpu.hbm_gib"),
    # Rules across fields of the whole body blame no single field.
    ("/v1/clusters", {**CLUSTER, "groups": CLUSTER["groups"] * 2}, None),
    ("/v1/clusters", {**CLUSTER, "zone_links": UNKNOWN_ZONE_LINK}, None),
    ("/v1/estimate", _without(ESTIMATE, "training"), "training"),
    ("/v1/estimate", _without(ESTIMATE, "plan"), "plan"),
    ("/v1/estimate", {**ESTIMATE, "training": 7}, "training"),
    ("/v1/estimate", _plan(dp=-1), "plan.dp"),
    ("/v1/estimate", _plan(micro_batch_size=0), "plan.micro_batch_size"),
    ("/v1/estimate", {**ESTIMATE, "preset": "no-such-model"}, "preset"),
    ("/v1/estimate", {**ESTIMATE, "cluster_id": "no-such-cluster"}, "cluster_id"),
    ("/v1/estimate", {**ESTIMATE, "model_id": "0" * 32, "preset": None}, "model_id"),
    ("/v1/estimate", {**ESTIMATE, "training": "no-such-training"}, "training"),
    ("/v1/estimate", {**ESTIMATE, "plan": "no-such-plan"}, "plan"),
]


@pytest.mark.parametrize(("path", "body", "field"), FIELD_CASES)
def test_bad_values_name_the_field(
    seeded: httpx.Client, snapshot: Any, path: str, body: dict[str, Any], field: str | None
) -> None:
    body = {key: value for key, value in body.items() if value is not None}
    before = snapshot()
    error = assert_error(seeded.post(path, json=body), 422)
    assert field in error_fields(error), error
    assert snapshot() == before


def test_hf_import_errors_say_what_is_wrong(seeded: httpx.Client, snapshot: Any) -> None:
    before = snapshot()
    for config, words in (
        (_without(HF_CONFIG, "vocab_size"), "vocab_size"),
        ({**HF_CONFIG, "model_type": "bert"}, "model_type"),
        ({**HF_CONFIG, "hidden_size": {"a": 1}}, "hidden_size"),
    ):
        error = assert_error(seeded.post("/v1/models/import-hf", json=config), 422)
        assert words in error["message"], error
    assert snapshot() == before


def test_non_finite_numbers_are_refused(seeded: httpx.Client, snapshot: Any) -> None:
    before = snapshot()
    for token in (b"NaN", b"Infinity", b"-Infinity", b"1e999"):
        body = json.dumps({**CLUSTER, "groups": [{**CLUSTER["groups"][0], "num_nodes": 0}]})
        body = body.replace('"num_nodes": 0', '"num_nodes": ' + token.decode())
        error = assert_error(seeded.post("/v1/clusters", content=body, headers=JSON_HEADERS), 422)
        assert error_fields(error) == ["groups[0].num_nodes"], (token, error)
    assert snapshot() == before


def test_bodies_over_the_limit_are_413(seeded: httpx.Client, snapshot: Any) -> None:
    before = snapshot()
    padding = " " * (1024 * 1024 + 1)
    for path in BODIES:
        content = json.dumps(BODIES[path]) + padding
        assert_error(seeded.post(path, content=content, headers=JSON_HEADERS), 413)

    def chunks() -> Any:  # no Content-Length: counted while streaming
        yield json.dumps(MODEL).encode()
        for _ in range(20):
            yield b" " * 65536

    response = seeded.post("/v1/models", content=chunks(), headers=JSON_HEADERS)
    assert_error(response, 413, "payload_too_large")
    assert snapshot() == before


@pytest.mark.parametrize(
    ("method", "url", "status"),
    [
        ("GET", "/v1/models/%00", 404),
        ("DELETE", "/v1/models/%00", 404),
        ("GET", "/v1/clusters/%ED%A0%80", 404),
        ("GET", "/v1/gpus/%00", 404),
        ("GET", "/v1/models/" + "x" * 201, 422),
        ("DELETE", "/v1/clusters/" + "x" * 5000, 422),
        ("GET", "/v1/models?name=%00", 422),
        ("GET", "/v1/clusters?limit=-1", 422),
        ("GET", "/v1/gpus?limit=1e9", 422),
        ("GET", "/v1/gpus?cursor=%00", 422),
        ("GET", "/v1/models?cursor=" + "A" * 2000, 422),
        ("GET", "/v1/presets/model/%00", 404),
        ("GET", "/v1/presets/model/" + "x" * 201, 422),
        ("POST", "/v1/models/import-hf?name=", 422),
        ("DELETE", "/v1/gpus/H100-80GB", 405),
        ("PATCH", "/v1/models/llama2-7b", 405),
    ],
)
def test_bad_paths_and_queries(
    seeded: httpx.Client, snapshot: Any, method: str, url: str, status: int
) -> None:
    before = snapshot()
    body = HF_CONFIG if method == "POST" else None
    assert_error(seeded.request(method, url, json=body), status)
    assert snapshot() == before


# Fuzzing: arbitrary JSON, and spec-shaped documents with arbitrary values -----------------------
_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**20), max_value=10**20)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=20)
)
_json = st.recursive(
    _scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=12,
)


def _mutations(valid: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """The valid body with a few of its keys set to arbitrary values (or dropped)."""
    keys = st.sampled_from(sorted(valid))
    return st.dictionaries(keys, _json | st.just(None), min_size=1, max_size=3).map(
        lambda changes: {
            key: value
            for key, value in {**valid, **changes}.items()
            if not (key in changes and changes[key] is None)
        }
    )


@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(sorted(BODIES)),
    data=st.data(),
)
def test_fuzzed_bodies_never_cause_a_server_error(
    client: httpx.Client, path: str, data: st.DataObject
) -> None:
    body = data.draw(_json | _mutations(BODIES[path]))
    response = client.post(path, content=json.dumps(body), headers=JSON_HEADERS)
    assert response.status_code < 500, (path, body, response.text)
    if response.status_code >= 400:
        assert_error(response, response.status_code)
