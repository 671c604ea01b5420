from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response, status

from app.common.examples import profile_examples
from app.common.pagination import CursorQuery, LimitQuery
from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.idempotency import IdempotencyDep, create_once
from app.profiles import service
from app.profiles.schemas import ProfileCreate, ProfilePage, ProfileRecord

router = APIRouter(prefix="/v1/profiles", tags=["calibration"])

ProfileIdPath = Annotated[str, Path(max_length=200, description="Profile id.")]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ProfileRecord,
    responses=error_responses(400, 409, 413, 422),
)
async def create_profile(
    request: Annotated[ProfileCreate, Body(openapi_examples=profile_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
) -> Any:
    """Store a machine profile: the JSON ``autopar profile`` wrote, or nccl-tests output
    (``all_reduce_perf`` and friends) to parse. ``POST /v1/calibrations`` fits to it."""
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.create_profile(db, request=request),
        location=lambda record: f"{router.prefix}/{record.id}",
    )


@router.get("", response_model=ProfilePage, responses=error_responses(422))
async def list_profiles(
    session: SessionDep, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Any:
    """Profiles, newest first, without their samples."""
    return await run_in_session(service.list_profiles, session, cursor=cursor, limit=limit)


@router.get("/{profile_id}", response_model=ProfileRecord, responses=error_responses(404))
async def get_profile(profile_id: ProfileIdPath, session: SessionDep) -> Any:
    """One profile with all its samples."""
    return await run_in_session(service.get_profile, session, profile_id=profile_id)


@router.delete(
    "/{profile_id}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404)
)
async def delete_profile(profile_id: ProfileIdPath, session: SessionDep) -> None:
    """Delete a profile; calibrations fitted to it keep their parameters."""
    await run_in_session(service.delete_profile, session, profile_id=profile_id)
