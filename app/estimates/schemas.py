from pydantic import Field

from app.common.references import PresetName, SpecReferences
from costmodel.specs import Plan


class EstimateRequest(SpecReferences):
    """What to price. Give the model as exactly one of ``model``, ``model_id`` or ``preset``, and
    the cluster as exactly one of ``cluster`` or ``cluster_id``."""

    plan: Plan | PresetName = Field(description="Plan or plan preset name.")
