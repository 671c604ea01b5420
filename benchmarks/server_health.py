"""What the benchmarks that start ``autopar serve`` share: waiting until it answers."""

import subprocess
import time

import httpx


def wait_until_healthy(base_url: str, server: subprocess.Popen[bytes], timeout_s: float) -> None:
    """Return once ``GET /healthz`` answers 200; exit with a line if the server dies first or
    is not healthy within ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise SystemExit(f"autopar serve exited with status {server.returncode}")
        try:
            if httpx.get(f"{base_url}/healthz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"autopar serve not healthy after {timeout_s} s")
