from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response, status

from app.common.examples import observation_examples, plan_observation_examples
from app.common.pagination import CursorQuery, LimitQuery
from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.idempotency import IdempotencyDep, create_once
from app.observations import service
from app.observations.schemas import (
    ObservationCreate,
    ObservationPage,
    ObservationRecord,
    PlanObservationCreate,
)

router = APIRouter(prefix="/v1", tags=["calibration"])

PlanIdPath = Annotated[str, Path(max_length=200, description="Plan id (from a search's plans).")]
ObservationIdPath = Annotated[str, Path(max_length=200, description="Observation id.")]


@router.post(
    "/plans/{plan_id}/observations",
    status_code=status.HTTP_201_CREATED,
    response_model=ObservationRecord,
    responses=error_responses(400, 404, 409, 413, 422),
)
async def observe_plan(
    plan_id: PlanIdPath,
    request: Annotated[PlanObservationCreate, Body(openapi_examples=plan_observation_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
) -> Any:
    """Report how a stored plan really ran (step time or tokens/s, peak memory). The answer
    shows the plan's predicted step time next to the measured one; calibrations fit to it."""
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.observe_plan(db, plan_id=plan_id, request=request),
        location=lambda record: f"{router.prefix}/observations/{record.id}",
    )


@router.get(
    "/plans/{plan_id}/observations",
    response_model=ObservationPage,
    responses=error_responses(404, 422),
)
async def plan_observations(
    plan_id: PlanIdPath, session: SessionDep, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Any:
    """The runs reported for a plan, newest first."""
    return await run_in_session(
        service.plan_observations, session, plan_id=plan_id, cursor=cursor, limit=limit
    )


@router.post(
    "/observations",
    status_code=status.HTTP_201_CREATED,
    response_model=ObservationRecord,
    responses=error_responses(400, 409, 413, 422),
)
async def create_observation(
    request: Annotated[ObservationCreate, Body(openapi_examples=observation_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
) -> Any:
    """Report a run that was not planned here: its model, training, cluster and plan (given as
    in ``POST /v1/estimate``) and what it measured."""
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.create_observation(db, request=request),
        location=lambda record: f"{router.prefix}/observations/{record.id}",
    )


@router.get("/observations", response_model=ObservationPage, responses=error_responses(422))
async def list_observations(
    session: SessionDep,
    source: Annotated[
        str | None, Query(min_length=1, max_length=200, description="Only this source.")
    ] = None,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
) -> Any:
    """Observed steps, newest first."""
    return await run_in_session(
        service.list_observations, session, plan_id=None, source=source, cursor=cursor, limit=limit
    )


@router.get(
    "/observations/{observation_id}",
    response_model=ObservationRecord,
    responses=error_responses(404),
)
async def get_observation(observation_id: ObservationIdPath, session: SessionDep) -> Any:
    """One observed step with its full scenario."""
    return await run_in_session(service.get_observation, session, observation_id=observation_id)


@router.delete(
    "/observations/{observation_id}",
    status_code=status.HTTP_204_NO_CONTENT,
    responses=error_responses(404),
)
async def delete_observation(observation_id: ObservationIdPath, session: SessionDep) -> None:
    """Delete an observed run (one reported by mistake); calibrations keep their parameters."""
    await run_in_session(service.delete_observation, session, observation_id=observation_id)
