"""Fit, store and look up calibrations.

A fit reads its inputs, ends that read, fits (seconds, no database transaction held open), then
stores the result as the name's next version in one short write. A refused fit stores nothing.
"""

from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from app.calibrations import repository
from app.calibrations.schemas import (
    CalibrationCreate,
    CalibrationPage,
    CalibrationRecord,
    CalibrationSummary,
    CalibrationUsed,
)
from app.common.ids import looks_like_id, row_by_id
from app.common.pagination import decode_cursor, encode_cursor
from app.common.text import require_storable
from app.db import begin_write
from app.errors import ConflictError, ErrorDetail, InvalidInputError, NotFoundError
from app.observations.service import step_observation_of_row
from app.orm import CalibrationRow, ObservationRow
from app.profiles.service import find as find_profile
from app.profiles.service import profile_of_row
from costmodel.calibration import PARAMETERS, CalibrationError, CalibrationResult, fit_calibration
from costmodel.observations import Profile, StepObservation
from costmodel.params import EfficiencyParams

# Two requests may fit the same name at once; the loser of the (name, version) race retries.
_VERSION_ATTEMPTS = 5


def create_calibration(session: Session, *, request: CalibrationCreate) -> CalibrationRecord:
    require_storable(request.model_dump(exclude_none=True))
    _check_params(request.params)
    profiles, observations, inputs = _inputs(session, request)
    base = None
    if request.base is not None:
        base_row = resolve_calibration(session, key=request.base, field="base")
        base = params_of(base_row)
        inputs["base"] = used_calibration(base_row).model_dump()
    session.rollback()  # end the read: the fit holds no transaction open
    try:
        result = fit_calibration(
            profiles, observations, base=base, params=request.params, k_folds=request.k_folds
        )
    except CalibrationError as exc:
        raise InvalidInputError(
            f"calibration refused: {exc}",
            details=[ErrorDetail(field=None, reason=str(exc))],
            code="calibration_refused",
        ) from None
    return to_record(_store(session, request.name, result, inputs))


def get_calibration(session: Session, *, key: str) -> CalibrationRecord:
    row = repository.find(session, key=key)
    if row is None:
        raise NotFoundError(f"no calibration with id or name '{key}'")
    return to_record(row)


def delete_calibration(session: Session, *, key: str) -> None:
    """One version, by id or name@version (a bare name would be whichever is latest). Searches
    and plans priced with it keep their results and forget the link."""
    begin_write(session)
    if "@" not in key and not looks_like_id(key):
        raise InvalidInputError.at(
            "key", f"'{key}' names every version; delete one by id or name@version"
        )
    row = repository.find(session, key=key)
    if row is None:
        raise NotFoundError(f"no calibration with id or name '{key}'")
    session.delete(row)
    session.commit()


def list_calibrations(
    session: Session, *, name: str | None, cursor: str | None, limit: int
) -> CalibrationPage:
    if name is not None:
        require_storable(name, prefix=("name",))
    rows, last_id = repository.list_page(
        session, name_contains=name, before=decode_cursor(cursor), limit=limit
    )
    return CalibrationPage(
        items=[to_summary(row) for row in rows],
        next_cursor=encode_cursor(last_id) if last_id is not None else None,
    )


def resolve_calibration(session: Session, *, key: str, field: str) -> CalibrationRow:
    """The calibration a request body names: unknown is a 422 at ``field``."""
    row = repository.find(session, key=key)
    if row is None:
        raise InvalidInputError.at(
            field, f"no stored calibration with id or name '{key}'", code="unknown_reference"
        )
    return row


def params_of(row: CalibrationRow) -> EfficiencyParams:
    return EfficiencyParams.model_validate(row.params)


def used_calibration(row: CalibrationRow) -> CalibrationUsed:
    return CalibrationUsed(id=row.id, ref=f"{row.name}@{row.version}")


def to_summary(row: CalibrationRow) -> CalibrationSummary:
    return CalibrationSummary(**_summary_fields(row, _result_of(row)))


def to_record(row: CalibrationRow) -> CalibrationRecord:
    result = _result_of(row)
    return CalibrationRecord(
        **_summary_fields(row, result),
        params=params_of(row),
        inputs=row.inputs or {},
        result=result,
    )


# ---- helpers ------------------------------------------------------------------------------------
def _result_of(row: CalibrationRow) -> CalibrationResult:
    return CalibrationResult.model_validate(row.metrics)


def _summary_fields(row: CalibrationRow, result: CalibrationResult) -> dict[str, Any]:
    return {
        "id": row.id,
        "name": row.name,
        "version": row.version,
        "ref": f"{row.name}@{row.version}",
        "created_at": row.created_at,
        "points": result.points,
        "held_out_mape_before": result.held_out_mape_before,
        "held_out_mape_after": result.held_out_mape_after,
        "moved": [change.name for change in result.moved],
    }


def _check_params(names: list[str] | None) -> None:
    for index, name in enumerate(names or []):
        if name not in PARAMETERS:
            raise InvalidInputError.at(
                f"params[{index}]",
                f"'{name}' is not calibratable; choose from {', '.join(PARAMETERS)}",
            )


def _inputs(
    session: Session, request: CalibrationCreate
) -> tuple[list[Profile], list[StepObservation], dict[str, Any]]:
    profiles: list[Profile] = []
    for index, profile_id in enumerate(request.profile_ids):
        profile_row = find_profile(session, profile_id)
        if profile_row is None:
            raise InvalidInputError.at(
                f"profile_ids[{index}]",
                f"no stored profile with id '{profile_id}'",
                code="unknown_reference",
            )
        profiles.append(profile_of_row(profile_row))
    rows: dict[str, ObservationRow] = {}
    for index, observation_id in enumerate(request.observation_ids):
        row = row_by_id(session, ObservationRow, observation_id)
        if row is None:
            raise InvalidInputError.at(
                f"observation_ids[{index}]",
                f"no stored observation with id '{observation_id}'",
                code="unknown_reference",
            )
        rows[row.id] = row
    for index, source in enumerate(request.observation_sources):
        found = session.scalars(select(ObservationRow).where(ObservationRow.source == source)).all()
        if not found:
            raise InvalidInputError.at(
                f"observation_sources[{index}]",
                f"no stored observation has source '{source}'",
                code="unknown_reference",
            )
        rows.update((row.id, row) for row in found)
    if not profiles and not rows:
        raise InvalidInputError.at(
            "profile_ids", "give at least one profile or observation to fit to"
        )
    ordered = sorted(rows.values(), key=lambda row: row.id)
    inputs = {
        "profile_ids": list(request.profile_ids),
        "observation_ids": [row.id for row in ordered],
        "observation_sources": list(request.observation_sources),
        "params": request.params,
        "k_folds": request.k_folds,
    }
    return profiles, [step_observation_of_row(row) for row in ordered], inputs


def _store(
    session: Session, name: str, result: CalibrationResult, inputs: dict[str, Any]
) -> CalibrationRow:
    for _ in range(_VERSION_ATTEMPTS):
        begin_write(session)
        row = CalibrationRow(
            name=name,
            version=repository.latest_version(session, name=name) + 1,
            params=result.params.model_dump(mode="json"),
            metrics=result.model_dump(mode="json"),
            inputs=inputs,
        )
        try:
            repository.add(session, row)
            session.commit()
            return row
        except IntegrityError:
            session.rollback()  # another fit took this version first: take the next one
    raise ConflictError(f"calibration '{name}' is being written by others; try again")
