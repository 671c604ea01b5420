from pydantic import Field

from app.calibrations.schemas import CalibrationUsed
from app.common.references import PresetName, Reference, SpecReferences
from costmodel.specs import Estimate, Plan


class EstimateRequest(SpecReferences):
    """What to price. Give the model as exactly one of ``model``, ``model_id`` or ``preset``, and
    the cluster as exactly one of ``cluster`` or ``cluster_id``."""

    plan: Plan | PresetName = Field(description="Plan or plan preset name.")
    calibration: Reference | None = Field(
        default=None,
        description="Price with this calibration (id, name@version, or name for its latest "
        "version); default: the uncalibrated model.",
    )


class EstimateResponse(Estimate):
    calibration: CalibrationUsed | None = Field(
        default=None, description="The calibration it was priced with; null: uncalibrated."
    )
