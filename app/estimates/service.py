"""Resolve the request's references to specs, then let the cost model price the plan."""

from sqlalchemy.orm import Session

from app.calibrations.service import params_of, resolve_calibration, used_calibration
from app.common.pricing import price
from app.common.references import resolve_specs
from app.common.text import require_storable
from app.estimates.schemas import EstimateRequest, EstimateResponse
from app.presets.service import plan_preset
from costmodel.specs import Plan


def run_estimate(session: Session, *, request: EstimateRequest) -> EstimateResponse:
    # Names from the request reach the database and the response; refuse what neither can encode.
    require_storable(request.model_dump(exclude_none=True))
    specs = resolve_specs(session, references=request)
    plan = (
        request.plan if isinstance(request.plan, Plan) else plan_preset(request.plan, field="plan")
    )
    if request.calibration is None:
        return EstimateResponse(**dict(price(specs, plan)))
    row = resolve_calibration(session, key=request.calibration, field="calibration")
    priced = price(specs, plan, params=params_of(row))
    return EstimateResponse(**dict(priced), calibration=used_calibration(row))
