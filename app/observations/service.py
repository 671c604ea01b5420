"""Observed training steps: runs of stored plans, or of plans made elsewhere.

Each is stored with its full scenario (model, training at the batch it ran, cluster, plan), so a
calibration can price it again whatever happens to the search, plus what the model predicted
for it at the time, so the prediction error is visible at once.
"""

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.common.ids import require_row
from app.common.pagination import decode_cursor, encode_cursor, newest_first
from app.common.pricing import price
from app.common.references import ResolvedSpecs, resolve_specs
from app.common.text import require_storable
from app.db import begin_write
from app.errors import InvalidInputError
from app.observations.schemas import (
    Measurement,
    ObservationCreate,
    ObservationPage,
    ObservationRecord,
    ObservationSummary,
    PlanObservationCreate,
)
from app.orm import ObservationRow, SearchRow
from app.plans.service import get_plan
from app.presets.service import plan_preset
from costmodel.feasibility import why_it_cannot_have_run
from costmodel.observations import StepObservation
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec


def observe_plan(
    session: Session, *, plan_id: str, request: PlanObservationCreate
) -> ObservationRecord:
    require_storable(request.model_dump(exclude_none=True))
    begin_write(session)
    plan_row = get_plan(session, plan_id=plan_id)
    search = session.get(SearchRow, plan_row.search_id)
    assert search is not None  # plans cascade with their search
    training = TrainingSpec.model_validate(search.request["training"])
    if plan_row.global_batch_size is not None:
        training = training.model_copy(update={"global_batch_size": plan_row.global_batch_size})
    scenario = ResolvedSpecs(
        model=ModelSpec.model_validate(search.request["model"]),
        training=training,
        cluster=ClusterSpec.model_validate(search.request["cluster"]),
        model_row_id=None,
        cluster_row_id=None,
    )
    predicted = (plan_row.estimate or {}).get("step_time_s")
    row = _row(scenario, Plan.model_validate(plan_row.plan), request, predicted, plan_id=plan_id)
    session.add(row)
    session.commit()
    return to_record(row)


def create_observation(session: Session, *, request: ObservationCreate) -> ObservationRecord:
    require_storable(request.model_dump(exclude_none=True))
    begin_write(session)
    specs = resolve_specs(session, references=request)
    plan = (
        request.plan if isinstance(request.plan, Plan) else plan_preset(request.plan, field="plan")
    )
    priced = price(specs, plan)  # refuses a plan the model cannot price at all
    if problem := why_it_cannot_have_run(priced.reasons):
        raise InvalidInputError.at("plan", problem, code="invalid_plan")
    row = _row(specs, plan, request, priced.step_time_s, plan_id=None)
    session.add(row)
    session.commit()
    return to_record(row)


def get_observation(session: Session, *, observation_id: str) -> ObservationRecord:
    row = require_row(session, ObservationRow, observation_id, kind="observation")
    return to_record(row)


def delete_observation(session: Session, *, observation_id: str) -> None:
    """A run reported by mistake; calibrations fitted to it keep their parameters."""
    begin_write(session)
    row = require_row(session, ObservationRow, observation_id, kind="observation")
    session.delete(row)
    session.commit()


def list_observations(
    session: Session,
    *,
    plan_id: str | None,
    source: str | None,
    cursor: str | None,
    limit: int,
) -> ObservationPage:
    statement = select(ObservationRow)
    if plan_id is not None:
        statement = statement.where(ObservationRow.plan_id == plan_id)
    if source is not None:
        require_storable(source, prefix=("source",))
        statement = statement.where(ObservationRow.source == source)
    rows, last_id = newest_first(
        session, statement, ObservationRow.id, before=decode_cursor(cursor), limit=limit
    )
    return ObservationPage(
        items=[to_summary(row) for row in rows],
        next_cursor=encode_cursor(last_id) if last_id is not None else None,
    )


def plan_observations(
    session: Session, *, plan_id: str, cursor: str | None, limit: int
) -> ObservationPage:
    get_plan(session, plan_id=plan_id)  # 404 for an unknown plan, not an empty list
    return list_observations(session, plan_id=plan_id, source=None, cursor=cursor, limit=limit)


def step_observation_of_row(row: ObservationRow) -> StepObservation:
    """What calibration fits to."""
    return StepObservation(
        name=row.name or row.id,
        source=row.source or "observed",
        **row.scenario,
        plan=Plan.model_validate(row.plan),
        step_time_s=row.step_time_s,
        tokens_per_s=row.tokens_per_s,
        peak_memory_gib=row.peak_memory_gib,
    )


def to_summary(row: ObservationRow) -> ObservationSummary:
    return ObservationSummary(**_summary_fields(row))


def to_record(row: ObservationRow) -> ObservationRecord:
    return ObservationRecord(
        **_summary_fields(row), **row.scenario, plan=Plan.model_validate(row.plan)
    )


# ---- helpers ------------------------------------------------------------------------------------
def _row(
    specs: ResolvedSpecs,
    plan: Plan,
    measured: Measurement,
    predicted_step_time_s: float | None,
    *,
    plan_id: str | None,
) -> ObservationRow:
    try:
        observation = StepObservation(
            name=measured.name or "observation",
            source=measured.source,
            model=specs.model,
            training=specs.training,
            cluster=specs.cluster,
            plan=plan,
            step_time_s=measured.step_time_s,
            tokens_per_s=measured.tokens_per_s,
            peak_memory_gib=measured.peak_memory_gib,
        )
    except ValueError as exc:
        raise InvalidInputError.at(None, str(exc)) from None
    scenario: dict[str, Any] = {
        "model": specs.model.model_dump(mode="json"),
        "training": specs.training.model_dump(mode="json"),
        "cluster": specs.cluster.model_dump(mode="json"),
    }
    return ObservationRow(
        plan_id=plan_id,
        name=measured.name,
        source=measured.source,
        scenario=scenario,
        plan=plan.model_dump(mode="json"),
        step_time_s=observation.measured_step_time_s,
        tokens_per_s=measured.tokens_per_s,
        peak_memory_gib=measured.peak_memory_gib,
        predicted_step_time_s=predicted_step_time_s,
    )


def _summary_fields(row: ObservationRow) -> dict[str, Any]:
    predicted = row.predicted_step_time_s
    return {
        "id": row.id,
        "plan_id": row.plan_id,
        "name": row.name,
        "source": row.source,
        "step_time_s": row.step_time_s,
        "tokens_per_s": row.tokens_per_s,
        "peak_memory_gib": row.peak_memory_gib,
        "predicted_step_time_s": predicted,
        "prediction_error": predicted / row.step_time_s - 1 if predicted is not None else None,
        "created_at": row.created_at,
    }
