"""``autopar serve`` as a real process for the dashboard tests (``serving``)."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

STARTUP_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serving(folder: Path, **settings: str) -> Iterator[str]:
    """``autopar serve`` on a fresh SQLite database in ``folder``, its embedded worker running
    searches; ``settings`` are extra ``AUTOPAR_*`` variables. Yields the base URL."""
    port = free_port()
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
