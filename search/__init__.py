"""Plan search: exhaustive enumeration and Optuna studies over valid parallelization plans.

``run_search(SearchRequest(...))`` is the entry point (CLI, API and workers alike); it returns a
``SearchResult`` with ranked plans, each explained by ``costmodel.estimate``. See README.md,
'Search plans'.

The names below load on first use (PEP 562), so importing a submodule (``search.space``,
``search.constraints``) loads only what that submodule needs: the layering that
``tests/search/test_layering.py`` checks stays visible.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from search.constraints import Range
    from search.request import OBJECTIVES, SAMPLERS, SearchRequest, format_request_error
    from search.result import EquivalentPlan, RankedPlan, SearchResult, plan_hash
    from search.runner import run_search
    from search.space import SpaceError

# Public name -> the module that defines it.
_EXPORTS = {
    "OBJECTIVES": "search.request",
    "SAMPLERS": "search.request",
    "EquivalentPlan": "search.result",
    "Range": "search.constraints",
    "RankedPlan": "search.result",
    "SearchRequest": "search.request",
    "SearchResult": "search.result",
    "SpaceError": "search.space",
    "format_request_error": "search.request",
    "plan_hash": "search.result",
    "run_search": "search.runner",
}

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


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'search' has no attribute {name!r}")
    value = getattr(import_module(_EXPORTS[name]), name)
    globals()[name] = value  # later look-ups skip this hook
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
