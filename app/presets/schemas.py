from typing import Any, Literal

from pydantic import BaseModel, Field

PresetKind = Literal["model", "cluster", "training", "plan"]


class PresetIndex(BaseModel):
    """Preset names by kind. Models and clusters are also stored rows (GET /v1/models?preset=true)
    usable by name as model_id / cluster_id; trainings and plans are usable by name in
    POST /v1/estimate."""

    model: list[str]
    cluster: list[str]
    training: list[str]
    plan: list[str]


class Preset(BaseModel):
    kind: PresetKind
    name: str
    spec: dict[str, Any] = Field(description="A ModelSpec, ClusterSpec, TrainingSpec or Plan.")
