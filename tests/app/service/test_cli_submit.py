"""``autopar submit`` as a scheduler runs it: a subprocess against the service on real TCP
(uvicorn in this process, its embedded worker running the searches). stdout holds only the
answer; every failure is one ``error:`` line with its own exit status."""

import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from app.errors import InvalidInputError
from tests.app.service.http_server import free_port, serve_app
from tests.support.paths import REPO_ROOT

# `autopar submit` as a subprocess against a live server.
pytestmark = pytest.mark.slow

SMALL = ["-m", "gpt-1.7b", "-t", "gpt3-2k", "-c", "dgx-a100-1n", "--sampler", "exhaustive"]
SMALL += ["-C", "tp=1,2", "-C", "recompute=none,selective"]


@pytest.fixture
def served(worker_database_url: str) -> Iterator[str]:
    with serve_app(worker_database_url) as url:
        yield url


def submit(*args: str, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "submit", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )


def one_error(result: subprocess.CompletedProcess[str], status: int, expected: str) -> str:
    assert result.returncode == status, (result.stdout, result.stderr)
    assert result.stdout == "" and "Traceback" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], result.stderr
    return errors[0]


def test_wait_prints_the_best_plans_export(served: str) -> None:
    result = submit(*SMALL, "--wait", "--format", "slurm", "--url", served, "--poll-s", "0.1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("#!/bin/bash") and "#SBATCH --nodes=1" in result.stdout
    assert "srun" in result.stdout
    # Progress went to stderr, as lines (no terminal): the search and how it ended.
    search_id = re.search(r"search ([0-9a-f]{32}) queued", result.stderr)
    assert search_id, result.stderr
    assert f"search {search_id[1]} succeeded" in result.stderr
    plans = httpx.get(f"{served}/v1/searches/{search_id[1]}/plans").json()["items"]
    assert f"#SBATCH --gpus-per-node={plans[0]['estimate']['num_gpus']}" in result.stdout


def test_without_wait_it_prints_the_search_id_and_an_out_dir_gets_the_files(
    served: str, tmp_path: Path
) -> None:
    keyed = [*SMALL, "--url", served, "--idempotency-key", "run-7"]
    queued = submit(*keyed, "--framework", "megatron")
    assert queued.returncode == 0, queued.stderr
    search_id = queued.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{32}", search_id)
    # The same key and request again (--format megatron implies the framework) is the same
    # search: waiting for it resumes it.
    waited = submit(*keyed, "--wait", "--format", "megatron", "--out", str(tmp_path))
    assert waited.returncode == 0, waited.stderr
    assert f"search {search_id} queued" in waited.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["launch_megatron.sh", "nemo2_recipe.py"]
    assert "--tensor-model-parallel-size" in (tmp_path / "launch_megatron.sh").read_text()
    training = httpx.get(f"{served}/v1/searches/{search_id}").json()["request"]["training"]
    assert training["framework"] == "megatron"  # plans Megatron can launch


def test_nothing_fits_exits_3(served: str) -> None:
    args = ["-m", "gpt3-175b", "-t", "gpt3-2k", "-c", "dgx-a100-8n", "-C", "tp=1", "-C", "pp=1"]
    result = submit(*args, "-C", "zero_stage=0", "--wait", "--url", served, "--poll-s", "0.1")
    one_error(result, 3, "no plan fits: search ")
    assert "0 fit in memory" in result.stderr


def test_a_cancelled_search_exits_4(served: str) -> None:
    args = ["-m", "llama3-70b", "-t", "llama3-8k", "-c", "dgx-h100-128n", "--sampler", "tpe"]
    args += ["--trials", "100000", "--timeout-s", "300", "--wait", "--url", served]

    def cancel_when_running() -> None:
        with httpx.Client(base_url=served, timeout=10) as http:
            for _ in range(600):
                running = http.get("/v1/searches", params={"status": "running"}).json()
                if running["items"]:
                    http.post(f"/v1/searches/{running['items'][0]['id']}/cancel")
                    return
                threading.Event().wait(0.1)

    canceller = threading.Thread(target=cancel_when_running)
    canceller.start()
    result = submit(*args, "--poll-s", "0.1")
    canceller.join()
    one_error(result, 4, " cancelled")


def test_a_refused_export_exits_2_with_the_reason(
    served: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_args: object, **_kwargs: object) -> None:
        raise InvalidInputError.at(
            "format", "megatron cannot launch this plan: zero_stage: ...", code="not_launchable"
        )

    # The server runs in this process: its export service refuses, the 422 travels for real.
    monkeypatch.setattr("app.exports.service.export_plan", refuse)
    result = submit(*SMALL, "--wait", "--format", "megatron", "--url", served, "--poll-s", "0.1")
    line = one_error(result, 2, "export of plan ")
    assert "format: megatron cannot launch this plan" in line and "not_launchable" in line


def test_a_request_the_service_refuses_exits_2(served: str) -> None:
    unknown = submit("-m", "no-such-model", "-t", "gpt3-2k", "-c", "dgx-a100-1n", "--url", served)
    one_error(unknown, 2, "search refused: model_id")


def test_option_mistakes_are_caught_before_any_request() -> None:
    one_error(submit(*SMALL, "--format", "slurm"), 2, "--format and --out need --wait")
    one_error(submit(*SMALL, "--wait", "--format", "docker"), 2, "--format: 'docker' is not")


def test_an_unreachable_service_exits_5() -> None:
    nowhere = f"http://127.0.0.1:{free_port()}"
    one_error(submit(*SMALL, "--url", nowhere), 5, f"cannot reach the autopar service at {nowhere}")


def test_ctrl_c_stops_waiting_and_says_where_the_search_is(served: str) -> None:
    args = ["-m", "llama3-70b", "-t", "llama3-8k", "-c", "dgx-h100-128n", "--sampler", "tpe"]
    args += ["--trials", "100000", "--timeout-s", "300", "--wait", "--url", served]
    command = [sys.executable, "-c", "from app.cli import main; main()", "submit", *args]
    process = subprocess.Popen(command, cwd=REPO_ROOT, stderr=subprocess.PIPE, text=True)
    assert process.stderr is not None
    first_line = process.stderr.readline()  # "search <id> queued": it is waiting now
    search_id = first_line.split()[1]
    process.send_signal(signal.SIGINT)
    _, rest = process.communicate(timeout=60)
    assert process.returncode == 130, first_line + rest
    assert f"interrupted: search {search_id} runs on at {served}" in rest
    assert "Traceback" not in rest
    search = httpx.get(f"{served}/v1/searches/{search_id}").json()
    assert search["status"] in ("queued", "running")
    httpx.post(f"{served}/v1/searches/{search_id}/cancel")
