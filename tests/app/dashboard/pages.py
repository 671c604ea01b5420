"""What the browser tests read off a page: charts as drawn, screenshots, waits on the API."""

import time
from pathlib import Path
from typing import Any

import httpx
from playwright.sync_api import Page, expect

# Only a hung worker takes this long; nothing asserts on how long anything took.
SEARCH_WAIT_S = 120

_CHART = """(canvas) => {
  const chart = Chart.getChart(canvas);
  const pixels = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
  let painted = 0;
  for (let i = 3; i < pixels.length; i += 4) if (pixels[i] > 0) painted += 1;
  return {
    type: chart.config.type,
    labels: (chart.data.labels || []).length,
    yTicks: chart.scales.y ? chart.scales.y.ticks.length : null,
    datasets: chart.data.datasets.map((dataset, index) => ({
      label: dataset.label,
      drawn: chart.getDatasetMeta(index).data.length,
    })),
    painted,
    width: canvas.width,
    height: canvas.height,
  };
}"""


def chart(page: Page, name: str) -> dict[str, Any]:
    """The Chart.js chart ``data-chart=name`` as drawn: labels, elements per dataset, and how
    many canvas pixels it painted."""
    canvas = page.locator(f'canvas[data-chart="{name}"]')
    expect(canvas).to_be_visible()
    info: dict[str, Any] = canvas.evaluate(_CHART)
    assert info["painted"] > 0.01 * info["width"] * info["height"], f"{name} looks blank: {info}"
    return info


def drawn(info: dict[str, Any], label: str) -> int:
    return next(d["drawn"] for d in info["datasets"] if d["label"] == label)


def screenshot(page: Page, folder: Path, name: str, *, full_page: bool = True) -> Path:
    path = folder / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path


def wait_for_search(api: httpx.Client, search_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + SEARCH_WAIT_S
    while True:
        search: dict[str, Any] = api.get(f"/v1/searches/{search_id}").json()
        if search["status"] in ("succeeded", "failed", "cancelled"):
            return search
        assert time.monotonic() < deadline, f"search still {search['status']}"
        time.sleep(0.3)


def micro_batches(record: dict[str, Any]) -> int:
    plan = record["plan"]
    return round(record["global_batch_size"] / (plan["dp"] * plan["micro_batch_size"]))


SEARCH_TIMEOUT_MS = 120_000  # a hung worker, not a slow one: nothing asserts on durations


def open_form(page: Page, base_url: str) -> None:
    page.goto(f"{base_url}/searches/new")
    # The choices come from the API; wait for them before picking.
    expect(page.locator('#f-model-ref option[value="preset:gpt-1.7b"]')).to_be_attached()
    expect(page.locator('#f-cluster-ref option[value="dgx-a100-1n"]')).to_be_attached()
    expect(page.locator('#f-training-ref option[value="gpt3-2k"]')).to_be_attached()
