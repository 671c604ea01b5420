"""``autopar export`` as users run it: offline from presets and files, and for a stored plan from
the service at ``--url``; bad input is one ``error:`` line and exit status 2."""

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from tests.support.exports import file, get, parse_megatron
from tests.support.paths import REPO_ROOT

GPT3 = ["-m", "gpt3-175b", "-t", "gpt3-2k", "-c", "dgx-h100-128n"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "export", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_error(result: subprocess.CompletedProcess[str], expected: str) -> None:
    assert result.returncode == 2, result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr
    (line,) = result.stderr.splitlines()
    assert line.startswith("error: ") and expected in line, line


def test_an_offline_export_writes_the_files(tmp_path: Path) -> None:
    result = run_cli("tp8-pp8-dp16", "--format", "megatron", *GPT3, "--out", str(tmp_path))
    assert result.returncode == 0, result.stderr
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written == ["launch_megatron.sh", "nemo2_recipe.py"]
    script = tmp_path / "launch_megatron.sh"
    assert script.stat().st_mode & 0o100  # executable
    ns, launch = parse_megatron(script.read_text())
    assert (ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size) == (8, 8)
    assert int(launch.nnodes) * int(launch.nproc_per_node) == 8 * 8 * 16
    assert result.stdout.splitlines() == [str(tmp_path / name) for name in written]


def test_a_plan_file_exports_to_stdout(tmp_path: Path) -> None:
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        yaml.safe_dump(
            {
                "dp": 64,
                "tp": 1,
                "pp": 1,
                "micro_batch_size": 1,
                "zero_stage": 3,
                "recompute": "full",
            }
        )
    )
    result = run_cli(
        str(plan),
        "--format",
        "torchtitan",
        "-m",
        "llama3-8b",
        "-t",
        "llama3-8k",
        "-c",
        "dgx-a100-8n",
    )
    assert result.returncode == 0, result.stderr
    assert "# ==> torchtitan.toml <==" in result.stdout
    assert "data_parallel_shard_degree = 64" in result.stdout
    as_json = run_cli(
        str(plan),
        "--format",
        "slurm",
        "-m",
        "llama3-8b",
        "-t",
        "llama3-8k",
        "-c",
        "dgx-a100-8n",
        "--json",
    )
    export = json.loads(as_json.stdout)
    assert export["framework"] == "deepspeed"  # the first framework that can launch it
    assert export["num_gpus"] == 64 and export["num_nodes"] == 8


def test_a_framework_that_cannot_launch_the_plan_is_one_line() -> None:
    result = run_cli(
        "fsdp-dp64",
        "--format",
        "megatron",
        "-m",
        "llama3-8b",
        "-t",
        "llama3-8k",
        "-c",
        "dgx-a100-8n",
    )
    assert_one_error(
        result,
        "format: megatron cannot launch this plan: zero_stage: Megatron shards only the "
        "optimizer states",
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["tp8-pp8-dp16", "--format", "megatron", "-m", "gpt3-175b"], "missing --training"),
        (["tp8-pp8-dp16", "--format", "pdf", *GPT3], "--format: 'pdf' is not one of"),
        (["tp8-pp8-dp16", "--format", "slurm", "--framework", "jax", *GPT3], "--framework"),
        (["no-such-plan", "--format", "megatron", *GPT3], "no-such-plan"),
    ],
)
def test_bad_input_is_one_line(args: list[str], expected: str) -> None:
    assert_one_error(run_cli(*args), expected)


def test_a_plan_file_without_its_specs_is_refused(tmp_path: Path) -> None:
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    assert_one_error(run_cli(str(plan), "--format", "megatron"), "needs --model, --training")


# A stored plan: the service's answer, as an HTTP server gives it ------------------------------
class _Service(BaseHTTPRequestHandler):
    answers: ClassVar[dict[str, tuple[int, Any]]] = {}
    seen: ClassVar[list[tuple[str, dict[str, list[str]]]]] = []
    authorizations: ClassVar[list[str | None]] = []

    def do_GET(self) -> None:
        url = urlparse(self.path)
        self.seen.append((url.path, parse_qs(url.query)))
        self.authorizations.append(self.headers.get("authorization"))
        missing = {"error": {"code": "not_found", "message": "no such route", "details": []}}
        status, body = self.answers.get(url.path, (404, missing))
        payload = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args: Any) -> None:
        del args


@pytest.fixture
def service() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Service)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        _Service.answers.clear()
        _Service.seen.clear()
        _Service.authorizations.clear()


def test_a_stored_plan_is_exported_by_the_service(service: str, tmp_path: Path) -> None:
    exported = get("dense-3d").export("slurm")
    plan_id = "0" * 32
    body = {"plan_id": plan_id, **exported.model_dump()}
    _Service.answers[f"/v1/plans/{plan_id}/export"] = (200, body)
    result = run_cli(
        plan_id,
        "--format",
        "slurm",
        "--framework",
        "megatron",
        "--url",
        service,
        "--out",
        str(tmp_path),
    )
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "autopar.sbatch").read_text() == file(exported, "autopar.sbatch")
    ((path, query),) = _Service.seen
    assert path == f"/v1/plans/{plan_id}/export"
    assert query == {"format": ["slurm"], "framework": ["megatron"]}


def test_the_api_key_goes_to_the_service(service: str) -> None:
    exported = get("dense-3d").export("megatron")
    plan_id = "3" * 32
    _Service.answers[f"/v1/plans/{plan_id}/export"] = (
        200,
        {"plan_id": plan_id, **exported.model_dump()},
    )
    result = run_cli(plan_id, "--format", "megatron", "--url", service, "--api-key", "ap_secret")
    assert result.returncode == 0, result.stderr
    assert _Service.authorizations == ["Bearer ap_secret"]


def test_the_services_refusal_is_one_line(service: str) -> None:
    plan_id = "1" * 32
    _Service.answers[f"/v1/plans/{plan_id}/export"] = (
        422,
        {
            "error": {
                "code": "not_launchable",
                "message": "format: megatron cannot launch this plan: zero_stage: Megatron ...",
                "details": [],
            }
        },
    )
    result = run_cli(plan_id, "--format", "megatron", "--url", service)
    assert_one_error(result, "megatron cannot launch this plan: zero_stage")
    assert "HTTP 422" in result.stderr


def test_an_unreachable_service_is_one_line() -> None:
    result = run_cli("2" * 32, "--format", "megatron", "--url", "http://127.0.0.1:9")
    assert_one_error(result, "cannot reach the autopar service at http://127.0.0.1:9")
