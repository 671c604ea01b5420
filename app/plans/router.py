from typing import Annotated, Any

from fastapi import APIRouter, Path

from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.plans import service
from app.plans.schemas import PlanRecord

router = APIRouter(prefix="/v1/plans", tags=["plans"])

PlanIdPath = Annotated[str, Path(max_length=200, description="Plan id (from a search's plans).")]


@router.get("/{plan_id}", response_model=PlanRecord, responses=error_responses(404))
async def get_plan(plan_id: PlanIdPath, session: SessionDep) -> Any:
    """One plan a search found, with its estimate and rank."""
    return await run_in_session(service.get_plan, session, plan_id=plan_id)
