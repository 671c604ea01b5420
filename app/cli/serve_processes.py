"""``autopar serve --workers N``: N API processes, each with its own listening socket on the one
port (``SO_REUSEPORT``), so the kernel spreads connections over them.

uvicorn's own multi-process mode shares one listening socket, and the process whose event loop
wakes first accepts every connection waiting: 64 connections opened at once (a load balancer's
pool, wrk) landed 57 on one process and 7 on the other, so one core served nearly all the load
while the other idled. With a socket each, the kernel hashes each connection to one of them
(measured: 32/32 and 39/25 of 64). The parent holds the port with a bound socket that never
listens (so it gets no connections, and another server cannot take the port), restarts a
process that dies, and stops them all on SIGINT or SIGTERM.
"""

import logging
import logging.config
import multiprocessing
import signal
import socket
import sys
import threading
from multiprocessing.process import BaseProcess
from types import FrameType
from typing import Any

logger = logging.getLogger("uvicorn.error")

# How often the parent looks for dead processes, and how long it lets them stop on shutdown.
_WATCH_INTERVAL_S = 0.5
_STOP_GRACE_S = 30.0
# A process's exit code when its app did not start (uvicorn's own code for that): restarting it
# would fail again, so the server stops.
STARTUP_FAILED = 3


def reuse_port_supported() -> bool:
    return hasattr(socket, "SO_REUSEPORT")


def serve_processes(count: int, options: dict[str, Any]) -> int:
    """Run ``count`` API processes serving the app with uvicorn ``options`` (host, port,
    logging) until SIGINT or SIGTERM (0) or until one cannot start (``STARTUP_FAILED``); the
    exit code."""
    logging.config.dictConfig(options["log_config"])
    holder = _port_socket(options["host"], options["port"])
    # Port 0 means "any": every process must bind the one the holder got.
    port = holder.getsockname()[1]
    child_options = {**options, "port": port}
    context = multiprocessing.get_context("spawn")
    stopping = threading.Event()

    def stop(_signum: int, _frame: FrameType | None) -> None:
        stopping.set()

    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, stop)
    processes = [_start(context, child_options) for _ in range(count)]
    logger.info("serving on port %d with %d processes (SO_REUSEPORT)", port, count)
    try:
        while not stopping.wait(_WATCH_INTERVAL_S):
            for index, process in enumerate(processes):
                if process.is_alive():
                    continue
                if process.exitcode == STARTUP_FAILED:
                    logger.error("an API process could not start (above); stopping")
                    return STARTUP_FAILED
                logger.warning(
                    "API process %s exited (code %s); starting another",
                    process.pid,
                    process.exitcode,
                )
                processes[index] = _start(context, child_options)
        return 0
    finally:
        _stop_all(processes)
        holder.close()


def _port_socket(host: str, port: int) -> socket.socket:
    """The parent's socket on ``host:port``, after checking that nothing holds the port
    (``SO_REUSEPORT`` would otherwise let this server share it with another one)."""
    if port != 0:
        probe = socket.socket(_family(host))
        # SO_REUSEADDR (as uvicorn's own socket): a restart may bind beside the last run's
        # TIME_WAIT connections, but never beside a socket listening on the port.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))  # EADDRINUSE when a server listens on it
        finally:
            probe.close()
    return _reuse_port_socket(host, port)


def _reuse_port_socket(host: str, port: int) -> socket.socket:
    sock = socket.socket(_family(host))
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host, port))
    return sock


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def _start(context: Any, options: dict[str, Any]) -> BaseProcess:
    process: BaseProcess = context.Process(target=_serve_one, args=(options,), daemon=False)
    process.start()
    return process


def _serve_one(options: dict[str, Any]) -> None:
    """One API process: its own listening socket on the shared port, then uvicorn on it."""
    import uvicorn

    sock = _reuse_port_socket(options["host"], options["port"])
    config = uvicorn.Config("app.main:create_app", factory=True, **options)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    if not server.started:
        sys.exit(STARTUP_FAILED)


def _stop_all(processes: list[BaseProcess]) -> None:
    """SIGTERM to every process (uvicorn finishes the requests in flight and the lifespan's
    shutdown stops the embedded worker), then SIGKILL to any still running after the grace."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    for process in processes:
        process.join(_STOP_GRACE_S)
        if process.is_alive():
            logger.warning("API process %s ran on %g s later; killed", process.pid, _STOP_GRACE_S)
            process.kill()
            process.join()
