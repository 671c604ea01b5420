"""One error body for every failure: ``{"error": {"code", "message", "details": [...]}}``.

Services raise the ``ApiError`` subclasses below; the handlers installed by ``install_handlers``
turn them, FastAPI's request validation errors and Starlette's HTTP errors into that body, so a
client parses one shape whatever went wrong. Unexpected exceptions become a 500 with the same
shape (and a log line), never an HTML page or a stack trace.
"""

import json
import logging
from collections.abc import Iterable, Sequence
from typing import Any

from fastapi import FastAPI, Request, status
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from pydantic import BaseModel, Field, ValidationError
from sqlalchemy.exc import OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeoutError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from costmodel.errors import field_errors

logger = logging.getLogger(__name__)


# Body schema (also published in the OpenAPI document) ----------------------------------------
class ErrorDetail(BaseModel):
    field: str | None = Field(
        default=None, description="Path of the offending field, e.g. model.num_layers."
    )
    reason: str


class ErrorInfo(BaseModel):
    code: str = Field(description="Stable machine-readable code, e.g. not_found.")
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(BaseModel):
    error: ErrorInfo


# Starlette's redirect_slashes answers a path that matches a route only without its trailing
# slash with an empty 307 to that route.
TRAILING_SLASH_REDIRECT: dict[str, Any] = {
    "description": "The same path without its trailing slash: repeat the request there.",
    "headers": {
        "Location": {"description": "The path without the slash.", "schema": {"type": "string"}}
    },
}


def error_responses(*status_codes: int) -> dict[int | str, dict[str, Any]]:
    """``responses=`` argument for routes: documents the error body under each status."""
    return {code: {"model": ErrorBody} for code in status_codes}


# Exceptions raised by services ---------------------------------------------------------------
class ApiError(Exception):
    status_code = status.HTTP_400_BAD_REQUEST
    code = "bad_request"

    def __init__(
        self,
        message: str,
        *,
        details: Sequence[ErrorDetail] = (),
        code: str | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = list(details)
        self.headers = headers
        if code is not None:
            self.code = code


class NotFoundError(ApiError):
    status_code = status.HTTP_404_NOT_FOUND
    code = "not_found"


class UnauthorizedError(ApiError):
    """No API key, or one that is unknown or revoked, while access control is on."""

    status_code = status.HTTP_401_UNAUTHORIZED
    code = "unauthorized"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"WWW-Authenticate": 'Bearer realm="autopar"'})


class RateLimitedError(ApiError):
    status_code = status.HTTP_429_TOO_MANY_REQUESTS
    code = "rate_limited"

    def __init__(self, message: str, *, retry_after_s: int) -> None:
        super().__init__(message, headers={"Retry-After": str(max(1, retry_after_s))})


class ConflictError(ApiError):
    status_code = status.HTTP_409_CONFLICT
    code = "conflict"


class InvalidInputError(ApiError):
    """Well-formed input that is wrong: a bad spec, an unknown preset or GPU, a plan that cannot
    be priced."""

    status_code = status.HTTP_422_UNPROCESSABLE_CONTENT
    code = "invalid_input"

    @classmethod
    def at(cls, field: str | None, reason: str, *, code: str | None = None) -> "InvalidInputError":
        message = f"{field}: {reason}" if field else reason
        return cls(message, details=[ErrorDetail(field=field, reason=reason)], code=code)

    @classmethod
    def from_validation(
        cls, exc: ValidationError, *, prefix: Sequence[int | str] = ()
    ) -> "InvalidInputError":
        """A pydantic error raised while validating inside a service (not by FastAPI)."""
        details = validation_details(exc.errors(include_url=False), prefix=prefix)
        return cls(summarize(details), details=details)


# Validation errors -> details ----------------------------------------------------------------
# Where FastAPI puts the request part; our paths start at the body's top-level field.
_REQUEST_PARTS = {"body", "query", "path", "header", "cookie"}


def validation_details(
    errors: Iterable[Any], *, prefix: Sequence[int | str] = ()
) -> list[ErrorDetail]:
    """pydantic/FastAPI error dicts -> one ``ErrorDetail`` per offending field and reason.

    Translated by ``costmodel.errors.field_errors`` (union members dropped, wrong-branch type
    mismatches dropped, leading field paths of messages split off); FastAPI's request part
    (``body``, ``query``...) is not part of the path.
    """
    stripped = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        if loc and loc[0] in _REQUEST_PARTS:
            error = {**error, "loc": loc[1:]}
        stripped.append(error)
    return [
        ErrorDetail(field=path or None, reason=reason)
        for path, reason in field_errors(stripped, prefix=prefix)
    ]


def summarize(details: Sequence[ErrorDetail], *, limit: int = 3) -> str:
    parts = [f"{d.field}: {d.reason}" if d.field else d.reason for d in details[:limit]]
    more = len(details) - limit
    return "; ".join(parts) + (f"; ... and {more} more" if more > 0 else "")


# Handlers ------------------------------------------------------------------------------------
def error_response(
    status_code: int,
    code: str,
    message: str,
    details: Sequence[ErrorDetail] = (),
    headers: dict[str, str] | None = None,
) -> Response:
    body = ErrorBody(error=ErrorInfo(code=code, message=message, details=list(details)))
    # ASCII-escaped: messages may quote client input, and an unpaired surrogate in it must not
    # turn the error into a 500 while encoding.
    content = json.dumps(body.model_dump(mode="json"), ensure_ascii=True, separators=(",", ":"))
    return Response(
        content, status_code=status_code, headers=headers, media_type="application/json"
    )


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "rate_limited",
    503: "unavailable",
}


async def _on_api_error(_request: Request, exc: Exception) -> Response:
    assert isinstance(exc, ApiError)
    return error_response(exc.status_code, exc.code, exc.message, exc.details, exc.headers)


def _is_json_media_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


async def _on_request_validation(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    errors = list(exc.errors())
    content_type = request.headers.get("content-type", "")
    if request.method in ("POST", "PUT", "PATCH") and not _is_json_media_type(content_type):
        # FastAPI reads a body without a JSON media type as bytes and then complains that it is
        # not "a valid dictionary" at no field; the request is malformed, not a bad value.
        reason = f"Content-Type must be application/json (got {content_type or 'none'})"
        if any(tuple(error.get("loc", ()))[:1] == ("body",) for error in errors):
            return error_response(
                status.HTTP_400_BAD_REQUEST,
                "bad_request",
                reason,
                [ErrorDetail(field=None, reason=reason)],
            )
    if any(error.get("type") == "json_invalid" for error in errors):
        # Not a bad value but an unreadable body: say where the JSON broke.
        reason = "; ".join(
            str((error.get("ctx") or {}).get("error", error.get("msg")))
            + (f" at character {error['loc'][-1]}" if len(error.get("loc", ())) > 1 else "")
            for error in errors
        )
        return error_response(
            status.HTTP_400_BAD_REQUEST,
            "malformed_json",
            f"request body is not valid JSON: {reason}",
            [ErrorDetail(field=None, reason=reason)],
        )
    details = validation_details(errors)
    return error_response(
        status.HTTP_422_UNPROCESSABLE_CONTENT, "invalid_input", summarize(details), details
    )


def allowed_methods(request: Request) -> list[str]:
    """Every method some route of the app serves at this request's path. Starlette's 405 names
    only the methods of the first route that matched the path, not of all of them."""
    # Asked method by method through the public ``matches`` of each top-level route, since
    # included routers nest their routes where only the router itself can look.
    return [
        method
        for method in _METHODS
        if any(
            route.matches({**request.scope, "method": method})[0] is Match.FULL
            for route in request.app.router.routes
        )
    ]


_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


async def _on_http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    message = exc.detail if isinstance(exc.detail, str) else "request failed"
    headers = dict(exc.headers) if exc.headers else {}
    if exc.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
        headers["Allow"] = ", ".join(allowed_methods(request)) or headers.get("Allow", "")
    return error_response(
        exc.status_code,
        _HTTP_CODES.get(exc.status_code, "http_error"),
        message,
        headers=headers or None,
    )


async def _on_database_unavailable(request: Request, exc: Exception) -> Response:
    # Connection refused, server gone, SQLite locked past its busy timeout, pool exhausted:
    # transient conditions of the service, not of the request.
    logger.warning("database unavailable on %s %s: %s", request.method, request.url.path, exc)
    return error_response(
        status.HTTP_503_SERVICE_UNAVAILABLE,
        "unavailable",
        f"database unavailable ({type(exc).__name__}); retry shortly",
        headers={"Retry-After": "1"},
    )


async def _on_unexpected(request: Request, exc: Exception) -> Response:
    logger.exception("unhandled error on %s %s", request.method, request.url.path)
    return error_response(
        status.HTTP_500_INTERNAL_SERVER_ERROR, "internal_error", "internal server error"
    )


def install_handlers(app: FastAPI) -> None:
    app.add_exception_handler(ApiError, _on_api_error)
    app.add_exception_handler(RequestValidationError, _on_request_validation)
    app.add_exception_handler(StarletteHTTPException, _on_http_error)
    app.add_exception_handler(OperationalError, _on_database_unavailable)
    app.add_exception_handler(PoolTimeoutError, _on_database_unavailable)
    app.add_exception_handler(Exception, _on_unexpected)
