"""The app served over real TCP by uvicorn in a thread of the test process (with its embedded
search worker), and a tiny scripted HTTP server for testing a client's retries."""

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import uvicorn
from sqlalchemy import delete

from app.db import make_engine
from app.main import create_app
from app.orm import SearchRow
from app.settings import Settings

STARTUP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def serve_app(database_url: str) -> Iterator[str]:
    """``create_app`` on a migrated database, as ``autopar serve`` runs it; yields its URL.
    Searches are deleted afterwards so the next test's workers do not claim them."""
    settings = Settings(
        database_url=database_url,
        migrate_on_startup=False,
        worker_poll_s=0.05,
        log_level="warning",
    )
    port = free_port()
    config = uvicorn.Config(
        create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="uvicorn-test", daemon=True)
    thread.start()
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(STARTUP_TIMEOUT_S)
        engine = make_engine(database_url)
        with engine.begin() as connection:
            connection.execute(delete(SearchRow))
        engine.dispose()


@dataclass
class Scripted:
    """Answers requests in turn from ``answers`` (status, headers, JSON body); the last one
    repeats. ``seen`` records each request's method, path and headers."""

    url: str
    answers: list[tuple[int, dict[str, str], Any]]
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)


@contextmanager
def scripted_server(answers: list[tuple[int, dict[str, str], Any]]) -> Iterator[Scripted]:
    state = Scripted(url="", answers=list(answers))

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            state.seen.append((self.command, self.path, dict(self.headers.items())))
            index = min(len(state.seen), len(state.answers)) - 1
            status, headers, body = state.answers[index]
            content = json.dumps(body).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Type": "application/json"}.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        do_GET = do_POST = do_DELETE = _answer

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    state.url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()
