"""What the client raises: ``AutoparError`` for everything, ``ApiError`` for an error answer."""

from typing import Any

import httpx
from pydantic import ValidationError

from app.errors import ErrorBody, ErrorDetail


class AutoparError(Exception):
    """Base of every client error; ``str(error)`` is one readable line."""


class ApiError(AutoparError):
    """The service answered with an error: its status, stable ``code``, message and details
    (one per offending field), as in the service's error body."""

    def __init__(
        self,
        status_code: int,
        code: str,
        message: str,
        details: list[ErrorDetail] | None = None,
        *,
        headers: httpx.Headers | None = None,
    ) -> None:
        super().__init__(f"{message} (HTTP {status_code} {code})")
        self.status_code = status_code
        self.code = code
        self.message = message
        self.details = details or []
        self.headers = headers or httpx.Headers()

    @classmethod
    def from_response(cls, response: httpx.Response) -> "ApiError":
        """The error body parsed, or the status and text when a proxy answered instead."""
        try:
            info = ErrorBody.model_validate_json(response.content).error
        except ValidationError:
            text = " ".join(response.text.split())[:200]
            return cls(
                response.status_code,
                "http_error",
                text or response.reason_phrase,
                headers=response.headers,
            )
        return cls(
            response.status_code,
            info.code,
            info.message,
            list(info.details),
            headers=response.headers,
        )


class ServiceUnreachableError(AutoparError):
    """No answer at all (connection refused, timeout) after the retries."""

    def __init__(self, base_url: str, cause: Exception) -> None:
        reason = " ".join(str(cause).split()) or type(cause).__name__
        super().__init__(f"cannot reach the autopar service at {base_url}: {reason}")
        self.base_url = base_url


class UnexpectedResponseError(AutoparError):
    """A success answer that is not what this client understands (another version?)."""

    def __init__(self, what: str, cause: Any) -> None:
        super().__init__(f"the service answered {what} this client does not understand: {cause}")


class WaitTimeoutError(AutoparError):
    """``wait_for`` gave up; ``last`` is the search as last seen (still running)."""

    def __init__(self, search_id: str, timeout_s: float, last: Any) -> None:
        super().__init__(f"search {search_id} still {last.status} after {timeout_s:g} s of waiting")
        self.search_id = search_id
        self.last = last
