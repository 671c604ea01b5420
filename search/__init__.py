"""Plan search: exhaustive enumeration and Optuna studies over valid parallelization plans.

``run_search(SearchRequest(...))`` is the entry point (CLI, API and workers alike); it returns a
``SearchResult`` with ranked plans, each explained by ``costmodel.estimate``.
"""

from search.request import OBJECTIVES, SAMPLERS, Range, SearchRequest, format_request_error
from search.result import EquivalentPlan, RankedPlan, SearchResult, plan_hash
from search.runner import run_search
from search.space import SpaceError

__all__ = [
    "OBJECTIVES",
    "SAMPLERS",
    "EquivalentPlan",
    "Range",
    "RankedPlan",
    "SearchRequest",
    "SearchResult",
    "SpaceError",
    "format_request_error",
    "plan_hash",
    "run_search",
]
