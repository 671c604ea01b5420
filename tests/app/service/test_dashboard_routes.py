"""The dashboard's routes beside the API: HTML pages outside the OpenAPI schema, JSON errors kept
for every /v1 path, an HTML 404 page for browsers, and docs that load nothing from a CDN."""

import re

import httpx
import pytest

from app.dashboard.assets import STATIC_DIR

PAGES = [
    ("/", "home.js"),
    ("/searches/new", "new_search.js"),
    (f"/searches/{'0' * 32}", "search.js"),
    (f"/plans/{'0' * 32}", "plan.js"),
    ("/compare?plans=a,b", "compare.js"),
    ("/calibration", "calibration.js"),
    ("/calibrations/lab@1", "calibration_detail.js"),
]
HTML = {"accept": "text/html,application/xhtml+xml"}


@pytest.mark.parametrize(("path", "script"), PAGES)
def test_each_page_is_a_shell_for_its_script(client: httpx.Client, path: str, script: str) -> None:
    response = client.get(path, headers=HTML)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert f'src="/static/js/{script}"' in response.text
    assert "script-src 'self'" in response.headers["content-security-policy"]
    # No third-party URL anywhere in the page.
    assert not re.search(r"(src|href)=\"https?://", response.text)


def test_a_page_hands_its_ids_to_its_script_escaped(client: httpx.Client) -> None:
    page = client.get('/calibrations/a"b<c', headers=HTML).text
    assert 'data-key="a&#34;b&lt;c"' in page


def test_pages_are_not_in_the_openapi_schema(client: httpx.Client) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    assert all(path.startswith("/v1/") or path == "/healthz" for path in paths), sorted(paths)


def test_unknown_api_routes_keep_the_json_404(client: httpx.Client) -> None:
    for headers in ({}, HTML):
        response = client.get("/v1/nothing-here", headers=headers)
        assert response.status_code == 404
        assert response.json()["error"]["code"] == "not_found"
    assert client.get("/static/js/nothing.js", headers=HTML).json()["error"]["code"] == "not_found"


def test_browsers_get_an_html_404_page_and_clients_json(client: httpx.Client) -> None:
    page = client.get("/no-such-page", headers=HTML)
    assert page.status_code == 404 and "Page not found" in page.text
    assert client.get("/no-such-page").json()["error"]["code"] == "not_found"
    assert client.post("/no-such-page", headers=HTML).json()["error"]["code"] == "not_found"


@pytest.mark.parametrize("path", ["/docs", "/redoc", "/docs/oauth2-redirect"])
def test_docs_load_only_this_servers_assets(client: httpx.Client, path: str) -> None:
    response = client.get(path)
    assert response.status_code == 200
    assert "default-src 'self'" in response.headers["content-security-policy"]
    assert not re.search(r"https?://(?!127\.0\.0\.1)", response.text), "a CDN URL in the page"
    for asset in re.findall(r"[\"'](/static/[^\"']+)[\"']", response.text):
        fetched = client.get(asset)
        assert fetched.status_code == 200, asset
        assert fetched.headers["cache-control"] == "no-cache"


def test_vendored_bundles_ship_with_their_licences() -> None:
    vendor = STATIC_DIR / "vendor"
    for folder, licence in [
        ("chartjs", "LICENSE.md"),
        ("swagger-ui", "LICENSE"),
        ("redoc", "LICENSE"),
    ]:
        assert (vendor / folder / licence).is_file(), f"{folder}: licence missing"
    assert "Chart.js v4.5.1" in (vendor / "chartjs" / "chart.umd.min.js").read_text()[:200]
