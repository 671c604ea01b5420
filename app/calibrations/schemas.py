from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field

from app.common.names import CALIBRATION_NAME_PATTERN
from app.common.pagination import PageMeta
from costmodel.calibration import CalibrationResult
from costmodel.params import EfficiencyParams
from costmodel.specs.base import Integer

CalibrationName = Annotated[
    str,
    Field(
        pattern=CALIBRATION_NAME_PATTERN,
        description="Letters, digits, '.', '_' or '-' (up to 100); each fit adds a version.",
    ),
]
RowId = Annotated[str, Field(min_length=1, max_length=200)]
SourceName = Annotated[str, Field(min_length=1, max_length=200)]


class CalibrationCreate(BaseModel):
    """What to fit: stored profiles (``POST /v1/profiles``) and observed steps
    (``POST /v1/plans/{id}/observations``, ``POST /v1/observations``), by id or, for
    observations, by source. At least one profile or observation."""

    model_config = ConfigDict(extra="forbid")

    name: CalibrationName
    profile_ids: list[RowId] = Field(default_factory=list, max_length=100)
    observation_ids: list[RowId] = Field(default_factory=list, max_length=10_000)
    observation_sources: list[SourceName] = Field(
        default_factory=list,
        max_length=100,
        description="Take every observation reported under these sources too.",
    )
    params: list[str] | None = Field(
        default=None,
        max_length=100,
        description="Parameters the fit may move (default: all the data constrains).",
    )
    base: RowId | None = Field(
        default=None,
        description="Start from this calibration (id, name@version or name) instead of the "
        "uncalibrated defaults: recalibrate with new observations, and see the error before "
        "and after relative to it.",
    )
    k_folds: Integer = Field(
        default=5, ge=2, le=50, description="Held-out error: each point predicted without it."
    )


class CalibrationSummary(BaseModel):
    id: str
    name: str
    version: int
    ref: str = Field(description="name@version: what estimates and searches accept.")
    created_at: datetime
    points: int = Field(description="Measurements it was fitted to.")
    held_out_mape_before: float = Field(description="Mean over sources (0.1 = 10%).")
    held_out_mape_after: float
    moved: list[str] = Field(description="Parameters the fit moved.")


class CalibrationRecord(CalibrationSummary):
    params: EfficiencyParams = Field(description="What estimates priced with it use.")
    inputs: dict[str, Any] = Field(description="Profile and observation ids it was fitted to.")
    result: CalibrationResult


class CalibrationPage(PageMeta):
    items: list[CalibrationSummary]


class CalibrationUsed(BaseModel):
    """The calibration an estimate or a search priced with."""

    id: str
    ref: str
