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


def interrupt(process: subprocess.Popen[bytes]) -> str:
    """Ctrl-C ``process`` (killed if it has not stopped 30 s later); what it printed."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
    return process.stdout.read().decode() if process.stdout else ""


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
        output = interrupt(process)
    assert process.returncode == 0, output
    assert "ready" in output  # the startup line: migrated and catalog loaded


def listening_sockets(port: int) -> int:
    """Sockets listening on 127.0.0.1:``port`` (Linux /proc/net/tcp: state 0A is LISTEN)."""
    wanted = f"0100007F:{port:04X}"
    lines = Path("/proc/net/tcp").read_text().splitlines()[1:]
    return sum(1 for line in lines if line.split()[1] == wanted and line.split()[3] == "0A")


def api_processes(parent: int) -> list[int]:
    """The API processes ``autopar serve --workers N`` started (its spawned children)."""
    children = Path(f"/proc/{parent}/task/{parent}/children").read_text().split()
    return [int(pid) for pid in children if b"spawn" in Path(f"/proc/{pid}/cmdline").read_bytes()]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"still not {what} after {STARTUP_TIMEOUT_S} s")
        time.sleep(0.2)


@pytest.mark.skipif(not Path("/proc/net/tcp").exists(), reason="reads Linux's /proc")
def test_several_processes_each_listen_and_are_kept_running(
    make_empty_database: Callable[[], str], tmp_path: Path
) -> None:
    """``--workers 2``: two processes, each with its own listening socket on the port (so the
    kernel spreads connections over them, app.cli.serve_processes); one killed is replaced; a
    second server on the same port is refused; Ctrl-C stops them all."""
    executable = Path(sys.executable).parent / "autopar"
    port = free_port()
    base_url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "AUTOPAR_DATABASE_URL": make_empty_database(), "AUTOPAR_PORT": str(port)}
    command = [str(executable), "serve", "--workers", "2", "--no-access-log"]
    process = subprocess.Popen(
        command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    try:
        wait_until_healthy(base_url, process)
        wait_for(lambda: listening_sockets(port) == 2, "two listening sockets")
        first, second = api_processes(process.pid)
        os.kill(first, signal.SIGKILL)
        wait_for(lambda: first not in api_processes(process.pid), "rid of the killed process")
        wait_for(lambda: len(api_processes(process.pid)) == 2, "two processes again")
        wait_for(lambda: listening_sockets(port) == 2, "two listening sockets again")
        assert second in api_processes(process.pid)
        assert httpx.get(f"{base_url}/healthz", timeout=10).status_code == 200
        taken = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, timeout=60)
        assert taken.returncode == 2
        assert taken.stderr.decode().strip().splitlines()[-1] == (
            f"error: cannot listen on 127.0.0.1:{port}: Address already in use"
        )
    finally:
        output = interrupt(process)
    assert process.returncode == 0, output
    assert "exited (code -9); starting another" in output
    assert listening_sockets(port) == 0
