from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec

PresetName = Annotated[str, Field(min_length=1, max_length=200)]
Reference = Annotated[str, Field(min_length=1, max_length=200)]


class EstimateRequest(BaseModel):
    """What to price. Give the model as exactly one of ``model``, ``model_id`` or ``preset``, and
    the cluster as exactly one of ``cluster`` or ``cluster_id``."""

    model_config = ConfigDict(extra="forbid")

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
    plan: Plan | PresetName = Field(description="Plan or plan preset name.")
