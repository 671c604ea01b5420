"""Heterogeneous plans: pipelines that span node groups, GPU types and zones.

A trial picks a *skeleton* and a deterministic balancer turns it into a plan:

- skeleton, sampled by Optuna (every choice snapped to what is valid given the earlier ones):
  the layout, which groups take part, their order along the pipeline, the shared dp and cp, how
  many stages each group hosts and what share of its GPUs they use (the stages' tp follows: the
  widest that fits), the micro-batch, interleaving and the memory options;
- layer split, computed: layers proportional to each stage's peak speed, then re-balanced from
  the stages' priced micro-batch times and capped by their memory, then a short hill-climb that
  moves ``vpp`` layers at a time off the slowest stage (Metis, Um et al. ATC'24, and AMP, Li et
  al. NeurIPS'22, balance non-uniform stages the same way).

Two layouts (``Plan.stages``): ``stages`` puts each stage on one group with its own tp and one
shared dp, so the data-parallel all-reduce stays inside a group and only the activations cross
between groups (and zones); ``replicas`` runs whole pipelines on different groups
(heterogeneous data parallelism), every pipeline with the same layer split, the batch split by
the pipelines' speed (vpp = 1). Plans are priced with ``costmodel.estimate``, which prices the
links each plan really crosses, zone links included. Constraints on ``pp`` and ``num_gpus`` are
checked on the finished plan (a plan that breaks them is reported infeasible); every other
constraint shapes the sampled choices.
"""

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import optuna

from costmodel import estimate
from costmodel.hardware import DEFAULT_GEMM_EFFICIENCY, peak_tflops, resolve_gpu
from costmodel.specs import Estimate, NodeGroup, Plan, ReplicaSpec, StageSpec
from search.objectives import (
    OBJECTIVE_METRICS,
    Evaluation,
    Metric,
    memory_ratio_of_estimate,
    metrics_of_estimate,
)
from search.params import Parameter, parameter, sample
from search.request import DimFilter, SearchRequest
from search.space import batch_field, dimension_domains

LAYOUTS = ("stages", "replicas")
# How much of a group a skeleton uses: the share of its GPUs (stages layout) or of the pipelines
# that fit (replicas). Sampling a share rather than a count lets the sampler learn "use the whole
# group" once, for every tp x dp x cp, where the matching count differs for each.
SHARES = (0.125, 0.25, 0.5, 0.75, 1.0)
# Orders are one categorical over permutations up to this many groups (24), sort keys beyond.
_MAX_PERMUTED_GROUPS = 4
_MAX_SUBSET_GROUPS = 6
_REBALANCE_ROUNDS = 3
_CLIMB_STEPS = 6
_CLIMB_WITHIN = 0.95


@dataclass(frozen=True)
class Skeleton:
    """Everything about a heterogeneous plan except its layer split."""

    layout: str
    global_batch_size: int
    groups: tuple[str, ...]  # pipeline order (stages) or any order (replicas)
    tps: tuple[int, ...]  # per group
    counts: tuple[int, ...]  # per group: stages (stages layout) or pipelines (replicas)
    dp: int  # stages layout: replicas of every stage; replicas layout: sum(counts)
    pp: int
    cp: int
    micro_batch_size: int
    vpp: int
    zero_stage: int
    offload_optimizer: bool
    recompute: str
    sequence_parallel: bool
    ep: int = 1


def _snap(choices: Sequence[int], wanted: int) -> int:
    values = np.asarray(choices, dtype=float)
    return int(choices[int(np.argmin(np.abs(np.log(values) - np.log(wanted))))])


def _speed(group: NodeGroup, precision: str) -> float:
    gpu = resolve_gpu(group.gpu)
    return peak_tflops(gpu, precision) * (gpu.gemm_efficiency or DEFAULT_GEMM_EFFICIENCY)


class HeterogeneousTrials:
    """Skeletons over the request's groups; ``evaluate`` balances and prices them."""

    # Skeletons form a rugged landscape (basins differ in several coupled parameters): local
    # search runs alongside the sampler, two trials after each of its new plans.
    local_moves_per_trial = 2

    def __init__(self, request: SearchRequest, *, replicas: bool = True) -> None:
        self.request = request
        self.groups = request.search_groups
        self.names = [group.name for group in self.groups]
        self.filters: dict[str, DimFilter] = request.filters()
        self.layouts = LAYOUTS if replicas and len(self.groups) > 1 else LAYOUTS[:1]
        self.domains = {
            batch: dimension_domains(
                request.model, request.training_for(batch), self.filters, batch_field(request)
            )
            for batch in request.batch_sizes
        }
        self.layers = request.model.num_layers
        # Categoricals over subsets and orders only while they stay small (63 and 24 choices);
        # beyond, per-group flags and sort keys (see _parameters).
        few = len(self.names) <= _MAX_SUBSET_GROUPS
        self.subsets = (
            [
                "+".join(combo)
                for size in range(1, len(self.names) + 1)
                for combo in itertools.combinations(self.names, size)
            ]
            if few
            else []
        )
        permuted = len(self.names) <= _MAX_PERMUTED_GROUPS
        self.orders = [">".join(o) for o in itertools.permutations(self.names)] if permuted else []
        self.parameters = self._parameters()
        self.metrics = OBJECTIVE_METRICS[request.objective]
        self.best_score = -math.inf  # best feasible plan balanced so far (single objective)
        self.priced = 0  # plans priced (every split the balancer tried)
        self.fitting = 0
        self.seed_plans: list[dict[str, Any]] = []

    # Sampling ------------------------------------------------------------------------------
    def _parameters(self) -> list[Parameter]:
        """Every sampled parameter; single-valued dimensions are not parameters.

        Every trial suggests all of them, whether or not its skeleton uses them (a group that
        does not take part still gets a tp): a static space lets TPE model the parameters
        jointly instead of one at a time.
        """
        union = {
            dim: sorted({value for domains in self.domains.values() for value in domains[dim]})
            for dim in ("cp", "dp", "tp", "micro_batch_size", "vpp", "ep")
        }
        first = self.domains[self.request.batch_sizes[0]]
        candidates = [
            parameter("layout", "categorical", self.layouts),
            parameter("global_batch_size", "categorical", self.request.batch_sizes),
        ]
        if len(self.names) <= _MAX_SUBSET_GROUPS:
            candidates.append(parameter("groups", "categorical", self.subsets))
        else:
            candidates += [parameter(f"use:{n}", "categorical", [True, False]) for n in self.names]
        if len(self.names) <= _MAX_PERMUTED_GROUPS:
            candidates.append(parameter("order", "categorical", self.orders))
        else:
            candidates += [parameter(f"order:{n}", "float", [0.0, 1.0]) for n in self.names]
        candidates += [parameter(dim, "int", union[dim]) for dim in ("cp", "dp")]
        if "replicas" in self.layouts:
            candidates.append(parameter("pp", "int", range(1, self.layers + 1)))
        for group in self.groups:
            if "replicas" in self.layouts:
                candidates.append(parameter(f"tp:{group.name}", "int", union["tp"]))
            bound = min(self.layers, group.num_gpus)
            candidates.append(parameter(f"stages:{group.name}", "int", range(1, bound + 1)))
            candidates.append(parameter(f"share:{group.name}", "categorical", SHARES))
        candidates += [
            parameter(dim, "int", union[dim]) for dim in ("micro_batch_size", "vpp", "ep")
        ]
        for dim in ("offload_optimizer", "zero_stage", "recompute"):
            candidates.append(parameter(dim, "categorical", first[dim]))
        if first["sequence_parallel"] is not None:
            candidates.append(
                parameter("sequence_parallel", "categorical", first["sequence_parallel"])
            )
        return [p for p in candidates if p is not None]

    def suggest(self, trial: optuna.Trial) -> Skeleton:
        return self.decode(sample(trial, self.parameters))

    # Decoding ------------------------------------------------------------------------------
    def decode(self, raw: dict[str, Any]) -> Skeleton:
        """The valid skeleton nearest to the sampled values (each choice snapped in turn)."""
        layout = raw.get("layout", self.layouts[0])
        batch = raw.get("global_batch_size", self.request.batch_sizes[0])
        domains = self.domains[batch]
        groups = [self.request.cluster.group(name) for name in self._members(raw, layout)]
        smallest = min(group.num_gpus for group in groups)
        cp = self._pick(raw, "cp", [c for c in domains["cp"] if c <= smallest] or domains["cp"])
        if layout == "stages":
            return self._stages(raw, batch, domains, groups, cp)
        return self._replicas(raw, batch, domains, groups, cp)

    def _stages(self, raw, batch, domains, groups, cp) -> Skeleton:  # type: ignore[no-untyped-def]
        smallest = min(group.num_gpus for group in groups)
        tp_min = domains["tp"][0]
        dp = self._pick(
            raw, "dp", [d for d in domains["dp"] if d * cp * tp_min <= smallest] or domains["dp"]
        )
        tps, counts = [], []
        room = self.layers  # a stage holds at least one layer
        for index, group in enumerate(groups):
            # The group's stage count is sampled, its tp follows: the widest that fits the
            # sampled share of its GPUs. So dp x 2 is one move that halves every tp, where
            # sampling tp would need one move per group to stay on the same GPUs.
            budget = float(raw.get(f"share:{group.name}", 1.0)) * group.num_gpus
            budget = max(budget, tp_min * dp * cp)  # at least one stage (dp was chosen to fit)
            most = int(budget // (tp_min * dp * cp))
            most = max(1, min(most, room - (len(groups) - index - 1)))
            count = min(int(raw.get(f"stages:{group.name}", 1)), most)
            fitting = [t for t in domains["tp"] if t * dp * cp * count <= budget] or [tp_min]
            tps.append(fitting[-1])
            counts.append(count)
            room -= count
        if self.request.training.framework != "any":
            # Megatron, DeepSpeed and torchtitan run one TP size on every stage: the narrowest
            # the groups chose fits every group's budget.
            tps = [min(tps)] * len(tps)
        pp = sum(counts)
        mbs = self._pick(
            raw,
            "micro_batch_size",
            [m for m in domains["micro_batch_size"] if batch % (dp * m) == 0]
            or domains["micro_batch_size"][:1],
        )
        microbatches = batch // (dp * mbs)
        vpps = [
            v
            for v in domains["vpp"]
            # The layer balancer moves whole chunks of vpp layers: vpp must divide the layers.
            if pp * v <= self.layers
            and self.layers % v == 0
            and (v == 1 or (pp > 1 and microbatches % pp == 0))
        ] or [1]
        vpp = self._pick(raw, "vpp", vpps)
        return self._with_options(
            raw, "stages", batch, domains, groups, tps, counts, dp, pp, cp, mbs, vpp
        )

    def _replicas(self, raw, batch, domains, groups, cp) -> Skeleton:  # type: ignore[no-untyped-def]
        smallest = min(group.num_gpus for group in groups)
        tp_min = domains["tp"][0]
        pps = [p for p in range(1, self.layers + 1) if p * cp * tp_min <= smallest] or [1]
        pp = self._pick(
            raw, "pp", (self.filters["pp"].keep(pps) if "pp" in self.filters else pps) or pps
        )
        tps, counts = [], []
        for group in groups:
            fitting = [t for t in domains["tp"] if t * pp * cp <= group.num_gpus] or [tp_min]
            tp = self._pick(raw, f"tp:{group.name}", fitting)
            most = max(1, group.num_gpus // (tp * pp * cp))
            counts.append(_count(raw, group.name, most))
            tps.append(tp)
        dp = sum(counts)
        mbs = self._pick(
            raw,
            "micro_batch_size",
            [m for m in domains["micro_batch_size"] if dp * m <= batch]
            or domains["micro_batch_size"][:1],
        )
        return self._with_options(
            raw, "replicas", batch, domains, groups, tps, counts, dp, pp, cp, mbs, 1
        )

    def _with_options(  # type: ignore[no-untyped-def]
        self, raw, layout, batch, domains, groups, tps, counts, dp, pp, cp, mbs, vpp
    ) -> Skeleton:
        offload = bool(raw.get("offload_optimizer", domains["offload_optimizer"][0]))
        zeros = [z for z in domains["zero_stage"] if z >= 1 or not offload]
        if not zeros:  # offload asked but only ZeRO-0 allowed: give way on offload
            offload, zeros = False, domains["zero_stage"]
        wanted = raw.get("zero_stage", zeros[0])
        zero = min(zeros, key=lambda z: (abs(z - wanted), z))
        if dp * cp == 1:
            zero = zeros[0]  # ZeRO over one rank changes nothing: canonical stage
        recompute = raw.get("recompute", domains["recompute"][0])
        any_tp = max(tps) > 1
        sp_domain = domains["sequence_parallel"]
        if sp_domain is None:
            sp = any_tp
        else:
            sp = bool(raw.get("sequence_parallel", sp_domain[0])) and any_tp
        # Experts shard over data ranks: ep divides dp*cp (none does only under an ep constraint;
        # _evaluation then reports the plan as breaking the rules).
        eps = [e for e in domains["ep"] if (dp * cp) % e == 0] or domains["ep"][:1]
        return Skeleton(
            ep=self._pick(raw, "ep", eps),
            layout=layout,
            global_batch_size=batch,
            groups=tuple(group.name for group in groups),
            tps=tuple(tps),
            counts=tuple(counts),
            dp=dp,
            pp=pp,
            cp=cp,
            micro_batch_size=mbs,
            vpp=vpp,
            zero_stage=zero,
            offload_optimizer=offload,
            recompute=recompute,
            sequence_parallel=sp,
        )

    def _members(self, raw: dict[str, Any], layout: str) -> list[str]:
        if len(self.names) <= _MAX_SUBSET_GROUPS:
            chosen = str(raw.get("groups", self.names[0])).split("+")
        else:
            chosen = [name for name in self.names if raw.get(f"use:{name}", True)]
            chosen = chosen or [max(self.groups, key=lambda g: g.num_gpus).name]
        if layout == "replicas" or len(self.names) == 1:
            return chosen
        if len(self.names) <= _MAX_PERMUTED_GROUPS:
            order = str(raw.get("order", ">".join(self.names))).split(">")
        else:
            order = sorted(self.names, key=lambda name: raw.get(f"order:{name}", 0.0))
        return [name for name in order if name in chosen]

    @staticmethod
    def _pick(raw: dict[str, Any], name: str, valid: list[int]) -> int:
        """The valid value nearest (log scale) to the sampled one; the smallest if unsampled."""
        return _snap(valid, raw[name]) if name in raw else valid[0]

    # Pricing -------------------------------------------------------------------------------
    def evaluate(self, candidates: Sequence[Skeleton]) -> list[Evaluation]:
        return [self.balance(skeleton) for skeleton in candidates]

    def _estimate(self, skeleton: Skeleton, layers: list[int]) -> Estimate:
        result = estimate(
            self.request.model,
            self.request.training_for(skeleton.global_batch_size),
            self.request.cluster,
            self.plan(skeleton, layers),
            params=self.request.params,
        )
        self.priced += 1
        self.fitting += memory_ratio_of_estimate(result, self.request.max_memory_fraction) <= 1
        return result

    def plan(self, skeleton: Skeleton, layers: list[int]) -> Plan:
        stage_groups = self._stage_groups(skeleton)
        if skeleton.layout == "stages":
            stages = [
                StageSpec(num_layers=n, group=name, tp=tp, dp=skeleton.dp)
                for n, (name, tp) in zip(layers, stage_groups, strict=True)
            ]
        else:
            pipelines = [
                ReplicaSpec(group=name, tp=tp)
                for name, tp, count in zip(
                    skeleton.groups, skeleton.tps, skeleton.counts, strict=True
                )
                for _ in range(count)
            ]
            stages = [StageSpec(num_layers=n, replicas=pipelines) for n in layers]
        return Plan(
            dp=skeleton.dp,
            tp=skeleton.tps[0],
            pp=skeleton.pp,
            cp=skeleton.cp,
            ep=skeleton.ep,
            vpp=skeleton.vpp,
            micro_batch_size=skeleton.micro_batch_size,
            zero_stage=skeleton.zero_stage,
            recompute=skeleton.recompute,  # type: ignore[arg-type]
            sequence_parallel=skeleton.sequence_parallel,
            offload_optimizer=skeleton.offload_optimizer,
            stages=stages,
        )

    def _stage_groups(self, skeleton: Skeleton) -> list[tuple[str, int]]:
        """(group, tp) of each stage (stages layout); the slowest member's (replicas)."""
        if skeleton.layout == "stages":
            return [
                (name, tp)
                for name, tp, count in zip(
                    skeleton.groups, skeleton.tps, skeleton.counts, strict=True
                )
                for _ in range(count)
            ]
        return [(skeleton.groups[0], skeleton.tps[0])] * skeleton.pp

    def initial_split(self, skeleton: Skeleton) -> list[int]:
        """Layers proportional to each stage's peak speed (GPU x tp), in units of vpp."""
        precision = self.request.training.precision
        if skeleton.layout == "stages":
            speeds = [
                _speed(self.request.cluster.group(name), precision) * tp
                for name, tp in self._stage_groups(skeleton)
            ]
        else:
            speeds = [1.0] * skeleton.pp  # every stage spans all pipelines alike
        return _apportion(self.layers // skeleton.vpp, np.asarray(speeds), skeleton.vpp)

    def balance(self, skeleton: Skeleton) -> Evaluation:
        """Best layer split found for the skeleton (see the module docstring)."""
        metric = _step_metric
        layers = self.initial_split(skeleton)
        best_layers, best = layers, self._estimate(skeleton, layers)
        seen = {tuple(layers)}
        for _ in range(_REBALANCE_ROUNDS):
            layers = self._rebalanced(skeleton, best_layers, best)
            if tuple(layers) in seen:
                break
            seen.add(tuple(layers))
            candidate = self._estimate(skeleton, layers)
            if metric(candidate, self.request) < metric(best, self.request):
                best_layers, best = layers, candidate
        if not self._worth_climbing(best):
            return self._evaluation(skeleton, best_layers, best)
        for _ in range(_CLIMB_STEPS):
            improved = False
            for layers in self._moves(skeleton, best_layers, best):
                if tuple(layers) in seen:
                    continue
                seen.add(tuple(layers))
                candidate = self._estimate(skeleton, layers)
                if metric(candidate, self.request) < metric(best, self.request):
                    best_layers, best, improved = layers, candidate, True
            if not improved:
                break
        evaluation = self._evaluation(skeleton, best_layers, best)
        if evaluation.feasible and len(self.metrics) == 1:
            score = evaluation.scores(self.metrics)[0]
            self.best_score = max(self.best_score, score)
        return evaluation

    def _worth_climbing(self, result: Estimate) -> bool:
        """Whether the hill-climb (three quarters of a skeleton's pricing) may pay off: only
        for splits within ``_CLIMB_WITHIN`` of the best plan so far (the climb gains a few
        percent at most once the split is re-balanced)."""
        if len(self.metrics) != 1 or not math.isfinite(self.best_score):
            return True
        metric = self.metrics[0]
        value = metrics_of_estimate(result)[metric.key]
        best = self.best_score if metric.direction == "maximize" else -self.best_score
        ratio = value / best if metric.direction == "maximize" else best / value
        return ratio >= _CLIMB_WITHIN

    def _rebalanced(self, skeleton: Skeleton, layers: list[int], result: Estimate) -> list[int]:
        units = self.layers // skeleton.vpp
        times = np.array([stage.time_per_microbatch_s for stage in result.per_stage])
        rate = np.asarray(layers, dtype=float) / np.maximum(times, 1e-12)
        caps = []
        fraction = self.request.max_memory_fraction
        for n, stage in zip(layers, result.per_stage, strict=True):
            fixed = stage.memory_gib.other
            per_layer = max((stage.peak_memory_gib - fixed) / n, 1e-9)
            caps.append(max(1, int((fraction * stage.capacity_gib - fixed) / per_layer)))
        cap_units = np.maximum(np.asarray(caps) // skeleton.vpp, 1)
        return _apportion(units, rate, skeleton.vpp, cap_units)

    def _moves(self, skeleton: Skeleton, layers: list[int], result: Estimate) -> list[list[int]]:
        """Split variants that move vpp layers off the slowest (or fullest) stage."""
        unit = skeleton.vpp
        times = [stage.time_per_microbatch_s for stage in result.per_stage]
        pressure = [stage.peak_memory_gib / stage.capacity_gib for stage in result.per_stage]
        over = max(pressure) > self.request.max_memory_fraction
        source = int(np.argmax(pressure if over else times))
        if layers[source] <= unit:
            return []
        targets = {source - 1, source + 1, int(np.argmin(times)), int(np.argmin(pressure))}
        variants = []
        for target in sorted(t for t in targets if 0 <= t < len(layers) and t != source):
            moved = list(layers)
            moved[source] -= unit
            moved[target] += unit
            variants.append(moved)
        return variants

    def _evaluation(self, skeleton: Skeleton, layers: list[int], result: Estimate) -> Evaluation:
        plan = self.plan(skeleton, layers)
        ratio = memory_ratio_of_estimate(result, self.request.max_memory_fraction)
        if not self._allowed_totals(plan, result):
            ratio = math.inf
        return Evaluation(
            plan=plan,
            global_batch_size=skeleton.global_batch_size,
            metrics=metrics_of_estimate(result),
            memory_ratio=ratio,
        )

    def _allowed_totals(self, plan: Plan, result: Estimate) -> bool:
        if (plan.dp * plan.cp) % plan.ep:
            return False
        checks = {"pp": plan.pp, "num_gpus": result.num_gpus}
        return all(
            self.filters[dim].allows(value) for dim, value in checks.items() if dim in self.filters
        )

    # Warm start ----------------------------------------------------------------------------
    def seeds(self, metrics: Sequence[Metric]) -> list[dict[str, Any]]:
        names = {p.name for p in self.parameters}
        return [{k: v for k, v in seed.items() if k in names} for seed in self.seed_plans]

    def seed_from(self, plan: Plan, global_batch_size: int) -> None:
        """Queue a homogeneous plan as a one-group skeleton (the single-type baselines)."""
        group = plan.group or self.names[0]
        if group not in self.names:
            return
        capacity = self.request.cluster.group(group).num_gpus
        params: dict[str, Any] = {
            "layout": "stages",
            "global_batch_size": global_batch_size,
            "groups": group,
            "order": ">".join([group, *[n for n in self.names if n != group]]),
            "cp": plan.cp,
            "dp": plan.dp,
            f"stages:{group}": plan.pp,
            f"share:{group}": _share(plan.pp * plan.tp * plan.dp * plan.cp, capacity),
            "micro_batch_size": plan.micro_batch_size,
            "vpp": plan.vpp,
            "zero_stage": plan.zero_stage,
            "offload_optimizer": plan.offload_optimizer,
            "recompute": plan.recompute,
            "sequence_parallel": plan.sp,
        }
        self.seed_plans.append(params)

    def seed_spanning(self) -> None:
        """Queue the textbook spanning layouts: every group (fastest zone first), and every
        zone's groups on their own, tp = a node, layers by speed."""
        zones: dict[str, list[str]] = {}
        for group in self.groups:
            zones.setdefault(group.zone, []).append(group.name)
        by_speed = sorted(
            self.groups,
            key=lambda g: -_speed(g, self.request.training.precision),
        )
        zone_order = list(dict.fromkeys(g.zone for g in by_speed))
        ordered = [name for zone in zone_order for name in zones[zone]]
        sets = [ordered] + [names for names in zones.values() if len(names) > 1]
        for members in sets:
            if len(members) < 2:
                continue
            smallest = min(self.request.cluster.group(n).num_gpus for n in members)
            node = min(self.request.cluster.group(n).gpus_per_node for n in members)
            params: dict[str, Any] = {
                "layout": "stages",
                "groups": "+".join(n for n in self.names if n in members),
                "order": ">".join([*members, *[n for n in self.names if n not in members]]),
                "cp": 1,
                "dp": max(1, smallest // node),
                "micro_batch_size": 1,
                "vpp": 1,
                "zero_stage": 1,
                "offload_optimizer": False,
                "recompute": "selective",
                "sequence_parallel": True,
            }
            for name in members:
                params[f"stages:{name}"] = max(
                    1, self.request.cluster.group(name).num_gpus // (node * params["dp"])
                )
                params[f"share:{name}"] = 1.0
            self.seed_plans.append(params)


def _count(raw: dict[str, Any], group: str, most: int) -> int:
    """Stages (or pipelines) on ``group``: its sampled share of the ``most`` that fit."""
    return max(1, min(most, round(float(raw.get(f"share:{group}", 1.0)) * most)))


def _share(used: int, capacity: int) -> float:
    """The smallest share of ``capacity`` that covers ``used``."""
    return next((share for share in SHARES if share * capacity >= used), SHARES[-1])


def _step_metric(result: Estimate, request: SearchRequest) -> tuple[float, float]:
    """Balancer's order: fitting plans first, then step time (GPUs are fixed by the skeleton,
    so the fastest split is also the cheapest)."""
    ratio = memory_ratio_of_estimate(result, request.max_memory_fraction)
    return (max(ratio, 1.0), result.step_time_s)


def _apportion(
    units: int, weights: np.ndarray, unit: int, caps: np.ndarray | None = None
) -> list[int]:
    """Split ``units`` over stages by weight (largest remainder), each >= 1 unit and <= its cap;
    returns layers (units x ``unit``)."""
    count = len(weights)
    weights = np.maximum(np.asarray(weights, dtype=float), 1e-12)
    caps = np.full(count, units) if caps is None else np.maximum(np.asarray(caps), 1)
    if caps.sum() < units:
        caps = caps + (units - caps.sum()) * weights / weights.sum() + 1  # cannot fit: spread
        caps = np.ceil(caps).astype(int)
    shares = np.ones(count, dtype=int)
    free = units - count
    active = np.ones(count, dtype=bool)
    # Water-fill: hand out by weight, freeze stages at their cap, repeat with the rest.
    while free > 0 and active.any():
        ideal = free * weights * active / (weights * active).sum()
        grant = np.minimum(np.floor(ideal).astype(int), caps - shares)
        if grant.sum() == 0:
            room = np.where(active & (shares < caps), ideal - np.floor(ideal) + weights * 1e-9, -1)
            pick = int(np.argmax(room))
            if room[pick] < 0:
                break
            grant = np.zeros(count, dtype=int)
            grant[pick] = 1
        shares += grant
        free -= int(grant.sum())
        active &= shares < caps
    if free > 0:  # every stage at its cap: give the rest to the fastest
        shares[int(np.argmax(weights))] += free
    return [int(s) * unit for s in shares]
