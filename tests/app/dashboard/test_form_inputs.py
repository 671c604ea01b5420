"""The other ways the form takes its inputs: a pasted Hugging Face config.json (imported through
POST /v1/models/import-hf), a cluster built in the node-group editor, a model given by fields;
and cancelling a running search from its page."""

import json
import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.app.dashboard.pages import SEARCH_TIMEOUT_MS, open_form, screenshot

pytestmark = pytest.mark.browser

# A small Llama-architecture config.json, as Hugging Face writes it.
TINY_LLAMA = {
    "architectures": ["LlamaForCausalLM"],
    "model_type": "llama",
    "hidden_act": "silu",
    "hidden_size": 1024,
    "intermediate_size": 2816,
    "num_attention_heads": 16,
    "num_hidden_layers": 8,
    "num_key_value_heads": 4,
    "vocab_size": 32000,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_a_hugging_face_config_on_a_cluster_from_the_group_editor(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    open_form(page, base_url)
    page.locator('input[name="model_mode"][value="hf"]').check()
    page.fill("#f-hf-config", "{not json")
    page.get_by_role("button", name="Import model").click()
    expect(page.locator(".field:has(#f-hf-config) .field-error")).to_contain_text("not valid JSON")

    page.fill("#f-hf-config", json.dumps(TINY_LLAMA, indent=2))
    page.fill("#f-hf-name", "tiny-llama-browser")
    page.get_by_role("button", name="Import model").click()
    expect(page.locator("#hf-result")).to_contain_text("Imported as “tiny-llama-browser”")
    stored = api.get("/v1/models/tiny-llama-browser").json()["spec"]
    assert (stored["num_layers"], stored["hidden_size"], stored["num_kv_heads"]) == (8, 1024, 4)

    # Start from a preset in the editor, then change it: one group of 2 nodes in zone "lab".
    page.select_option("#f-cluster-ref", "dgx-a100-1n")
    page.get_by_role("button", name="Edit as node groups").click()
    expect(page.get_by_label("Group 1 Name")).to_have_value("a100")
    page.get_by_label("Group 1 GPU", exact=True).select_option("H100-80GB")
    page.get_by_label("Group 1 Nodes", exact=True).fill("2")
    page.get_by_label("Group 1 Zone").fill("lab")
    page.get_by_label("Group 1 $ / GPU·h").fill("3.5")
    page.select_option("#f-sampler", "exhaustive")
    screenshot(page, artifacts, "new-search-custom")
    page.locator("#submit-top").click()  # the button above the form submits it too

    page.wait_for_url(re.compile(r"/searches/[0-9a-f]{32}$"))
    search_id = page.url.rsplit("/", 1)[1]
    request = api.get(f"/v1/searches/{search_id}").json()["request"]
    assert request["model"]["name"] == "tiny-llama-browser"
    (group,) = request["cluster"]["groups"]
    assert (group["gpu"], group["num_nodes"], group["gpus_per_node"]) == ("H100-80GB", 2, 8)
    assert (group["zone"], group["price_per_gpu_hour"]) == ("lab", 3.5)
    expect(page.locator("#search-title .badge")).to_have_text(
        "succeeded", timeout=SEARCH_TIMEOUT_MS
    )
    expect(page.locator("#plans-table tbody tr")).not_to_have_count(0)


def test_a_model_given_by_fields_is_checked_by_the_api(page: Page, base_url: str) -> None:
    open_form(page, base_url)
    page.locator('input[name="model_mode"][value="fields"]').check()
    page.get_by_label("Layers", exact=True).fill("0")
    page.locator("#submit").click()
    expect(page.locator(".field:has(#f-model-num_layers) .field-error")).to_contain_text(
        "greater than or equal to 1"
    )
    expect(page.locator("#form-errors")).to_contain_text("model.num_layers")


def test_a_running_search_is_cancelled_from_its_page(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    # A budget no test waits for: the search runs until the cancel lands.
    body = {"preset": "llama3-70b", "training": "llama3-8k", "cluster_id": "mixed-h100-a100-2zone"}
    created = api.post("/v1/searches", json={**body, "trials": 100_000, "seed": 5})
    assert created.status_code == 202, created.text
    search_id = created.json()["id"]
    page.goto(f"{base_url}/searches/{search_id}")
    expect(page.locator("#search-title .badge")).to_have_text("running", timeout=SEARCH_TIMEOUT_MS)
    screenshot(page, artifacts, "search-running", full_page=False)
    page.get_by_role("button", name="Cancel search").click()
    expect(page.locator("#search-title .badge")).to_have_text(
        "cancelled", timeout=SEARCH_TIMEOUT_MS
    )
    assert api.get(f"/v1/searches/{search_id}").json()["status"] == "cancelled"
    expect(page.get_by_role("button", name="Cancel search")).to_have_count(0)
