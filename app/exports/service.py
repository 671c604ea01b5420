"""Exporting a stored plan: the scenario comes from its search's request, the batch from the
plan's own ``global_batch_size`` (a search may price several)."""

from sqlalchemy.orm import Session

from app.errors import InvalidInputError
from app.exports.build import build_export
from app.exports.layout import ExportError
from app.exports.schemas import ExportFormat, PlanExport
from app.orm import SearchRow
from app.plans.service import get_plan
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec

# 422 code of an export the plan's framework cannot launch, or the format cannot hold.
NOT_LAUNCHABLE = "not_launchable"


def export_plan(
    session: Session,
    *,
    plan_id: str,
    format: ExportFormat,
    framework: str | None = None,
    image: str | None = None,
) -> PlanExport:
    row = get_plan(session, plan_id=plan_id)
    search = session.get(SearchRow, row.search_id)
    assert search is not None  # plans cascade with their search
    training = TrainingSpec.model_validate(search.request["training"])
    if row.global_batch_size is not None:
        training = training.model_copy(update={"global_batch_size": row.global_batch_size})
    try:
        result = build_export(
            ModelSpec.model_validate(search.request["model"]),
            training,
            ClusterSpec.model_validate(search.request["cluster"]),
            Plan.model_validate(row.plan),
            format=format,
            framework=framework,
            image=image,
        )
    except ExportError as exc:
        raise InvalidInputError.at(exc.field, exc.reason, code=NOT_LAUNCHABLE) from None
    return PlanExport(plan_id=row.id, **result.model_dump())
