from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from app.common.examples import estimate_examples
from app.db import SessionDep, run_read_in_session
from app.errors import error_responses
from app.estimates import service
from app.estimates.schemas import EstimateRequest, EstimateResponse

router = APIRouter(prefix="/v1", tags=["estimate"])


@router.post("/estimate", response_model=EstimateResponse, responses=error_responses(400, 413, 422))
async def estimate(
    request: Annotated[EstimateRequest, Body(openapi_examples=estimate_examples())],
    session: SessionDep,
) -> Any:
    """Price one plan: step time and its breakdown, throughput, MFU, memory per stage, cost.

    An infeasible plan (out of memory, ...) is still a 200 with ``feasible: false`` and the
    reasons; a plan the model cannot price at all is a 422.
    """
    answer = await run_read_in_session(service.estimate_json, session, request=request)
    return Response(content=answer, media_type="application/json")
