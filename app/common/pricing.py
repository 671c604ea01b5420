"""Price one plan with the cost model, turning "cannot price this" into a 422 on the field the
cost model blames (infeasible plans are answers, not errors)."""

import re

from app.common.estimate_memo import EstimateMemo
from app.common.references import ResolvedSpecs
from app.errors import InvalidInputError
from costmodel import estimate
from costmodel.errors import split_leading_path
from costmodel.params import EfficiencyParams
from costmodel.specs import Estimate, Plan

# This process's recent estimates (app.common.estimate_memo): the same inputs are priced once.
estimates = EstimateMemo()


def price(
    specs: ResolvedSpecs,
    plan: Plan,
    *,
    params: EfficiencyParams | None = None,
    key: bytes | None = None,
) -> Estimate:
    """The cost model's estimate; a plan it cannot price on this cluster is a 422 naming the
    field to blame (infeasible plans are answers, not errors). Shared with other callers of the
    same inputs (``estimates``): copy it before changing it. ``key``: the inputs'
    ``EstimateMemo.key``, when the caller has it already."""
    if key is None:
        key = EstimateMemo.key(specs.model, specs.training, specs.cluster, plan, params)
    try:
        return estimates.get_or_price(
            key, lambda: estimate(specs.model, specs.training, specs.cluster, plan, params=params)
        )
    except ValueError as exc:
        raise _unpriceable(str(exc)) from None


# The cost model's messages start with the field they blame ("plan.stages[0].group: ...").
_BLAMABLE = ("model", "training", "cluster", "plan")


def _unpriceable(message: str) -> InvalidInputError:
    field, reason = split_leading_path(message)
    if field is None or re.split(r"[.\[]", field, maxsplit=1)[0] not in _BLAMABLE:
        field, reason = "plan", message
    return InvalidInputError.at(field, reason, code="invalid_plan")
