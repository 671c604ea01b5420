"""Heterogeneous plans: pipelines that span node groups, GPU types and zones.

A trial picks a *skeleton* and a deterministic balancer turns it into a plan:

- skeleton, sampled by Optuna (every choice snapped to what is valid given the earlier ones):
  the layout, which groups take part, their order along the pipeline, the shared dp and cp, how
  many stages each group hosts and what share of its GPUs they use (the stages' tp follows: the
  widest that fits), the micro-batch, interleaving and the memory options (``decode``);
- layer split, computed: layers proportional to each stage's peak speed, then re-balanced from
  the stages' priced micro-batch times and capped by their memory, then a short hill-climb that
  moves ``vpp`` layers at a time off the slowest stage (``balance``; Metis, Um et al. ATC'24,
  and AMP, Li et al. NeurIPS'22, balance non-uniform stages the same way).

Two layouts (``Plan.stages``): ``stages`` puts each stage on one group with its own tp and one
shared dp, so the data-parallel all-reduce stays inside a group and only the activations cross
between groups (and zones); ``replicas`` runs whole pipelines on different groups
(heterogeneous data parallelism), every pipeline with the same layer split, the batch split by
the pipelines' speed (vpp = 1). Plans are priced with ``costmodel.estimate``, which prices the
links each plan really crosses, zone links included. Constraints on ``pp`` and ``num_gpus`` are
checked on the finished plan (a plan that breaks them is reported infeasible); every other
constraint shapes the sampled choices. Studies start from heuristic skeletons (``seed``).

Modules: ``skeleton`` (what a trial decides), ``decode`` (the sampled space and its decoding),
``balance`` (the layer split), ``seed`` (starting points), ``trials`` (``HeterogeneousTrials``,
which ties them together for ``search.optuna_study``).
"""

from search.heterogeneous.skeleton import LAYOUTS, SHARES, Skeleton, SkeletonDraft
from search.heterogeneous.trials import HeterogeneousTrials

__all__ = ["LAYOUTS", "SHARES", "HeterogeneousTrials", "Skeleton", "SkeletonDraft"]
