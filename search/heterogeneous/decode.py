"""The sampled space of heterogeneous skeletons and its decoding.

``SkeletonSpace.parameters`` lists what a trial samples: the layout, which groups take part and
in what order, the shared dp and cp, each group's stage count and share of its GPUs, the
micro-batch, interleaving and the memory options. ``decode`` turns sampled values into the valid
skeleton nearest to them, every choice snapped to what is valid given the earlier ones.
"""

import itertools
from collections.abc import Sequence
from typing import Any

import numpy as np

from costmodel.specs import NodeGroup
from search.constraints import DimFilter
from search.heterogeneous.skeleton import SHARES, Skeleton, SkeletonDraft
from search.params import Parameter, parameter
from search.request import SearchRequest
from search.space import batch_field, dimension_domains

# Orders are one categorical over permutations up to this many groups (24), sort keys beyond.
MAX_PERMUTED_GROUPS = 4
MAX_SUBSET_GROUPS = 6


def snap(choices: Sequence[int], wanted: int) -> int:
    """The choice nearest to ``wanted`` on a log scale."""
    values = np.asarray(choices, dtype=float)
    return int(choices[int(np.argmin(np.abs(np.log(values) - np.log(wanted))))])


class SkeletonSpace:
    """The parameters a heterogeneous trial samples over the request's groups, and ``decode``."""

    def __init__(self, request: SearchRequest, layouts: tuple[str, ...]) -> None:
        self.request = request
        self.layouts = layouts
        self.groups = request.search_groups
        self.names = [group.name for group in self.groups]
        self.filters: dict[str, DimFilter] = request.filters()
        self.domains = {
            batch: dimension_domains(
                request.model, request.training_for(batch), self.filters, batch_field(request)
            )
            for batch in request.batch_sizes
        }
        self.layers = request.model.num_layers
        # Categoricals over subsets and orders only while they stay small (63 and 24 choices);
        # beyond, per-group flags and sort keys (see _parameters).
        few = len(self.names) <= MAX_SUBSET_GROUPS
        self.subsets = (
            [
                "+".join(combo)
                for size in range(1, len(self.names) + 1)
                for combo in itertools.combinations(self.names, size)
            ]
            if few
            else []
        )
        permuted = len(self.names) <= MAX_PERMUTED_GROUPS
        self.orders = [">".join(o) for o in itertools.permutations(self.names)] if permuted else []
        self.parameters = self._parameters()

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
        if len(self.names) <= MAX_SUBSET_GROUPS:
            candidates.append(parameter("groups", "categorical", self.subsets))
        else:
            candidates += [parameter(f"use:{n}", "categorical", [True, False]) for n in self.names]
        if len(self.names) <= MAX_PERMUTED_GROUPS:
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
        sp_domain = first.get("sequence_parallel")
        if sp_domain is not None:
            candidates.append(parameter("sequence_parallel", "categorical", sp_domain))
        return [p for p in candidates if p is not None]

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
            draft = self._stages(raw, batch, groups, cp)
        else:
            draft = self._replicas(raw, batch, groups, cp)
        return self._with_options(raw, draft)

    def _stages(
        self, raw: dict[str, Any], batch: int, groups: list[NodeGroup], cp: int
    ) -> SkeletonDraft:
        domains = self.domains[batch]
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
        return SkeletonDraft(
            layout="stages",
            global_batch_size=batch,
            groups=tuple(groups),
            tps=tuple(tps),
            counts=tuple(counts),
            dp=dp,
            pp=pp,
            cp=cp,
            micro_batch_size=mbs,
            vpp=self._pick(raw, "vpp", vpps),
        )

    def _replicas(
        self, raw: dict[str, Any], batch: int, groups: list[NodeGroup], cp: int
    ) -> SkeletonDraft:
        domains = self.domains[batch]
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
        return SkeletonDraft(
            layout="replicas",
            global_batch_size=batch,
            groups=tuple(groups),
            tps=tuple(tps),
            counts=tuple(counts),
            dp=dp,
            pp=pp,
            cp=cp,
            micro_batch_size=mbs,
            vpp=1,
        )

    def _with_options(self, raw: dict[str, Any], draft: SkeletonDraft) -> Skeleton:
        """The skeleton of ``draft`` with the sampled memory options and ep, made valid."""
        domains = self.domains[draft.global_batch_size]
        dp, cp = draft.dp, draft.cp
        offload = bool(raw.get("offload_optimizer", domains["offload_optimizer"][0]))
        zeros = [z for z in domains["zero_stage"] if z >= 1 or not offload]
        if not zeros:  # offload asked but only ZeRO-0 allowed: give way on offload
            offload, zeros = False, domains["zero_stage"]
        wanted = raw.get("zero_stage", zeros[0])
        zero = min(zeros, key=lambda z: (abs(z - wanted), z))
        if dp * cp == 1:
            zero = zeros[0]  # ZeRO over one rank changes nothing: canonical stage
        recompute = raw.get("recompute", domains["recompute"][0])
        any_tp = max(draft.tps) > 1
        sp_domain = domains.get("sequence_parallel")
        if sp_domain is None:
            sp = any_tp
        else:
            sp = bool(raw.get("sequence_parallel", sp_domain[0])) and any_tp
        # Experts shard over data ranks: ep divides dp*cp (none does only under an ep constraint;
        # the evaluation then reports the plan as breaking the rules).
        eps = [e for e in domains["ep"] if (dp * cp) % e == 0] or domains["ep"][:1]
        return Skeleton(
            ep=self._pick(raw, "ep", eps),
            layout=draft.layout,
            global_batch_size=draft.global_batch_size,
            groups=tuple(group.name for group in draft.groups),
            tps=draft.tps,
            counts=draft.counts,
            dp=dp,
            pp=draft.pp,
            cp=cp,
            micro_batch_size=draft.micro_batch_size,
            vpp=draft.vpp,
            zero_stage=zero,
            offload_optimizer=offload,
            recompute=recompute,
            sequence_parallel=sp,
        )

    def _members(self, raw: dict[str, Any], layout: str) -> list[str]:
        if len(self.names) <= MAX_SUBSET_GROUPS:
            chosen = str(raw.get("groups", self.names[0])).split("+")
        else:
            chosen = [name for name in self.names if raw.get(f"use:{name}", True)]
            chosen = chosen or [max(self.groups, key=lambda g: g.num_gpus).name]
        if layout == "replicas" or len(self.names) == 1:
            return chosen
        if len(self.names) <= MAX_PERMUTED_GROUPS:
            order = str(raw.get("order", ">".join(self.names))).split(">")
        else:
            order = sorted(self.names, key=lambda name: raw.get(f"order:{name}", 0.0))
        return [name for name in order if name in chosen]

    @staticmethod
    def _pick(raw: dict[str, Any], name: str, valid: list[int]) -> int:
        """The valid value nearest (log scale) to the sampled one; the smallest if unsampled."""
        return snap(valid, raw[name]) if name in raw else valid[0]


def _count(raw: dict[str, Any], group: str, most: int) -> int:
    """Stages (or pipelines) on ``group``: its sampled share of the ``most`` that fit."""
    return max(1, min(most, round(float(raw.get(f"share:{group}", 1.0)) * most)))
