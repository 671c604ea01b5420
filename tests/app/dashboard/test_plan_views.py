"""The views of a heterogeneous plan (cluster map, zone crossings) and of a calibration
(error per source, parameters moved, predicted vs measured before and after)."""

from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.app.dashboard.pages import chart, drawn, micro_batches, screenshot, wait_for_search
from tests.support.calibration_data import TRUTH, measured, observations, unmeasured_profile

pytestmark = pytest.mark.browser

MIXED = {
    "preset": "llama3-70b",
    "training": "llama3-8k",
    "cluster_id": "mixed-h100-a100-2zone",
    "trials": 30,
    "seed": 1,
    # More GPUs than any one group has: every plan spans node groups.
    "constraints": {"num_gpus": {"min": 129}},
    "name": "browser: mixed GPUs",
}


def groups_of(plan: dict[str, Any]) -> set[str]:
    return {
        name
        for stage in plan["stages"] or []
        for name in (
            [stage["group"]] if stage["group"] else [r["group"] for r in stage["replicas"]]
        )
    }


def test_a_heterogeneous_plan_shows_which_groups_run_which_stages(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    created = api.post("/v1/searches", json=MIXED)
    assert created.status_code == 202, created.text
    search = wait_for_search(api, created.json()["id"])
    assert search["status"] == "succeeded", search
    plans = api.get(f"/v1/searches/{search['id']}/plans").json()["items"]
    spanning = [
        p
        for p in plans
        if len(groups_of(p["plan"])) > 1 and all(s["group"] for s in p["plan"]["stages"])
    ]
    assert spanning, "no plan with whole stages on different node groups"
    record = spanning[0]
    plan = record["plan"]
    cluster = search["request"]["cluster"]
    zone_of = {group["name"]: group["zone"] for group in cluster["groups"]}

    page.goto(f"{base_url}/plans/{record['id']}")
    cluster_map = page.locator("#cluster-map")
    expect(cluster_map.locator(".zone")).to_have_count(len(set(zone_of.values())))
    expect(cluster_map.locator(".node-group")).to_have_count(len(cluster["groups"]))
    expect(cluster_map.locator(".layer-split > div")).to_have_count(plan["pp"])
    for group in groups_of(plan):
        zone = zone_of[group]
        expect(
            cluster_map.locator(
                f'.zone[data-zone="{zone}"] .node-group[data-group="{group}"] .stage-chip'
            )
        ).not_to_have_count(0)
    crossing = [
        s
        for s in range(plan["pp"] - 1)
        if zone_of[plan["stages"][s]["group"]] != zone_of[plan["stages"][s + 1]["group"]]
    ]
    expect(cluster_map.locator("#zone-crossings tbody tr")).to_have_count(len(crossing))

    memory = chart(page, "memory")
    assert memory["labels"] == plan["pp"]
    pipeline = chart(page, "pipeline")
    assert pipeline["labels"] == plan["pp"]
    assert drawn(pipeline, "Forward") == plan["pp"] * micro_batches(record) * plan["vpp"]
    screenshot(page, artifacts, "plan-heterogeneous")


def seed_calibration(api: httpx.Client) -> tuple[dict[str, Any], int]:
    """A profile and observed runs whose times the model gives under known parameters, fitted."""
    profiles, observed = measured([unmeasured_profile()], observations(), TRUTH)
    profile = api.post("/v1/profiles", json={"profile": profiles[0].model_dump(mode="json")})
    assert profile.status_code == 201, profile.text
    for run in observed:
        body = run.model_dump(mode="json", include={"model", "training", "cluster", "plan"})
        body.update(name=run.name, source=run.source, step_time_s=run.step_time_s)
        assert api.post("/v1/observations", json=body).status_code == 201
    fitted = api.post(
        "/v1/calibrations",
        json={
            "name": "browser-lab",
            "profile_ids": [profile.json()["id"]],
            "observation_sources": [observed[0].source],
        },
    )
    assert fitted.status_code == 201, fitted.text
    return fitted.json(), len(observed)


def test_a_calibration_shows_what_it_changed(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    calibration, runs = seed_calibration(api)
    page.goto(f"{base_url}/calibration")
    expect(page.locator("#profiles-table tbody tr")).not_to_have_count(0)
    expect(page.locator("#observations-table tbody tr")).to_have_count(runs)
    page.get_by_role("link", name=calibration["ref"]).click()
    page.wait_for_url(f"**/calibrations/{calibration['id']}")

    sources = calibration["result"]["held_out"]
    errors = chart(page, "source-errors")
    assert errors["labels"] == len(sources)
    assert drawn(errors, "before") == drawn(errors, "after") == len(sources)
    expect(page.locator("#parameters-table tbody tr")).to_have_count(
        len(calibration["result"]["changes"])
    )
    scatter = chart(page, "predicted-measured")
    observed_sources = {s["source"] for s in sources if s["observed_runs"]}
    assert len(observed_sources) == 1
    (source,) = observed_sources
    assert drawn(scatter, f"{source} · before") == drawn(scatter, f"{source} · after") == runs
    screenshot(page, artifacts, "calibration")


def test_a_plan_shows_its_goodput(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    """The goodput panel: goodput, checkpoint interval, interruptions, where lost time goes."""
    created = api.post(
        "/v1/searches",
        json={
            "preset": "gpt-1.7b",
            "training": {"seq_length": 2048, "global_batch_size": 64, "train_tokens": 1e11},
            "cluster_id": "dgx-a100-8n",
            "objective": "goodput",
            "sampler": "exhaustive",
            "top_k": 1,
            "name": "browser: goodput",
        },
    )
    assert created.status_code == 202, created.text
    search = wait_for_search(api, created.json()["id"])
    assert search["status"] == "succeeded", search
    record = api.get(f"/v1/searches/{search['id']}/plans").json()["items"][0]
    goodput = record["estimate"]["goodput"]

    page.goto(f"{base_url}/plans/{record['id']}")
    panel = page.locator("#goodput")
    expect(panel).to_be_visible()
    expect(panel.locator(".metric").first).to_contain_text(f"{goodput['goodput'] * 100:.1f}%")
    expect(panel).to_contain_text("Checkpoint every")
    expect(panel).to_contain_text("Interruptions")
    expect(panel.locator("#goodput-lost tbody tr")).to_have_count(3)
    expect(panel.locator("#goodput-lost")).to_contain_text("Recomputed steps")
    # A plan without pipeline stages has no zoom buttons, and nothing takes their place.
    timeline = page.locator("#pipeline")
    expect(timeline.locator(".chart")).to_be_visible()
    expect(timeline.locator(".zoom")).to_have_count(0)
    assert "null" not in timeline.inner_text()
    screenshot(page, artifacts, "plan-goodput")
