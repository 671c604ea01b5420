"""Request body size limit as plain ASGI middleware (no per-request overhead beyond a counter).

A declared ``Content-Length`` over the limit is refused before anything is read; a chunked body
is counted as it streams and refused as soon as it crosses the limit.
"""

from starlette.exceptions import HTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.errors import error_response


class _BodyTooLarge(HTTPException):
    """Raised from ``receive``; an HTTPException so FastAPI's body parsing re-raises it as is
    (it turns any other exception into a generic 400) and the error handlers render the 413."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, _message(limit), headers={"Connection": "close"})


def _message(limit: int) -> str:
    return f"request body exceeds the limit of {limit} bytes (setting AUTOPAR_MAX_BODY_BYTES)"


class BodySizeLimitMiddleware:
    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, receive, send)
            return

        received = 0
        response_started = False

        async def counting_receive() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    raise _BodyTooLarge(self.max_body_bytes)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal response_started
            if message["type"] == "http.response.start":
                response_started = True
            await send(message)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _BodyTooLarge:
            if response_started:
                raise
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            413,
            "payload_too_large",
            _message(self.max_body_bytes),
            # The rest of the body is not read; closing tells the client not to reuse the socket.
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", ()):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None
