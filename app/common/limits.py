"""The server's limits on what one request may ask for (``AUTOPAR_MAX_*``), carried by the
request's session so that services deep inside (spec resolution) see them without every caller
passing them on. Sessions without limits (workers, the CLI) are not limited: the limits protect
the shared service from its clients, not a user's own process from the user.
"""

from dataclasses import dataclass

from sqlalchemy.orm import Session

from app.errors import InvalidInputError
from costmodel.specs import ClusterSpec

_LIMITS_KEY = "autopar_limits"


@dataclass(frozen=True)
class ServiceLimits:
    """None: no limit."""

    max_cluster_gpus: int | None = None
    max_search_trials: int | None = None
    max_search_timeout_s: float | None = None
    max_active_searches_per_tenant: int | None = None


NO_LIMITS = ServiceLimits()


def apply_limits(session: Session, limits: ServiceLimits) -> None:
    session.info[_LIMITS_KEY] = limits


def limits_of(session: Session) -> ServiceLimits:
    limits = session.info.get(_LIMITS_KEY)
    return limits if isinstance(limits, ServiceLimits) else NO_LIMITS


def check_cluster_size(session: Session, cluster: ClusterSpec, *, field: str) -> None:
    """422 at ``field`` when ``cluster`` has more GPUs than this server plans for."""
    limit = limits_of(session).max_cluster_gpus
    if limit is None:
        return
    gpus = cluster.num_gpus
    if gpus > limit:
        raise InvalidInputError.at(
            field,
            f"{gpus:,} GPUs; this server plans clusters of at most {limit:,} GPUs "
            "(AUTOPAR_MAX_CLUSTER_GPUS)",
            code="limit_exceeded",
        )
