"""The ``searches.progress`` document: written by the worker holding the lease, read by the API.

``trials_done`` and ``best_value`` are columns of their own (sortable); the rest lives here.
"""

from pydantic import BaseModel, ConfigDict, Field

from app.searches.schemas import SearchOutcome
from search.objectives import OBJECTIVE_METRICS, Metric


class StoredProgress(BaseModel):
    model_config = ConfigDict(extra="ignore")

    trials_budget: int | None = None
    eta_s: float | None = Field(default=None, description="As of the row's heartbeat_at.")
    # Seconds the search's runs took, all claims together, as of the last heartbeat: what
    # its timeout_s budget has spent when a worker takes it over.
    run_s: float | None = None
    evaluated: int | None = None
    feasible: int | None = None
    best_plan_id: str | None = None
    outcome: SearchOutcome | None = None


def primary_metric(objective: str) -> Metric:
    """The metric ``best`` refers to: the objective's (a Pareto search's first)."""
    return OBJECTIVE_METRICS[objective][0]
