"""The dashboard on a server that requires API keys: it asks for a key when the API answers
401, keeps it for the tab, sends it with every call (exports included), and shows another
tenant's search as not found."""

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.app.dashboard.pages import screenshot
from tests.app.dashboard.server import serving

pytestmark = pytest.mark.browser

SEARCH = {
    "preset": "gpt-1.7b",
    "training": {"seq_length": 2048, "global_batch_size": 64},
    "cluster_id": "dgx-a100-1n",
    "sampler": "exhaustive",
    "top_k": 3,
}


def create_key(folder: Path, tenant: str) -> str:
    executable = Path(sys.executable).parent / "autopar"
    command = [str(executable), "keys", "create", "--tenant", tenant]
    database = f"sqlite:///{folder / 'autopar.db'}"
    done = subprocess.run(
        [*command, "--database-url", database], capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


@pytest.fixture(scope="module")
def keyed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict[str, str]]]:
    folder = tmp_path_factory.mktemp("keyed-server")
    with serving(folder, require_auth="1") as url:
        yield url, {tenant: create_key(folder, tenant) for tenant in ("acme", "globex")}


def finished_search(url: str, token: str) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as api:
        search = api.post("/v1/searches", json=SEARCH).json()
        for _ in range(600):
            search = api.get(f"/v1/searches/{search['id']}").json()
            if search["status"] in ("succeeded", "failed", "cancelled"):
                break
            api.get("/healthz")
        assert search["status"] == "succeeded", search
        plans = api.get(f"/v1/searches/{search['id']}/plans").json()["items"]
        return {"search": search["id"], "plan": plans[0]["id"]}


def sign_in(page: Page, token: str) -> None:
    form = page.locator("#auth-slot form")
    expect(form).to_be_visible()
    page.get_by_label("API key").fill(token)
    page.get_by_role("button", name="Use key").click()
    expect(page.locator("#auth-slot .auth-key")).to_have_text(token[:11] + "…")


def test_the_dashboard_asks_for_a_key_and_uses_it(
    page: Page, keyed: tuple[str, dict[str, str]], artifacts: Path
) -> None:
    url, tokens = keyed
    ids = finished_search(url, tokens["acme"])
    page.goto(f"{url}/")
    expect(page.get_by_role("alert")).to_contain_text("401")
    screenshot(page, artifacts, "api-key-prompt", full_page=False)
    sign_in(page, tokens["acme"])
    expect(page.locator(f"a[href$='/searches/{ids['search']}']").first).to_be_visible()
    # The export opens with the key (a plain link would be refused).
    page.goto(f"{url}/plans/{ids['plan']}")
    with page.context.expect_page() as opened:
        page.locator("#export a[data-format='slurm']").click()
    document = opened.value
    document.wait_for_load_state()
    expect(document.locator("body")).to_contain_text("#SBATCH --nodes=1")
    document.close()
    # Another tenant's search is not there.
    page.get_by_role("button", name="Forget key").click()
    page.goto(f"{url}/searches/{ids['search']}")
    sign_in(page, tokens["globex"])
    expect(page.locator("#search-title")).to_have_text("No such search")
    expect(page.get_by_role("alert")).to_contain_text("404")
