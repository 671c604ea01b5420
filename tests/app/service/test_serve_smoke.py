"""``autopar serve`` as a real process on a free port: migrates an empty database, loads the
catalog, answers over TCP, and stops cleanly on Ctrl-C."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from app.migrate import head_revision

# A real `autopar serve` process per test.
pytestmark = pytest.mark.slow

STARTUP_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_until_healthy(base_url: str, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = process.stdout.read().decode() if process.stdout else ""
            raise AssertionError(f"autopar serve exited with {process.returncode}:\n{output}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"autopar serve not healthy after {STARTUP_TIMEOUT_S} s")


def test_autopar_serve(make_empty_database: Callable[[], str], tmp_path: Path) -> None:
    executable = Path(sys.executable).parent / "autopar"
    assert executable.exists(), "install the project (make run / pip install -e .) first"
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AUTOPAR_DATABASE_URL": make_empty_database(), "AUTOPAR_PORT": str(port)}
    process = subprocess.Popen(
        [str(executable), "serve", "--no-access-log"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        wait_until_healthy(base_url, process)
        with httpx.Client(base_url=base_url, timeout=10) as client:
            assert client.get("/v1/version").json()["schema_revision"] == head_revision()
            model = {"name": "smoke", "num_layers": 2, "hidden_size": 64}
            model |= {"num_attention_heads": 4, "vocab_size": 100}
            assert client.post("/v1/models", json=model).status_code == 201
            assert client.get("/v1/models/smoke").json()["spec"]["num_layers"] == 2
            estimate = client.post(
                "/v1/estimate",
                json={
                    "preset": "llama2-7b",
                    "training": "llama2-4k",
                    "cluster_id": "dgx-a100-8n",
                    "plan": {"dp": 8, "tp": 8, "pp": 1, "micro_batch_size": 1},
                },
            )
            assert estimate.status_code == 200, estimate.text
            assert estimate.json()["num_gpus"] == 64
            assert client.get("/docs").status_code == 200
            malformed = client.post(
                "/v1/models", content=b"{", headers={"content-type": "application/json"}
            )
            assert malformed.status_code == 400
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
    output = process.stdout.read().decode() if process.stdout else ""
    assert process.returncode == 0, output
    assert "ready" in output  # the startup line: migrated and catalog loaded
