"""End-to-end tests of the dashboard in a real browser: Debian's Chromium driven by Playwright
against ``autopar serve`` on a free localhost port (SQLite), with every request that leaves
localhost aborted, so the pages are tested as an air-gapped cluster would see them.

Chromium is installed with apt when missing (CI runs as root on a fresh machine); Playwright's
own browser download is never used. Screenshots go to ``artifacts/browser/`` (or
``$AUTOPAR_ARTIFACTS``), one per page a test looked at.
"""

import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import (
    BrowserContext,
    Page,
    Playwright,
    Request,
    Route,
    expect,
    sync_playwright,
)

from tests.app.dashboard.server import serving
from tests.support.paths import REPO_ROOT

CHROMIUM = Path(os.environ.get("AUTOPAR_CHROMIUM", "/usr/bin/chromium"))
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
VIEWPORT = {"width": 1366, "height": 768}
ARTIFACTS = Path(os.environ.get("AUTOPAR_ARTIFACTS", REPO_ROOT / "artifacts"))
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}


def _install_chromium() -> None:
    if os.geteuid() != 0:
        pytest.fail(f"{CHROMIUM} is missing; install Debian's chromium (apt-get install chromium)")
    environment = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    subprocess.run(["apt-get", "update"], check=True, env=environment)
    subprocess.run(["apt-get", "install", "-y", "chromium"], check=True, env=environment)


@pytest.fixture(scope="session")
def chromium() -> Path:
    if not CHROMIUM.exists():
        _install_chromium()
    assert CHROMIUM.exists(), f"{CHROMIUM} still missing after apt-get install chromium"
    return CHROMIUM


@pytest.fixture(scope="session")
def base_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard under test, with access control off (no API key exists)."""
    with serving(tmp_path_factory.mktemp("dashboard-server")) as url:
        yield url


@pytest.fixture(scope="session")
def api(base_url: str) -> Iterator[httpx.Client]:
    """The same REST API the pages read, for arranging data and checking what pages show."""
    with httpx.Client(base_url=base_url, timeout=60) as client:
        yield client


@pytest.fixture(scope="session")
def artifacts() -> Path:
    folder = ARTIFACTS / "browser"
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


@dataclass
class Offline:
    """Requests the browser tried to send off this machine (all aborted)."""

    blocked: list[str] = field(default_factory=list)


@pytest.fixture(scope="session")
def offline() -> Offline:
    return Offline()


# Per module, not per session: Playwright's sync API runs an event loop in this thread while it
# is open, and tests after these ones (asyncio.run in the service tests) need the thread free.
@pytest.fixture(scope="module")
def playwright_driver() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(
    playwright_driver: Playwright,
    chromium: Path,
    tmp_path_factory: pytest.TempPathFactory,
    offline: Offline,
) -> Iterator[BrowserContext]:
    """Chromium with a fresh profile; anything but localhost is aborted and recorded."""
    context = playwright_driver.chromium.launch_persistent_context(
        str(tmp_path_factory.mktemp("chromium-profile")),
        executable_path=str(chromium),
        args=CHROMIUM_ARGS,
        headless=True,
        viewport=VIEWPORT,
        locale="en-GB",
        timezone_id="UTC",
    )

    def guard(route: Route, request: Request) -> None:
        host = urlsplit(request.url).hostname or ""
        if request.url.startswith(("data:", "blob:")) or host in LOCAL_HOSTS:
            route.continue_()
        else:
            offline.blocked.append(request.url)
            route.abort("internetdisconnected")

    context.route("**/*", guard)
    context.set_default_timeout(30_000)
    # The same patience for assertions as for actions (Playwright's expect waits 5 s by
    # default): ReDoc's 39 operations took longer than that on a loaded 2-core machine.
    expect.set_options(timeout=30_000)
    yield context
    context.close()


@pytest.fixture
def page(browser: BrowserContext, offline: Offline) -> Iterator[Page]:
    """A new tab; the test fails on any uncaught script error or request off this machine."""
    tab = browser.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda error: errors.append(str(error)))
    blocked_before = len(offline.blocked)
    yield tab
    tab.close()
    assert errors == [], f"uncaught errors in the page: {errors}"
    assert offline.blocked[blocked_before:] == [], "the page reached off this machine"
