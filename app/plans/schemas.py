from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from costmodel.specs import Estimate, Plan
from search import EquivalentPlan


class PlanRecord(BaseModel):
    """A plan a search found, with the estimate it was ranked by."""

    model_config = ConfigDict(from_attributes=True)

    id: str
    search_id: str
    rank: int | None = Field(
        description="1 = best; null: found and kept, but outside the search's final ranking."
    )
    plan: Plan
    global_batch_size: int | None = Field(description="Sequences per step the plan was priced at.")
    estimate: Estimate | None
    objective_values: list[float] | None = Field(
        description="One value per objective, in the order of the search's objective_names."
    )
    equivalents: list[EquivalentPlan] = Field(
        default_factory=list,
        description="Near-ties folded into this entry (within the search's near_tie_tolerance "
        "on every objective, differing only in micro-batch, ZeRO stage, offload, sequence "
        "parallelism or recompute, or in the dp/cp split at the same tokens per GPU), closest "
        "first, with their objective values.",
    )
    feasible: bool
    plan_hash: str = Field(description="SHA-256 of the plan and its batch: unique per search.")
    trial_number: int | None = Field(description="Optuna trial that found it (null: enumerated).")
    calibration_id: str | None = Field(
        default=None, description="The calibration that priced and ranked it (null: none)."
    )
    created_at: datetime

    @field_validator("equivalents", mode="before")
    @classmethod
    def _none_is_empty(cls, value: Any) -> Any:
        return [] if value is None else value  # plans stored before near-ties were folded
