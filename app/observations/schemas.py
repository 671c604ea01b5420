from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator

from app.common.pagination import PageMeta
from app.common.references import PresetName, SpecReferences
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.base import Number

SourceName = Annotated[str, Field(min_length=1, max_length=200)]


class Measurement(BaseModel):
    """What a training run measured: median over steps after warm-up."""

    # NaN and infinities (JSON's NaN/Infinity extensions) are refused as "not finite" before any
    # bound is checked, instead of a misleading "less than or equal to 1e7".
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str | None = Field(default=None, min_length=1, max_length=200, description="Label.")
    source: SourceName = Field(
        default="observed",
        description="Reporting group ('prod-h100', 'nightly'); a calibration can take a source.",
    )
    step_time_s: Number | None = Field(default=None, gt=0, le=1e7)
    tokens_per_s: Number | None = Field(
        default=None, gt=0, le=1e15, description="All GPUs together."
    )
    peak_memory_gib: Number | None = Field(default=None, gt=0, le=1e6, description="Per GPU.")

    @model_validator(mode="after")
    def _measured(self) -> "Measurement":
        if self.step_time_s is None and self.tokens_per_s is None:
            raise ValueError("give step_time_s or tokens_per_s")
        return self


class PlanObservationCreate(Measurement):
    """A run of a stored plan: its model, training, cluster and batch come from its search."""


class ObservationCreate(SpecReferences, Measurement):
    """A run not planned here: its specs as in ``POST /v1/estimate``, plus the plan that ran."""

    plan: Plan | PresetName = Field(description="Plan or plan preset name.")


class ObservationSummary(BaseModel):
    id: str
    plan_id: str | None = Field(description="The stored plan it ran, if any.")
    name: str | None
    source: str | None
    step_time_s: float = Field(description="Measured (from tokens_per_s when that was given).")
    tokens_per_s: float | None
    peak_memory_gib: float | None
    predicted_step_time_s: float | None = Field(
        description="The cost model's step time for it when reported: the plan's own estimate "
        "(priced with its search's calibration, if any), else the uncalibrated model's."
    )
    prediction_error: float | None = Field(
        description="predicted / measured - 1 (0.1: predicted 10% slower than it ran)."
    )
    created_at: datetime


class ObservationRecord(ObservationSummary):
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    plan: Plan


class ObservationPage(PageMeta):
    items: list[ObservationSummary]
