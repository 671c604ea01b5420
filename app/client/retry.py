"""When and how long the client waits before trying a request again.

Retried: answers that say "later" (503 unavailable, 429 rate limited, 409 for an
``Idempotency-Key`` whose first request is still being answered) and failures to get any answer
(connection refused or reset, timeouts). Only requests that are safe to repeat are retried:
GET and DELETE, the POSTs that compute without storing, and creating POSTs, which the client
sends with an ``Idempotency-Key`` so the service creates nothing twice.
"""

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

import httpx

IN_PROGRESS_CODE = "idempotency_in_progress"


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 5  # tries in all, the first included
    backoff_s: float = 0.5  # pause after the first failure; doubles after each one
    max_backoff_s: float = 30.0  # longest single pause, Retry-After included
    statuses: frozenset[int] = frozenset({429, 503})

    def retries_status(self, response: httpx.Response) -> bool:
        if response.status_code in self.statuses:
            return True
        return response.status_code == 409 and _error_code(response) == IN_PROGRESS_CODE

    def pause_s(self, failures: int, response: httpx.Response | None = None) -> float:
        """Seconds to wait after the ``failures``-th failed try (1, 2, ...)."""
        retry_after = retry_after_s(response) if response is not None else None
        if retry_after is not None:
            return min(retry_after, self.max_backoff_s)
        pause = min(self.backoff_s * 2.0 ** (failures - 1), self.max_backoff_s)
        # Jitter, so that clients failed by one outage do not all come back at once.
        return pause * random.uniform(0.5, 1.0)


NO_RETRIES = RetryPolicy(attempts=1)


def retry_after_s(response: httpx.Response) -> float | None:
    """``Retry-After`` as seconds (it may be a number or an HTTP date); None if absent/bad."""
    value = response.headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def _error_code(response: httpx.Response) -> str | None:
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None
