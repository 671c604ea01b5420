"""What a search returns: ranked plans with their estimates, and how the search went.

Pydantic models so the CLI prints them as JSON and the service stores them unchanged (the
``plans`` table keeps ``plan``, ``plan_hash``, ``estimate`` and ``objective_values`` per row).
"""

import hashlib
import json
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from costmodel.specs import Estimate, Plan

Status = Literal["completed", "stopped", "timeout"]


def plan_hash(plan: Plan, global_batch_size: int) -> str:
    """SHA-256 of the canonical plan JSON (and its batch): one id for one plan across workers."""
    document = {"plan": plan.model_dump(mode="json"), "global_batch_size": global_batch_size}
    canonical = json.dumps(document, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


class EquivalentPlan(BaseModel):
    """A near-tie of a ranked plan: the same layout with other knobs, or the same data ranks
    split otherwise between dp and cp at the same tokens per GPU (``search.ranking``)."""

    model_config = ConfigDict(extra="forbid")

    plan: Plan
    global_batch_size: int
    objective_values: list[float] = Field(description="One value per objective, study order.")
    plan_hash: str
    trial_number: int | None = None
    differs: list[str] = Field(description="Plan fields in which it differs from the entry.")


class RankedPlan(BaseModel):
    """One ranked layout: the plan, its estimate, objective values and near-tie equivalents."""

    model_config = ConfigDict(extra="forbid")

    rank: int = Field(ge=1, description="1 = best; on a Pareto front, 1 = fastest.")
    plan: Plan
    estimate: Estimate
    global_batch_size: int = Field(description="Sequences per step the plan was priced at.")
    objective_values: list[float] = Field(description="One value per objective, study order.")
    plan_hash: str
    trial_number: int | None = Field(default=None, description="Optuna trial that found it.")
    equivalents: list[EquivalentPlan] = Field(
        default_factory=list,
        description=(
            "Plans within near_tie_tolerance of this one on every objective that differ only in "
            "knobs that leave the layout alone (micro-batch, ZeRO stage, offload, sequence "
            "parallelism, recompute; or dp vs cp at the same tokens per GPU), closest first."
        ),
    )


class SearchResult(BaseModel):
    """Ranked plans and how the search went (plans priced, trials, status)."""

    model_config = ConfigDict(extra="forbid")

    plans: list[RankedPlan] = Field(
        description="One entry per distinct layout, best first (pareto: spread along the front); "
        "its near-ties are its equivalents."
    )
    evaluated: int = Field(
        description=(
            "Plans priced by the cost model in this run (exhaustive: the whole valid space; "
            "Optuna: every option of every trial's structure, warm-start screening, layer splits)."
        )
    )
    feasible: int = Field(description="Of those, plans within the memory cap.")
    elapsed_s: float
    sampler: str = Field(description="The sampler that ran ('auto' resolved).")
    objective: str
    objective_names: list[str] = Field(description="Estimate fields of the objective(s).")
    directions: list[Literal["maximize", "minimize"]]
    status: Status = "completed"
    space_size: int | None = Field(
        default=None, description="Valid homogeneous plans in the space, when counted."
    )
    trials: int | None = Field(default=None, description="Finished trials of the Optuna study.")
    study_name: str | None = None
    pareto_front: list[RankedPlan] | None = Field(
        default=None, description="pareto objective: every non-dominated plan, fastest first."
    )
    single_type_best: RankedPlan | None = Field(
        default=None, description="Heterogeneous searches: the best plan on one GPU type."
    )
    gain_over_single_type: float | None = Field(
        default=None,
        description="Best plan's objective over single_type_best's, minus 1 (0.1 = 10% better).",
    )
    notes: list[str] = Field(default_factory=list)
    near_tie_tolerance: float = Field(
        default=0.005,
        description="Relative difference on every objective within which plans of one layout "
        "are listed as one entry's equivalents.",
    )

    @property
    def best(self) -> RankedPlan | None:
        """The first ranked plan, or None when there is none."""
        return self.plans[0] if self.plans else None
