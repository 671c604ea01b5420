"""End-to-end tests of the dashboard in a real browser: Debian's Chromium driven by Playwright
against ``autopar serve`` on a free localhost port (SQLite), with every request that leaves
localhost aborted, so the pages are tested as an air-gapped cluster would see them.

Chromium is installed with apt when missing (CI runs as root on a fresh machine); Playwright's
own browser download is never used. Screenshots go to ``artifacts/browser/`` (or
``$AUTOPAR_ARTIFACTS``), one per page a test looked at.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest
from playwright.sync_api import BrowserContext, Page, Playwright, Request, Route, sync_playwright

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
ARTIFACTS = Path(os.environ.get("AUTOPAR_ARTIFACTS", Path(__file__).parents[2] / "artifacts"))
LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]", "::1"}
STARTUP_TIMEOUT_S = 60


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


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(folder: Path, **settings: str) -> Iterator[str]:
    """``autopar serve`` on a fresh SQLite database in ``folder``, its embedded worker running
    searches; ``settings`` are extra ``AUTOPAR_*`` variables. Yields the base URL."""
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    executable = Path(sys.executable).parent / "autopar"
    assert executable.exists(), "install the project (pip install -e '.[dev]') first"
    environment = {
        **os.environ,
        "AUTOPAR_DATABASE_URL": f"sqlite:///{folder / 'autopar.db'}",
        "AUTOPAR_PORT": str(port),
        "AUTOPAR_WORKER_POLL_S": "0.2",
        "AUTOPAR_LOG_LEVEL": "warning",
        **{f"AUTOPAR_{key.upper()}": value for key, value in settings.items()},
    }
    log = (folder / "serve.log").open("wb")
    process = subprocess.Popen(
        [str(executable), "serve", "--no-access-log"],
        cwd=folder,
        env=environment,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if process.poll() is not None:
                raise AssertionError((folder / "serve.log").read_text())
            try:
                if httpx.get(f"{url}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"autopar serve not healthy after {STARTUP_TIMEOUT_S} s")
            time.sleep(0.2)
        yield url
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()


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
