"""autopar cost model: a pure library (numpy + pydantic) that prices parallelization plans.

Two faces of one model:

- ``estimate(model, training, cluster, plan) -> Estimate`` explains one plan with every breakdown;
- ``estimate_many(model, training, cluster, plans) -> dict[str, np.ndarray]`` prices whole arrays
  of homogeneous plans in one numpy pass (the search's hot path).
"""

from costmodel.api import estimate, estimate_many
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import ClusterSpec, Estimate, ModelSpec, Plan, TrainingSpec

__all__ = [
    "DEFAULT_PARAMS",
    "ClusterSpec",
    "EfficiencyParams",
    "Estimate",
    "ModelSpec",
    "Plan",
    "TrainingSpec",
    "estimate",
    "estimate_many",
]
