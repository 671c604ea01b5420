"""An httpx client for the ASGI app, and assertions shared by the API tests."""

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal
from fastapi import FastAPI


class _ChunkedBody(httpx.AsyncByteStream):
    """A sync request body (a generator: chunked, no Content-Length) replayed asynchronously."""

    def __init__(self, chunks: list[bytes]) -> None:
        self._chunks = chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _PortalASGITransport(httpx.BaseTransport):
    """Synchronous httpx transport: each request runs through ``httpx.ASGITransport`` on an
    event loop in a background thread (the app sees a real loop and thread pool, as under
    uvicorn), so tests stay plain functions."""

    def __init__(self, app: FastAPI, portal: BlockingPortal) -> None:
        self._transport = httpx.ASGITransport(app=app)
        self._portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        if not isinstance(request.stream, httpx.AsyncByteStream):
            request.stream = _ChunkedBody(list(request.stream))  # type: ignore[arg-type]

        async def send() -> httpx.Response:
            response = await self._transport.handle_async_request(request)
            content = await response.aread()
            return httpx.Response(
                response.status_code, headers=response.headers, content=content, request=request
            )

        return self._portal.call(send)


@contextmanager
def asgi_client(app: FastAPI) -> Iterator[httpx.Client]:
    with (
        start_blocking_portal() as portal,
        httpx.Client(
            transport=_PortalASGITransport(app, portal), base_url="http://testserver"
        ) as client,
    ):
        yield client


def assert_error(response: Any, status_code: int, code: str | None = None) -> dict[str, Any]:
    """The one error body shape; returns its ``error`` object."""
    assert response.status_code == status_code, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"error"}, body
    error = body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert isinstance(error["message"], str) and error["message"]
    for detail in error["details"]:
        assert set(detail) == {"field", "reason"}, detail
    if code is not None:
        assert error["code"] == code, error
    return error


def error_fields(error: dict[str, Any]) -> list[str | None]:
    return [detail["field"] for detail in error["details"]]


# What the ``snapshot`` fixture returns: every stored row, by table.
Snapshot = Callable[[], dict[str, list[str]]]
