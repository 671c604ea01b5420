"""Limits on one tenant's searches: the budget of each (``trials``, ``timeout_s``) and how many
may wait or run at once. The per-key submission rate is ``app.auth.limits``.

The active-search count is read in the submission's write transaction; on SQLite submissions
are serialized (``begin_write``), so it is exact; on PostgreSQL two racing submissions may both
pass, one search over the limit (a guard against flooding the queue, not a billing quota).
"""

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.common.limits import limits_of
from app.errors import ApiError, InvalidInputError
from app.orm import SearchRow
from app.searches.schemas import SearchCreate
from app.tenancy import tenant_of

ACTIVE: tuple[str, ...] = ("queued", "running")
# A search's end cannot be predicted when it is submitted; this is how soon to ask again.
ACTIVE_RETRY_AFTER_S = 10


class TooManyActiveSearchesError(ApiError):
    status_code = 429
    code = "too_many_active_searches"

    def __init__(self, message: str) -> None:
        super().__init__(message, headers={"Retry-After": str(ACTIVE_RETRY_AFTER_S)})


def check_search_budget(session: Session, request: SearchCreate) -> None:
    """422 naming ``trials`` or ``timeout_s`` when the request asks for more than the server
    allows. A search that gives neither runs its default trial budget, so it is within both."""
    limits = limits_of(session)
    if limits.max_search_trials is not None and (request.trials or 0) > limits.max_search_trials:
        raise InvalidInputError.at(
            "trials",
            f"{request.trials:,} trials; a search on this server may run at most "
            f"{limits.max_search_trials:,} (AUTOPAR_MAX_SEARCH_TRIALS)",
            code="limit_exceeded",
        )
    limit_s = limits.max_search_timeout_s
    if limit_s is not None and (request.timeout_s or 0) > limit_s:
        raise InvalidInputError.at(
            "timeout_s",
            f"{request.timeout_s:g} s; a search on this server may run at most {limit_s:g} s "
            "(AUTOPAR_MAX_SEARCH_TIMEOUT_S)",
            code="limit_exceeded",
        )


def check_active_searches(session: Session) -> None:
    """429 with Retry-After when the caller's tenant already has its limit of searches queued
    or running. Counts the tenant's rows only (the session is scoped to it; the filter is also
    explicit, so an unscoped session counts everyone's)."""
    limit = limits_of(session).max_active_searches_per_tenant
    if limit is None:
        return
    query = select(func.count()).select_from(SearchRow).where(SearchRow.status.in_(ACTIVE))
    tenant = tenant_of(session)
    if tenant is not None:
        query = query.where(SearchRow.tenant == tenant)
    active = session.scalar(query) or 0
    if active >= limit:
        raise TooManyActiveSearchesError(
            f"this tenant has {active} searches queued or running, the most this server "
            f"allows (AUTOPAR_MAX_ACTIVE_SEARCHES_PER_TENANT = {limit}); retry when one "
            "finishes, or cancel one"
        )
