"""/docs and /redoc render from the package's own assets with every off-machine request
aborted (an air-gapped cluster)."""

from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.app.dashboard.pages import screenshot

pytestmark = pytest.mark.browser


def operations(api: httpx.Client) -> int:
    paths = api.get("/openapi.json").json()["paths"]
    return sum(len(methods) for methods in paths.values())


def test_swagger_ui_renders_the_operations_offline(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    page.goto(f"{base_url}/docs")
    expect(page.locator(".opblock")).to_have_count(operations(api))
    expect(
        page.locator(".opblock-summary-path", has_text="/v1/searches/{search_id}/plans")
    ).to_be_visible()
    screenshot(page, artifacts, "docs", full_page=False)


def test_redoc_renders_the_operations_offline(
    page: Page, base_url: str, api: httpx.Client, artifacts: Path
) -> None:
    page.goto(f"{base_url}/redoc")
    expect(page.locator('[data-section-id^="operation/"]')).to_have_count(operations(api))
    screenshot(page, artifacts, "redoc", full_page=False)
