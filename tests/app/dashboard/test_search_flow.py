"""A user's path through the dashboard: start a search from the form, watch it finish, read the
best plan's charts, compare two plans; and the form's errors next to the fields they name."""

import re
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.app.dashboard.pages import (
    SEARCH_TIMEOUT_MS,
    chart,
    drawn,
    micro_batches,
    open_form,
    screenshot,
)

pytestmark = pytest.mark.browser


def test_a_search_from_the_form_to_its_best_plan_and_a_comparison(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    open_form(page, base_url)
    page.select_option("#f-model-ref", "preset:gpt-1.7b")
    page.select_option("#f-cluster-ref", "dgx-a100-1n")
    page.select_option("#f-training-ref", "gpt3-2k")
    # Throughput (the default objective): a ranking of several plans to sort and compare. On one
    # node group every plan is charged the whole group, so the throughput-vs-cost front of a
    # pareto search here holds one plan (test_a_pareto_search_draws_its_front below).
    page.select_option("#f-sampler", "exhaustive")
    page.get_by_role("button", name="Add constraint").click()
    page.get_by_label("Constraint 1 dimension").select_option("pp")
    page.get_by_label("Constraint 1 allowed values").fill("4")
    page.fill("#f-search-name", "browser: throughput pp 4")
    screenshot(page, artifacts, "new-search")
    page.locator("#submit").click()

    page.wait_for_url(re.compile(r"/searches/[0-9a-f]{32}$"))
    search_id = page.url.rsplit("/", 1)[1]
    request = api.get(f"/v1/searches/{search_id}").json()["request"]
    assert request["model"]["name"] == "gpt-1.7b" and request["cluster"]["name"] == "dgx-a100-1n"
    assert (request["objective"], request["sampler"]) == ("throughput", "exhaustive")
    assert request["constraints"] == {"pp": 4}

    expect(page.locator("#search-title .badge")).to_have_text(
        "succeeded", timeout=SEARCH_TIMEOUT_MS
    )
    plans = api.get(f"/v1/searches/{search_id}/plans").json()["items"]
    assert len(plans) >= 2, "the ranking should offer a choice"
    table = page.locator("#plans-table tbody tr")
    expect(table).to_have_count(len(plans))
    assert table.evaluate_all("rows => rows.map(r => r.dataset.plan)") == [p["id"] for p in plans]

    # Sorting by tokens/s puts the fastest first, a second click the slowest.
    page.locator('button[data-sort="tokens"]').click()
    by_speed = sorted(plans, key=lambda p: -p["estimate"]["tokens_per_s"])
    expect(table.first).to_have_attribute("data-plan", by_speed[0]["id"])
    page.locator('button[data-sort="tokens"]').click()
    expect(table.first).to_have_attribute("data-plan", by_speed[-1]["id"])
    page.locator('button[data-sort="rank"]').click()
    screenshot(page, artifacts, "search")

    # The best plan: its charts have one bar / row per pipeline stage.
    page.get_by_role("link", name="open the best plan").click()
    best = api.get(f"/v1/searches/{search_id}").json()["progress"]["best"]["plan_id"]
    page.wait_for_url(f"**/plans/{best}")
    record = api.get(f"/v1/plans/{best}").json()
    stages = record["plan"]["pp"]
    assert stages == 4
    expect(page.locator("#plan-title")).to_contain_text("dp")

    breakdown = record["estimate"]["time_breakdown_s"]
    time_chart = chart(page, "time-breakdown")
    assert time_chart["labels"] == sum(1 for value in breakdown.values() if value > 0)

    memory = chart(page, "memory")
    assert memory["labels"] == stages
    assert all(dataset["drawn"] == stages for dataset in memory["datasets"])

    pipeline = chart(page, "pipeline")
    assert pipeline["labels"] == stages and pipeline["yTicks"] == stages
    per_stage = micro_batches(record) * record["plan"]["vpp"]
    assert drawn(pipeline, "Forward") == drawn(pipeline, "Backward") == stages * per_stage
    expect(page.locator("#stages-table tbody tr")).to_have_count(stages)
    # The export area: one link per format whose framework can launch the plan.
    expect(page.locator("#export")).to_be_visible()
    launchable = record["estimate"]["launchable_by"]
    assert "megatron" in launchable
    megatron = page.locator('#export a[data-format="megatron"]')
    expect(megatron).to_be_visible()
    exported = api.get(megatron.get_attribute("href") or "")
    assert exported.status_code == 200, exported.text
    assert "--pipeline-model-parallel-size" in exported.text
    screenshot(page, artifacts, "plan")
    screenshot(page, artifacts, "plan-viewport", full_page=False)
    if page.get_by_role("button", name="Start (warm-up)").count():
        page.get_by_role("button", name="Start (warm-up)").click()
        expect(page.get_by_role("button", name="Start (warm-up)")).to_have_attribute(
            "aria-pressed", "true"
        )
        page.locator("#pipeline").screenshot(path=str(artifacts / "pipeline-warm-up.png"))

    # Compare the first two plans of the ranking.
    page.go_back()
    expect(table).to_have_count(len(plans))
    chosen = [plans[0]["id"], plans[1]["id"]]
    for plan_id in chosen:
        page.locator(f'tr[data-plan="{plan_id}"] input[type="checkbox"]').check()
    page.get_by_role("link", name="Compare selected (2)").click()
    page.wait_for_url(f"**/compare?plans={','.join(chosen)}")
    expect(page.locator("#compare-table thead th a")).to_have_count(2)
    gpus = [p["estimate"]["num_gpus"] for p in plans[:2]]
    gpu_row = page.locator('#compare-table tr[data-row="GPUs used"] td')
    expect(gpu_row).to_have_text([str(n) for n in gpus])
    if gpus[0] != gpus[1]:
        expect(gpu_row.nth(1)).to_have_class(re.compile(r"\bdiff\b"))
    assert page.locator("#compare-table td.diff").count() > 0
    compare_chart = chart(page, "compare-time")
    assert compare_chart["labels"] == 2
    screenshot(page, artifacts, "compare")

    # Home lists it, finished, with its best throughput.
    page.goto(base_url + "/")
    row = page.locator(f'tr[data-search="{search_id}"]')
    expect(row.locator(".badge")).to_have_text("succeeded")
    expect(row).to_contain_text("browser: throughput pp 4")
    screenshot(page, artifacts, "home")


def test_a_pareto_search_draws_its_front(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    body = {
        "preset": "gpt-1.7b", "training": "gpt3-2k", "cluster_id": "dgx-a100-1n",
        "objective": "pareto", "sampler": "exhaustive", "constraints": {"pp": 4},
        "name": "browser: pareto pp 4",
    }  # fmt: skip
    created = api.post("/v1/searches", json=body)
    assert created.status_code == 202, created.text
    search_id = created.json()["id"]
    page.goto(f"{base_url}/searches/{search_id}")
    expect(page.locator("#search-title .badge")).to_have_text(
        "succeeded", timeout=SEARCH_TIMEOUT_MS
    )
    plans = api.get(f"/v1/searches/{search_id}/plans").json()["items"]
    assert plans
    pareto = chart(page, "pareto")
    assert drawn(pareto, "Plans on the front") == len(plans)
    screenshot(page, artifacts, "pareto")


def test_api_errors_appear_next_to_the_fields_they_name(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    searches_before = len(api.get("/v1/searches?limit=200").json()["items"])
    open_form(page, base_url)

    page.fill("#f-trials", "0")
    page.locator("#submit").click()
    trials_error = page.locator(".field:has(#f-trials) .field-error")
    expect(trials_error).to_contain_text("greater than or equal to 1")
    expect(page.locator("#f-trials")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#form-errors")).to_be_visible()
    expect(page.locator("#form-errors")).to_contain_text("trials")
    assert page.url.endswith("/searches/new")
    screenshot(page, artifacts, "form-error")

    # A model too large for the cluster: the API blames cluster_id, the page the cluster picker.
    page.fill("#f-trials", "20")
    page.select_option("#f-model-ref", "preset:llama3.1-405b")
    page.locator("#submit").click()
    expect(page.locator(".field:has(#f-cluster-ref) .field-error")).to_contain_text(
        "needs at least"
    )
    expect(trials_error).to_have_count(0)

    # A node group's field, by its index in the group editor.
    page.select_option("#f-model-ref", "preset:gpt-1.7b")
    page.locator('input[name="cluster_mode"][value="groups"]').check()
    nodes = page.get_by_label("Group 1 Nodes", exact=True)
    nodes.fill("0")
    page.locator("#submit").click()
    expect(
        page.locator("td:has([data-field='cluster.groups[0].num_nodes']) .field-error")
    ).to_be_visible()
    expect(nodes).to_have_attribute("aria-invalid", "true")
    screenshot(page, artifacts, "form-error-group")
    assert len(api.get("/v1/searches?limit=200").json()["items"]) == searches_before


def test_unknown_pages_and_ids_have_their_own_states(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/no-such-page")
    expect(page.get_by_role("heading", name="Page not found")).to_be_visible()
    page.goto(f"{base_url}/plans/{'0' * 32}")
    expect(page.locator("#plan-title")).to_have_text("No such plan")
    expect(page.get_by_role("alert")).to_contain_text("404")
    page.goto(f"{base_url}/compare?plans=only-one")
    expect(page.get_by_role("heading", name="Pick two to four plans")).to_be_visible()
