"""The webhook signature as a receiver checks it: ``app.webhooks.signing`` alone."""

import hashlib
import hmac

from app.webhooks.signing import sign, signature_header, verify

SECRET = "s3cret-s3cret-s3cret"
BODY = b'{"event":"search.succeeded","delivery_id":"abc"}'
T = 1_764_584_000


def test_the_signature_is_hmac_sha256_of_timestamp_dot_body() -> None:
    expected = hmac.new(SECRET.encode(), f"{T}.".encode() + BODY, hashlib.sha256).hexdigest()
    assert sign(SECRET, T, BODY) == expected
    assert signature_header(SECRET, T, BODY) == f"t={T},v1={expected}"


def test_verify_accepts_the_header_it_was_sent_with() -> None:
    header = signature_header(SECRET, T, BODY)
    assert verify(SECRET, header, BODY, now=T)
    assert verify(SECRET, header, BODY, now=T + 299)
    assert verify(SECRET, header.replace(",", ", "), BODY, now=T)  # spaces tolerated


def test_verify_rejects_a_changed_body_another_secret_or_a_changed_timestamp() -> None:
    header = signature_header(SECRET, T, BODY)
    assert not verify(SECRET, header, BODY.replace(b"succeeded", b"failed"), now=T)
    assert not verify(SECRET, header, BODY + b" ", now=T)
    assert not verify("another-secret-of-16", header, BODY, now=T)
    # The timestamp is part of what is signed: moving it forward to pass the check fails.
    forged = header.replace(f"t={T}", f"t={T + 1000}")
    assert not verify(SECRET, forged, BODY, now=T + 1000)


def test_verify_rejects_old_and_future_timestamps() -> None:
    header = signature_header(SECRET, T, BODY)
    assert not verify(SECRET, header, BODY, now=T + 301)  # a replay, 5 minutes later
    assert not verify(SECRET, header, BODY, now=T - 301)  # a clock far ahead
    assert verify(SECRET, header, BODY, now=T + 3000, tolerance_s=3600)


def test_verify_rejects_malformed_headers() -> None:
    signature = sign(SECRET, T, BODY)
    for header in (
        None,
        "",
        f"v1={signature}",
        f"t={T}",
        f"t=abc,v1={signature}",
        f"t={T},v0={signature}",
        f"t={T},v1=",
    ):
        assert not verify(SECRET, header, BODY, now=T), header


def test_any_of_several_signatures_may_match_while_a_secret_rotates() -> None:
    header = f"t={T},v1={sign('old-secret-old-secret', T, BODY)},v1={sign(SECRET, T, BODY)}"
    assert verify(SECRET, header, BODY, now=T)
    assert verify("old-secret-old-secret", header, BODY, now=T)
    assert not verify("third-secret-third-s", header, BODY, now=T)
