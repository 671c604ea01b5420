"""Resolve the request's references to specs, then let the cost model price the plan."""

import re

from sqlalchemy.orm import Session

from app.clusters.repository import clusters
from app.clusters.service import check_gpu_names
from app.common.record_service import resolve_reference
from app.common.text import require_storable
from app.errors import InvalidInputError
from app.estimates.schemas import EstimateRequest
from app.modelspecs.repository import models
from app.presets.service import model_preset, plan_preset, training_preset
from costmodel import estimate
from costmodel.specs import ClusterSpec, Estimate, ModelSpec, Plan, TrainingSpec


def run_estimate(session: Session, *, request: EstimateRequest) -> Estimate:
    # Names from the request reach the database and the response; refuse what neither can encode.
    require_storable(request.model_dump(exclude_none=True))
    model = _resolve_model(session, request)
    cluster = _resolve_cluster(session, request)
    training = (
        request.training
        if isinstance(request.training, TrainingSpec)
        else training_preset(request.training, field="training")
    )
    plan = (
        request.plan if isinstance(request.plan, Plan) else plan_preset(request.plan, field="plan")
    )
    try:
        return estimate(model, training, cluster, plan)
    except ValueError as exc:
        # The cost model's word for "this plan cannot be priced on this cluster" (a stage names
        # an unknown node group, ...); infeasible plans are answers, not errors.
        raise _unpriceable(str(exc)) from None


# The cost model's messages start with the field they blame ("plan.stages[0].group: ...").
_BLAMED_FIELD = re.compile(r"^((?:model|training|cluster|plan)(?:[.\[][\w.\[\]]*)?): (.+)$", re.S)


def _unpriceable(message: str) -> InvalidInputError:
    match = _BLAMED_FIELD.match(message)
    field, reason = (match.group(1), match.group(2)) if match else ("plan", message)
    return InvalidInputError.at(field, reason, code="invalid_plan")


def _require_exactly_one(request: EstimateRequest, fields: tuple[str, ...]) -> None:
    given = [name for name in fields if getattr(request, name) is not None]
    if len(given) != 1:
        problem = f"got {' and '.join(given)}" if given else "none was given"
        raise InvalidInputError.at(
            given[-1] if given else fields[0],
            f"give exactly one of {', '.join(fields)}; {problem}",
        )


def _resolve_model(session: Session, request: EstimateRequest) -> ModelSpec:
    _require_exactly_one(request, ("model", "model_id", "preset"))
    if request.model is not None:
        return request.model
    if request.model_id is not None:
        return resolve_reference(
            session, repository=models, key=request.model_id, field="model_id", kind="model"
        ).spec
    return model_preset(str(request.preset), field="preset")


def _resolve_cluster(session: Session, request: EstimateRequest) -> ClusterSpec:
    _require_exactly_one(request, ("cluster", "cluster_id"))
    if request.cluster is not None:
        check_gpu_names(request.cluster, prefix="cluster.")
        return request.cluster
    row = resolve_reference(
        session,
        repository=clusters,
        key=str(request.cluster_id),
        field="cluster_id",
        kind="cluster",
    )
    return row.spec
