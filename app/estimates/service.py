"""Resolve the request's references to specs, then let the cost model price the plan."""

import re

from sqlalchemy.orm import Session

from app.common.references import resolve_specs
from app.common.text import require_storable
from app.errors import InvalidInputError
from app.estimates.schemas import EstimateRequest
from app.presets.service import plan_preset
from costmodel import estimate
from costmodel.specs import Estimate, Plan


def run_estimate(session: Session, *, request: EstimateRequest) -> Estimate:
    # Names from the request reach the database and the response; refuse what neither can encode.
    require_storable(request.model_dump(exclude_none=True))
    specs = resolve_specs(session, references=request)
    plan = (
        request.plan if isinstance(request.plan, Plan) else plan_preset(request.plan, field="plan")
    )
    try:
        return estimate(specs.model, specs.training, specs.cluster, plan)
    except ValueError as exc:
        # The cost model's word for "this plan cannot be priced on this cluster" (a stage names
        # an unknown node group, ...); infeasible plans are answers, not errors.
        raise _unpriceable(str(exc)) from None


# The cost model's messages start with the field they blame ("plan.stages[0].group: ...").
_BLAMED_FIELD = re.compile(r"^((?:model|training|cluster|plan)(?:[.\[][\w.\[\]]*)?): (.+)$", re.S)


def _unpriceable(message: str) -> InvalidInputError:
    match = _BLAMED_FIELD.match(message)
    field, reason = (match.group(1), match.group(2)) if match else ("plan", message)
    return InvalidInputError.at(field, reason, code="invalid_plan")
