"""Pricing homogeneous plans in bulk: ``estimate_many`` with a request's parameters and memory
cap (``price_group``)."""

from collections.abc import Mapping

import numpy as np

from costmodel import estimate_many
from search.objectives import GOODPUT_FIGURES, memory_ratio_of_arrays, needs_goodput
from search.request import SearchRequest
from search.space import GroupSpace


def price_group(
    request: SearchRequest, space: GroupSpace, columns: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``estimate_many`` of homogeneous plan ``columns`` on ``space``'s node group, priced
    with ``request``'s parameters, plus each plan's ``memory_ratio`` (<= 1: it fits); columns
    and results are ``(n_plans,)``. Goodput (a fifth of the pricing) only where the objective
    ranks by it; otherwise its figures are NaN (not priced here: the plans a search keeps get
    them in their explained estimates)."""
    goodput = needs_goodput(request.objective)
    arrays = estimate_many(
        request.model,
        space.training,
        request.cluster,
        columns,
        group=space.group.name,
        params=request.params,
        goodput=goodput,
    )
    if not goodput:
        size = len(arrays["step_time_s"])
        arrays.update({name: np.full(size, np.nan) for name in GOODPUT_FIGURES})
    arrays["memory_ratio"] = memory_ratio_of_arrays(arrays, request.max_memory_fraction)
    return arrays
