"""The model, training and cluster of a request, named inline, by stored id or name, or by preset.

``POST /v1/estimate`` and ``POST /v1/searches`` take the same three inputs the same way: the model
as exactly one of ``model`` (inline spec), ``model_id`` (a stored model, presets included) or
``preset`` (a model preset); the cluster as ``cluster`` or ``cluster_id``; the training inline or
as a preset name. ``resolve_specs`` turns them into specs, blaming the field that is wrong.
"""

from dataclasses import dataclass
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.orm import Session

from app.clusters.repository import clusters
from app.clusters.service import check_gpu_names
from app.common.limits import check_cluster_size
from app.common.record_service import resolve_spec_reference
from app.errors import InvalidInputError
from app.modelspecs.repository import models
from app.presets.service import model_preset, training_preset
from costmodel.specs import ClusterSpec, ModelSpec, TrainingSpec

PresetName = Annotated[str, Field(min_length=1, max_length=200)]
Reference = Annotated[str, Field(min_length=1, max_length=200)]

MODEL_FIELDS = ("model", "model_id", "preset")
CLUSTER_FIELDS = ("cluster", "cluster_id")


class SpecReferences(BaseModel):
    """Give the model as exactly one of ``model``, ``model_id`` or ``preset``, and the cluster as
    exactly one of ``cluster`` or ``cluster_id``."""

    # JSON Schema cannot say "exactly one of these is non-null" without oneOf branches that
    # generators and validators read differently (a null counts as present for "required"), so
    # the rule is stated in the description and as a machine-readable extension.
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"x-exactly-one-of": [list(MODEL_FIELDS), list(CLUSTER_FIELDS)]},
    )

    model: ModelSpec | None = Field(default=None, description="Inline model spec.")
    model_id: Reference | None = Field(
        default=None, description="Id or name of a stored model (presets included)."
    )
    preset: PresetName | None = Field(
        default=None, description="Name of a model preset (GET /v1/presets)."
    )
    training: TrainingSpec | PresetName = Field(description="Training spec or preset name.")
    cluster: ClusterSpec | None = Field(default=None, description="Inline cluster spec.")
    cluster_id: Reference | None = Field(
        default=None, description="Id or name of a stored cluster (presets included)."
    )

    def model_field(self) -> str:
        """The field the model was given in (after ``resolve_specs`` checked there is one)."""
        return next(name for name in MODEL_FIELDS if getattr(self, name) is not None)

    def cluster_field(self) -> str:
        return next(name for name in CLUSTER_FIELDS if getattr(self, name) is not None)


@dataclass(frozen=True)
class ResolvedSpecs:
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    # Ids of the stored rows the model and cluster came from, when named by model_id/cluster_id.
    model_row_id: str | None
    cluster_row_id: str | None


def resolve_specs(session: Session, *, references: SpecReferences) -> ResolvedSpecs:
    model, model_row_id = _resolve_model(session, references)
    cluster, cluster_row_id = _resolve_cluster(session, references)
    training = (
        references.training
        if isinstance(references.training, TrainingSpec)
        else training_preset(references.training, field="training")
    )
    return ResolvedSpecs(
        model=model,
        training=training,
        cluster=cluster,
        model_row_id=model_row_id,
        cluster_row_id=cluster_row_id,
    )


def _require_exactly_one(references: SpecReferences, fields: tuple[str, ...]) -> None:
    given = [name for name in fields if getattr(references, name) is not None]
    if len(given) != 1:
        problem = f"got {' and '.join(given)}" if given else "none was given"
        raise InvalidInputError.at(
            given[-1] if given else fields[0],
            f"give exactly one of {', '.join(fields)}; {problem}",
        )


def _resolve_model(session: Session, references: SpecReferences) -> tuple[ModelSpec, str | None]:
    _require_exactly_one(references, MODEL_FIELDS)
    if references.model is not None:
        return references.model, None
    if references.model_id is not None:
        return resolve_spec_reference(
            session, repository=models, key=references.model_id, field="model_id", kind="model"
        )
    return model_preset(str(references.preset), field="preset"), None


def _resolve_cluster(
    session: Session, references: SpecReferences
) -> tuple[ClusterSpec, str | None]:
    _require_exactly_one(references, CLUSTER_FIELDS)
    if references.cluster is not None:
        check_gpu_names(references.cluster, prefix="cluster.")
        check_cluster_size(session, references.cluster, field="cluster")
        return references.cluster, None
    spec, row_id = resolve_spec_reference(
        session,
        repository=clusters,
        key=str(references.cluster_id),
        field="cluster_id",
        kind="cluster",
    )
    # A stored cluster passed the limit when it was stored, unless the limit was lowered since.
    check_cluster_size(session, spec, field="cluster_id")
    return spec, row_id
