"""Pricing homogeneous plans in bulk: ``estimate_many`` with a request's parameters and memory
cap (``price_group``)."""

from collections.abc import Mapping

import numpy as np

from costmodel import estimate_many
from search.objectives import memory_ratio_of_arrays
from search.request import SearchRequest
from search.space import GroupSpace


def price_group(
    request: SearchRequest, space: GroupSpace, columns: Mapping[str, np.ndarray]
) -> dict[str, np.ndarray]:
    """``estimate_many`` of homogeneous plan ``columns`` on ``space``'s node group, priced
    with ``request``'s parameters, plus each plan's ``memory_ratio`` (<= 1: it fits); columns
    and results are ``(n_plans,)``."""
    arrays = estimate_many(
        request.model,
        space.training,
        request.cluster,
        columns,
        group=space.group.name,
        params=request.params,
    )
    arrays["memory_ratio"] = memory_ratio_of_arrays(arrays, request.max_memory_fraction)
    return arrays
