"""Webhook signatures, Stripe-style: ``Autopar-Signature: t=<unix seconds>,v1=<hex>`` where the
hex is HMAC-SHA256, keyed with the search's secret, of ``f"{t}.".encode() + body``.

The timestamp is signed with the body, so a captured request cannot be replayed later than
``tolerance_s`` and a receiver can reject it without keeping state; the ``Autopar-Delivery``
id (the same on every retry of one delivery) lets it drop duplicates inside that window.

This module needs nothing but the standard library, so receivers can copy or import it alone.
"""

import hashlib
import hmac
import time

SIGNATURE_HEADER = "Autopar-Signature"
EVENT_HEADER = "Autopar-Event"
DELIVERY_HEADER = "Autopar-Delivery"
SCHEME = "v1"
# Five minutes either way: clock skew between sender and receiver, not a replay window to use.
DEFAULT_TOLERANCE_S = 300


def sign(secret: str, timestamp: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of ``"<timestamp>." + body`` with ``secret``."""
    message = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), message, hashlib.sha256).hexdigest()


def signature_header(secret: str, timestamp: int, body: bytes) -> str:
    """The ``Autopar-Signature`` value for ``body`` sent at ``timestamp`` (unix seconds)."""
    return f"t={timestamp},{SCHEME}={sign(secret, timestamp, body)}"


def verify(
    secret: str,
    header_value: str | None,
    body: bytes,
    now: float | None = None,
    tolerance_s: float = DEFAULT_TOLERANCE_S,
) -> bool:
    """True when ``header_value`` signs exactly ``body`` with ``secret`` and its timestamp is
    within ``tolerance_s`` of ``now`` (default: the current time). Pass the raw request body:
    re-serialized JSON may differ byte for byte. Several ``v1`` entries are allowed (any match
    will do), so a sender can sign with an old and a new secret while keys rotate."""
    if not header_value:
        return False
    timestamp, signatures = _parse(header_value)
    if timestamp is None or not signatures:
        return False
    current = time.time() if now is None else now
    if abs(current - timestamp) > tolerance_s:
        return False
    expected = sign(secret, timestamp, body)
    return any(hmac.compare_digest(expected, candidate) for candidate in signatures)


def _parse(header_value: str) -> tuple[int | None, list[str]]:
    timestamp: int | None = None
    signatures: list[str] = []
    for part in header_value.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isdigit():
            timestamp = int(value)
        elif key == SCHEME and value:
            signatures.append(value)
    return timestamp, signatures
