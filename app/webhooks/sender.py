"""Sending due webhook deliveries: sign, POST, log the attempt, retry with backoff.

Each attempt is its own short claim -> send -> record sequence; no database transaction is
open while the request is in flight, so a slow receiver never holds SQLite's write lock (or a
PostgreSQL row lock) and the search workers sharing the database are not slowed.
"""

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import httpx
from sqlalchemy.orm import Session, sessionmaker

from app.orm import utcnow
from app.webhooks import repository
from app.webhooks.signing import (
    DELIVERY_HEADER,
    EVENT_HEADER,
    SIGNATURE_HEADER,
    signature_header,
)

logger = logging.getLogger(__name__)

USER_AGENT = "autopar-webhooks/1"
# Longer error texts (a whole HTML error page, a chained exception) are cut in the log.
MAX_ERROR_CHARS = 300


@dataclass(frozen=True)
class DeliveryPolicy:
    max_attempts: int = 12
    """Attempts before a delivery is failed (12: the last about 17 minutes after the first)."""
    backoff_s: float = 1.0
    """Wait after the first failed attempt; doubled after each further one."""
    backoff_max_s: float = 600.0
    """The longest wait between two attempts."""
    timeout_s: float = 10.0
    """Per attempt: connect, send and read the receiver's answer."""
    batch: int = 20
    """Deliveries looked at per pass."""

    def delay_after_s(self, attempt: int) -> float:
        """Wait before the next try after failed attempt number ``attempt`` (1, 2, 4, ... s)."""
        return min(self.backoff_s * 2 ** (attempt - 1), self.backoff_max_s)

    @property
    def hold_s(self) -> float:
        """How long a claim keeps other workers off a delivery: well past one send, so only a
        worker that died mid-send lets the claim run out."""
        return max(60.0, 3 * self.timeout_s)


@dataclass(frozen=True)
class AttemptResult:
    status_code: int | None
    error: str | None
    duration_s: float

    @property
    def delivered(self) -> bool:
        return self.status_code is not None and 200 <= self.status_code < 300


def encode_body(payload: dict[str, Any]) -> bytes:
    """The exact bytes signed and sent (receivers verify these bytes, not re-encoded JSON)."""
    return json.dumps(payload, separators=(",", ":"), ensure_ascii=False).encode()


class WebhookSender:
    def __init__(
        self,
        *,
        session_factory: sessionmaker[Session],
        policy: DeliveryPolicy | None = None,
        default_secret: str | None = None,
    ) -> None:
        self._session_factory = session_factory
        self.policy = policy or DeliveryPolicy()
        self._default_secret = default_secret
        # Redirects are not followed: a receiver answers 2xx itself, or the attempt failed.
        self._http = httpx.Client(
            timeout=self.policy.timeout_s,
            follow_redirects=False,
            headers={"User-Agent": USER_AGENT, "Content-Type": "application/json"},
        )

    def close(self) -> None:
        self._http.close()

    def deliver_due(self, should_stop: Callable[[], bool] = lambda: False) -> int:
        """One pass: try every delivery due now (up to ``policy.batch``) that no other worker
        claims first, until ``should_stop``. Returns the attempts made."""
        with self._session_factory() as session:
            candidates = repository.due(session, now=utcnow(), limit=self.policy.batch)
        made = 0
        for delivery_id, attempts in candidates:
            if should_stop():
                break
            with self._session_factory() as session:
                claimed = repository.claim(
                    session,
                    delivery_id=delivery_id,
                    attempts=attempts,
                    now=utcnow(),
                    hold_s=self.policy.hold_s,
                )
            if claimed is not None:
                self._attempt(claimed)
                made += 1
        return made

    def _attempt(self, claimed: repository.ClaimedDelivery) -> None:
        started_at = utcnow()
        secret = claimed.search_secret or self._default_secret
        if secret is None:
            # Only when the worker lacks the server's AUTOPAR_WEBHOOK_SECRET the API had.
            result = AttemptResult(None, "no signing secret: set AUTOPAR_WEBHOOK_SECRET", 0.0)
        else:
            result = self._post(claimed, secret)
        self._record(claimed, result, started_at)

    def _post(self, claimed: repository.ClaimedDelivery, secret: str) -> AttemptResult:
        body = encode_body(claimed.payload)
        headers = {
            # Signed afresh per attempt: a retry hours later still passes the receiver's
            # timestamp tolerance; the delivery id stays, for de-duplication.
            SIGNATURE_HEADER: signature_header(secret, int(time.time()), body),
            EVENT_HEADER: claimed.event,
            DELIVERY_HEADER: claimed.id,
        }
        start = time.monotonic()
        try:
            response = self._http.post(claimed.url, content=body, headers=headers)
        except Exception as exc:  # refused, timed out, a URL httpx rejects: a failed attempt
            error = f"{type(exc).__name__}: {exc}"[:MAX_ERROR_CHARS]
            return AttemptResult(None, error, time.monotonic() - start)
        return AttemptResult(response.status_code, None, time.monotonic() - start)

    def _record(
        self, claimed: repository.ClaimedDelivery, result: AttemptResult, started_at: datetime
    ) -> None:
        entry = {
            "attempt": claimed.attempt,
            "at": started_at.isoformat(),
            "status_code": result.status_code,
            "error": result.error,
            "duration_s": round(result.duration_s, 4),
        }
        now = utcnow()
        if result.delivered:
            status, next_at, delivered_at = "delivered", None, now
        elif claimed.attempt >= self.policy.max_attempts:
            status, next_at, delivered_at = "failed", None, None
        else:
            delay_s = self.policy.delay_after_s(claimed.attempt)
            status, next_at, delivered_at = "pending", now + timedelta(seconds=delay_s), None
        with self._session_factory() as session:
            recorded = repository.record_attempt(
                session,
                delivery_id=claimed.id,
                attempt=claimed.attempt,
                entry=entry,
                status=status,
                next_attempt_at=next_at,
                delivered_at=delivered_at,
            )
        # The URL stays out of the logs: receivers put tokens in query strings.
        if not recorded:
            logger.warning(
                "webhook %s: its claim ran out before attempt %d was recorded",
                claimed.id,
                claimed.attempt,
            )
        elif status != "delivered":
            logger.info(
                "webhook %s attempt %d: %s (%s)",
                claimed.id,
                claimed.attempt,
                result.error or f"HTTP {result.status_code}",
                status,
            )
