"""Resolve the request's references to specs, then let the cost model price the plan; the answer
is the JSON the API sends, kept per process so a repeated request is answered as it was."""

from sqlalchemy.orm import Session

from app.calibrations.service import params_of, resolve_calibration, used_calibration
from app.common.estimate_memo import DEFAULT_ENTRIES, EstimateMemo
from app.common.lru import LruCache
from app.common.pricing import price
from app.common.references import resolve_specs
from app.common.text import require_storable
from app.estimates.schemas import EstimateRequest, EstimateResponse
from app.presets.service import plan_preset
from costmodel.specs import Plan

# The answers this process sent, by the inputs they were priced from (the estimate memo's key)
# and the calibration they name. A repeat (a dashboard re-asking for the plan on screen, a
# scheduler polling) skips building and validating the response model and serializing it:
# 0.9 of 4.7 ms of a cached estimate's CPU on the 2-core test VM (benchmarks/bench_request_cpu.py).
answers: LruCache[bytes, bytes] = LruCache(DEFAULT_ENTRIES)


def estimate_json(session: Session, *, request: EstimateRequest) -> bytes:
    """The ``EstimateResponse`` for ``request`` as JSON."""
    # Names from the request reach the database and the response; refuse what neither can encode.
    require_storable(request.model_dump(exclude_none=True))
    specs = resolve_specs(session, references=request)
    plan = (
        request.plan if isinstance(request.plan, Plan) else plan_preset(request.plan, field="plan")
    )
    row = (
        None
        if request.calibration is None
        else resolve_calibration(session, key=request.calibration, field="calibration")
    )
    params = None if row is None else params_of(row)
    used = None if row is None else used_calibration(row)
    inputs = EstimateMemo.key(specs.model, specs.training, specs.cluster, plan, params)
    key = inputs + (b"" if used is None else used.model_dump_json().encode())
    found = answers.get(key)
    if found is not None:
        return found
    priced = price(specs, plan, params=params, key=inputs)
    answer = EstimateResponse(**dict(priced), calibration=used).model_dump_json(by_alias=True)
    encoded = answer.encode()
    answers.put(key, encoded)
    return encoded
