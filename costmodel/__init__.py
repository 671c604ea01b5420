"""autopar cost model: a pure library (numpy + pydantic) that prices parallelization plans.

Two faces of one model:

- ``estimate(model, training, cluster, plan) -> Estimate`` explains one plan with every breakdown;
- ``estimate_many(model, training, cluster, plans) -> dict[str, np.ndarray]`` prices whole arrays
  of homogeneous plans in one numpy pass (the search's hot path).

Without a calibration both price each node group with its GPU's defaults, ``default_params(gpu)``
(fitted from published micro-benchmarks, ``costmodel.gpu_defaults``).

Array shapes: ``estimate_many`` takes and returns arrays of shape ``(n_plans,)``; the stage model
(``costmodel.stage``) works on ``(n_instances,)`` arrays, one entry per stage instance.

See README.md, 'How the cost model works', and 'Validation against published runs' for how it is
checked against the runs of ``validation/README.md``.
"""

from costmodel.api import estimate, estimate_many
from costmodel.gpu_defaults import default_params
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
    "default_params",
    "estimate",
    "estimate_many",
]
