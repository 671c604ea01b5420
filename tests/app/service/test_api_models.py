"""/v1/models: stored model specs, presets, pagination and Hugging Face import."""

from typing import Any

import httpx

from costmodel.catalog import list_presets
from tests.app.service.api_helpers import assert_error, error_fields

TINY = {
    "name": "tiny-gpt",
    "num_layers": 4,
    "hidden_size": 256,
    "num_attention_heads": 8,
    "vocab_size": 1000,
}


def create(client: httpx.Client, **overrides: Any) -> dict[str, Any]:
    response = client.post("/v1/models", json={**TINY, **overrides})
    assert response.status_code == 201, response.text
    return response.json()


def test_create_returns_the_validated_spec_and_a_location(client: httpx.Client) -> None:
    response = client.post("/v1/models", json=TINY)
    assert response.status_code == 201, response.text
    record = response.json()
    assert record["name"] == "tiny-gpt"
    assert record["is_preset"] is False and record["source"] == "api"
    # Stored as validated JSON: defaults are filled in.
    assert record["spec"]["activation"] == "gelu"
    assert record["spec"]["num_layers"] == 4
    assert response.headers["location"] == f"/v1/models/{record['id']}"
    assert record["created_at"].endswith("Z") or record["created_at"].endswith("+00:00")


def test_get_by_id_and_by_name(client: httpx.Client) -> None:
    record = create(client)
    by_id = client.get(f"/v1/models/{record['id']}")
    by_name = client.get("/v1/models/tiny-gpt")
    assert by_id.status_code == by_name.status_code == 200
    assert by_id.json() == by_name.json() == record


def test_unknown_id_is_404(client: httpx.Client) -> None:
    error = assert_error(client.get("/v1/models/" + "0" * 32), 404, "not_found")
    assert "0" * 32 in error["message"]
    assert_error(client.delete("/v1/models/no-such-model"), 404, "not_found")


def test_same_name_twice_is_a_conflict(client: httpx.Client, snapshot: Any) -> None:
    create(client)
    before = snapshot()
    error = assert_error(client.post("/v1/models", json={**TINY, "num_layers": 8}), 409, "conflict")
    assert error_fields(error) == ["name"]
    assert snapshot() == before


def test_a_preset_name_cannot_be_taken(client: httpx.Client) -> None:
    assert_error(client.post("/v1/models", json={**TINY, "name": "llama2-7b"}), 409, "conflict")


def test_delete_then_gone(client: httpx.Client) -> None:
    record = create(client)
    assert client.delete(f"/v1/models/{record['id']}").status_code == 204
    assert_error(client.get(f"/v1/models/{record['id']}"), 404)
    assert_error(client.delete(f"/v1/models/{record['id']}"), 404)


def test_presets_are_listed_readable_by_name_and_read_only(
    client: httpx.Client, snapshot: Any
) -> None:
    presets = client.get("/v1/models", params={"preset": "true", "limit": 200}).json()["items"]
    # Set, not order: the order is the database's collation, which may differ from Python's.
    assert sorted(item["name"] for item in presets) == list_presets("model")
    assert all(item["is_preset"] and item["source"] == "catalog" for item in presets)
    llama = client.get("/v1/models/llama2-7b").json()
    assert llama["spec"]["num_layers"] == 32
    before = snapshot()
    error = assert_error(client.delete("/v1/models/llama2-7b"), 409, "conflict")
    assert "preset" in error["message"]
    assert snapshot() == before


def test_list_filters_by_name_and_preset(client: httpx.Client) -> None:
    create(client, name="Tiny-Alpha")
    create(client, name="tiny-beta")
    names = [item["name"] for item in client.get("/v1/models?name=TINY").json()["items"]]
    assert names == sorted(["Tiny-Alpha", "tiny-beta"])
    user_made = client.get("/v1/models", params={"preset": "false"}).json()["items"]
    assert {item["name"] for item in user_made} == {"Tiny-Alpha", "tiny-beta"}
    # LIKE wildcards in the filter are literal characters.
    assert client.get("/v1/models", params={"name": "%"}).json()["items"] == []
    assert client.get("/v1/models", params={"name": "_"}).json()["items"] == []


def test_pages_cover_everything_once_in_name_order(client: httpx.Client) -> None:
    for index in range(7):
        create(client, name=f"page-model-{index}")
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, Any] = {"limit": 3, "name": "page-model"}
        if cursor:
            params["cursor"] = cursor
        body = client.get("/v1/models", params=params).json()
        seen += [item["name"] for item in body["items"]]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == [f"page-model-{index}" for index in range(7)]
    assert pages == 3


def test_rows_added_between_pages_do_not_shift_the_next_page(client: httpx.Client) -> None:
    for name in ("keyset-b", "keyset-d", "keyset-f"):
        create(client, name=name)
    first = client.get("/v1/models", params={"limit": 2, "name": "keyset"}).json()
    create(client, name="keyset-a")  # sorts before the cursor: must not reappear or shift
    second = client.get(
        "/v1/models", params={"limit": 2, "name": "keyset", "cursor": first["next_cursor"]}
    ).json()
    assert [item["name"] for item in first["items"]] == ["keyset-b", "keyset-d"]
    assert [item["name"] for item in second["items"]] == ["keyset-f"]
    assert second["next_cursor"] is None


def test_bad_cursor_and_limits_are_422(client: httpx.Client) -> None:
    for params in (
        {"cursor": "not-a-cursor"},
        {"cursor": "eyJ4IjogMX0"},  # valid base64 JSON, wrong shape
        {"limit": 0},
        {"limit": 201},
        {"limit": "ten"},
        {"preset": "maybe"},
        {"name": ""},
    ):
        error = assert_error(client.get("/v1/models", params=params), 422)
        assert error_fields(error) == [next(iter(params))], (params, error)


# Hugging Face import ---------------------------------------------------------------------------
LLAMA3_8B_CONFIG = {
    "_name_or_path": "meta-llama/Meta-Llama-3-8B",
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "vocab_size": 128256,
    "tie_word_embeddings": False,
    "rope_theta": 500000.0,
    "torch_dtype": "bfloat16",
}


def test_import_hf_config(client: httpx.Client) -> None:
    response = client.post("/v1/models/import-hf", json=LLAMA3_8B_CONFIG)
    assert response.status_code == 201, response.text
    record = response.json()
    assert record["source"] == "hf"
    assert record["name"] == "meta-llama-3-8b"
    assert "LlamaForCausalLM" in record["description"]
    spec = record["spec"]
    assert (spec["num_layers"], spec["hidden_size"], spec["num_kv_heads"]) == (32, 4096, 8)
    assert (spec["ffn_hidden_size"], spec["activation"]) == (14336, "swiglu")
    assert client.get("/v1/models/meta-llama-3-8b").status_code == 200


def test_import_hf_with_a_chosen_name_and_conflict(client: httpx.Client) -> None:
    first = client.post("/v1/models/import-hf?name=my-llama", json=LLAMA3_8B_CONFIG)
    assert first.status_code == 201 and first.json()["name"] == "my-llama"
    assert_error(client.post("/v1/models/import-hf?name=my-llama", json=LLAMA3_8B_CONFIG), 409)


def test_import_hf_bad_configs_are_422_and_store_nothing(
    client: httpx.Client, snapshot: Any
) -> None:
    before = snapshot()
    missing_layers = {k: v for k, v in LLAMA3_8B_CONFIG.items() if k != "num_hidden_layers"}
    for config in (
        missing_layers,
        {**LLAMA3_8B_CONFIG, "model_type": "not-a-family"},
        {**LLAMA3_8B_CONFIG, "hidden_size": -1},
        {**LLAMA3_8B_CONFIG, "num_attention_heads": "many"},
        {"model_type": "qwen2_moe", **{k: "x" for k in ("moe_intermediate_size",)}},
        {},
    ):
        error = assert_error(client.post("/v1/models/import-hf", json=config), 422)
        assert error["message"], config
    assert_error(client.post("/v1/models/import-hf", json=[1, 2]), 422)
    assert snapshot() == before
