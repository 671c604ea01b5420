from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response, status

from app.calibrations import service
from app.calibrations.schemas import CalibrationCreate, CalibrationPage, CalibrationRecord
from app.common.examples import calibration_examples
from app.common.pagination import CursorQuery, LimitQuery, NameQuery
from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.idempotency import IdempotencyDep, create_once

router = APIRouter(prefix="/v1/calibrations", tags=["calibration"])

KeyPath = Annotated[
    str, Path(max_length=200, description="Id, name@version, or name (its latest version).")
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=CalibrationRecord,
    responses=error_responses(400, 409, 413, 422),
)
async def create_calibration(
    request: Annotated[CalibrationCreate, Body(openapi_examples=calibration_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
) -> Any:
    """Fit the cost model's efficiency parameters to stored profiles and observed steps and
    store them as the name's next version, with the error per source before and after
    (in-sample and k-fold held out).

    Data the fit cannot stand behind (too few points, contradicting samples, parameters pushed
    past physical bounds) is refused with a 422 ``calibration_refused`` and nothing is stored.
    """
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.create_calibration(db, request=request),
        location=lambda record: f"{router.prefix}/{record.id}",
    )


@router.get("", response_model=CalibrationPage, responses=error_responses(422))
async def list_calibrations(
    session: SessionDep, name: NameQuery = None, limit: LimitQuery = 50, cursor: CursorQuery = None
) -> Any:
    """Calibrations, newest first, with their held-out error before and after."""
    return await run_in_session(
        service.list_calibrations, session, name=name, cursor=cursor, limit=limit
    )


@router.get("/{key}", response_model=CalibrationRecord, responses=error_responses(404))
async def get_calibration(key: KeyPath, session: SessionDep) -> Any:
    """One calibration: its parameters, what moved, and its error per source."""
    return await run_in_session(service.get_calibration, session, key=key)


@router.delete(
    "/{key}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404, 422)
)
async def delete_calibration(key: KeyPath, session: SessionDep) -> None:
    """Delete one version (by id or name@version). Searches and plans priced with it keep their
    results; their ``calibration_id`` becomes null."""
    await run_in_session(service.delete_calibration, session, key=key)
