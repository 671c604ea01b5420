"""Per-key limit on search submission: at most N searches per rolling minute, counted in the
database (the searches a key submitted), so every API process enforces the same limit.

On SQLite submissions are serialized (``begin_write``), so the limit is exact; on PostgreSQL two
submissions racing in the same millisecond may both pass (a limit against floods, not a quota).
"""

from datetime import timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.auth.access import principal_of
from app.errors import RateLimitedError
from app.orm import SearchRow, utcnow

WINDOW = timedelta(minutes=1)


def check_search_quota(session: Session) -> str | None:
    """Raise 429 (with Retry-After) when the calling key used up its searches of the last
    minute; returns the key id to record on the new search (None: no key)."""
    principal = principal_of(session)
    if principal is None or principal.key_id is None:
        return None
    limit = principal.searches_per_minute
    if limit is None:
        return principal.key_id
    since = utcnow() - WINDOW
    recent = (
        select(SearchRow.created_at)
        .where(SearchRow.api_key_id == principal.key_id, SearchRow.created_at > since)
        .order_by(SearchRow.created_at)
    )
    times = session.scalars(recent.limit(limit)).all()
    if len(times) >= limit:
        retry_after_s = int((times[0] + WINDOW - utcnow()).total_seconds()) + 1
        raise RateLimitedError(
            f"this API key may submit {limit} searches per minute; retry in {retry_after_s} s",
            retry_after_s=retry_after_s,
        )
    return principal.key_id
