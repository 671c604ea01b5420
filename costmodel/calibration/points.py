"""Every measurement as a point the cost model can predict for any ``EfficiencyParams``.

Profile samples are priced with the cost model's own kernel formulas, so a parameter fitted on
micro-benchmarks means what the model means by it:

- GEMM: ``kernels.gemm_time_s`` (FLOPs / (peak x efficiency x d / (d + gemm_half_dim)) with
  d = min(m, sqrt(n k)) for (m x k) @ (k x n)), the catalog efficiency scaled by
  ``gemm_efficiency_scale`` as ``hardware_arrays.group_hardware`` does. A ``ceiling`` sample
  (the best shape of a shape search) is the large-GEMM rate itself: priced without roll-off.
- Fused attention: FLOPs on the full s x s square / (16-bit peak x attention_efficiency), the
  backward at ``kernels.FLASH_BACKWARD_FACTOR`` times the forward (as ``stage.stage_costs``), a
  timed forward + backward at 1 + that factor; a non-causal sample does twice the work of the
  causal kernel the model describes (``CAUSAL_SKIP``).
- Memory-bound kernels: bytes / (HBM bandwidth x memory_bound_efficiency).
- Collectives: ``comm`` (nccl-tests bus-bandwidth factors, ring/tree latency terms) over the
  links ``group_hardware`` derives for a node group shaped like the sample's ranks, at the op's
  bandwidth and latency scales (``COLLECTIVE_SCALES``; all-reduce is the reference).

Observed steps are priced by ``estimate(..., params=...)`` itself.
"""

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from costmodel import comm
from costmodel.api import estimate
from costmodel.hardware_arrays import group_hardware
from costmodel.kernels import (
    FLASH_BACKWARD_FACTOR,
    Hardware,
    fused_attention_s,
    gemm_time_s,
    memory_bound_s,
)
from costmodel.observations import (
    AttentionSample,
    CollectiveSample,
    GemmSample,
    MemorySample,
    Profile,
    StepObservation,
)
from costmodel.params import EfficiencyParams
from costmodel.specs import Estimate, GpuSpec, NodeGroup

# Per op: the EfficiencyParams fields scaling all-reduce's bus bandwidth and per-step latency
# into that op's (stage.stage_costs applies the same ones where the op runs).
COLLECTIVE_SCALES: dict[str, tuple[str, str]] = {
    "all_gather": ("all_gather_bandwidth_scale", "all_gather_latency_scale"),
    "reduce_scatter": ("reduce_scatter_bandwidth_scale", "reduce_scatter_latency_scale"),
    "all_to_all": ("all_to_all_bandwidth_scale", "all_to_all_latency_scale"),
    "p2p": ("p2p_bandwidth_scale", "p2p_latency_scale"),
}

Predict = Callable[[EfficiencyParams, np.ndarray], np.ndarray]

# Fused-attention time of each pass in forwards (the backward recomputes the scores).
PASS_FACTORS = {
    "forward": 1.0,
    "backward": FLASH_BACKWARD_FACTOR,
    "forward_backward": 1.0 + FLASH_BACKWARD_FACTOR,
}
# The model prices the causal attention training runs on the full s x s FLOP count; causal
# kernels skip the masked half of it. A non-causal kernel does the whole square: twice the
# causal kernel's work, which it runs at the same rate (the convention of FlashAttention's
# benchmarks, which halve the FLOP count for causal and compare the rates; FlashAttention-2 at
# seqlen 8k runs causal within ~5% of its non-causal rate).
CAUSAL_SKIP = 2.0


def attention_factor(sample: AttentionSample) -> float:
    """Time of ``sample`` in causal forwards on its shape (what ``fused_attention_s`` prices)."""
    return PASS_FACTORS[sample.direction] * (1.0 if sample.causal else CAUSAL_SKIP)


def node_group(gpu: GpuSpec, ranks: int = 1, ranks_per_node: int = 1) -> NodeGroup:
    """A one-group stand-in for the GPUs a profile ran on: ``ranks`` GPUs, ``ranks_per_node`` per
    node."""
    return NodeGroup(
        name="profile",
        gpu=gpu,
        num_nodes=max(1, math.ceil(ranks / ranks_per_node)),
        gpus_per_node=ranks_per_node,
    )


def _hardware(gpu: GpuSpec, precision: str, params: EfficiencyParams) -> Hardware:
    return group_hardware(node_group(gpu), precision, params)


@dataclass
class Point:
    """One measurement: what was measured, its reporting source and its identity."""

    source: str
    label: str
    key: str  # same key = same experiment (repeats must agree)
    series: str | None  # collectives: same op and topology, ordered by size
    size: float  # message size within a series
    measured: float
    inverse: bool = False  # the user measured the reciprocal (tokens/s): report its error
    observed_run: bool = False  # a training step that really ran (not a micro-benchmark)


@dataclass
class Family:
    """Points priced by one formula; ``predict(params, members)`` prices a subset of them."""

    points: list[Point]
    predict: Predict


def _by_dtype(
    dtypes: np.ndarray, members: np.ndarray, price: Callable[[str, np.ndarray], np.ndarray]
) -> np.ndarray:
    """``price(dtype, rows)`` for each datatype among ``members``, in ``members``' order: the
    hardware (peak, efficiency) depends on the datatype."""
    out = np.empty(members.size)
    for dtype in np.unique(dtypes[members]):
        chosen = dtypes[members] == dtype
        out[chosen] = price(str(dtype), members[chosen])
    return out


# ---- profile families -----------------------------------------------------------------------
def gemm_family(gpu: GpuSpec, samples: Sequence[GemmSample]) -> Family:
    """GEMM samples priced with ``kernels.gemm_time_s`` (one datatype's hardware per row)."""
    flops = np.array([s.flops for s in samples])
    m, n, k = (np.array([float(getattr(s, axis)) for s in samples]) for axis in "mnk")
    dtypes = np.array([s.dtype for s in samples])
    ceiling = np.array([s.ceiling for s in samples])

    def predict(params: EfficiencyParams, members: np.ndarray) -> np.ndarray:
        def price(dtype: str, rows: np.ndarray) -> np.ndarray:
            hw = _hardware(gpu, dtype, params)
            # A ceiling (the best shape of a shape search) is the large-GEMM rate: no roll-off.
            half: Any = np.where(ceiling[rows], 0.0, params.gemm_half_dim)
            return gemm_time_s(flops[rows], m[rows], n[rows], k[rows], hw, half)

        return _by_dtype(dtypes, members, price)

    points = [
        Point(
            source=f"gemm {s.dtype}",
            label=f"GEMM {s.m}x{s.n}x{s.k} {s.dtype}{' (ceiling)' if s.ceiling else ''}",
            key=f"gemm|{gpu.name}|{s.dtype}|{s.m}|{s.n}|{s.k}",
            series=None,
            size=s.flops,
            measured=s.median_s,
        )
        for s in samples
    ]
    return Family(points, predict)


def attention_family(gpu: GpuSpec, samples: Sequence[AttentionSample]) -> Family:
    """Fused-attention samples priced with ``kernels.fused_attention_s``."""
    flops = np.array([s.full_flops for s in samples])
    factor = np.array([attention_factor(s) for s in samples])
    dtypes = np.array([s.dtype for s in samples])

    def predict(params: EfficiencyParams, members: np.ndarray) -> np.ndarray:
        def price(dtype: str, rows: np.ndarray) -> np.ndarray:
            # Attention runs in 16-bit even under FP8 GEMMs (kernels.Hardware.attention_Fps).
            return factor[rows] * fused_attention_s(flops[rows], _hardware(gpu, dtype, params))

        return _by_dtype(dtypes, members, price)

    points = [
        Point(
            source="attention",
            label=(
                f"SDPA {s.direction} b{s.batch} h{s.heads} s{s.seq_length} d{s.head_dim} {s.dtype}"
            ),
            key=(
                f"attention|{gpu.name}|{s.dtype}|{s.batch}|{s.heads}|{s.seq_length}|"
                f"{s.head_dim}|{s.causal}|{s.direction}"
            ),
            series=None,
            size=s.full_flops,
            measured=s.median_s,
        )
        for s in samples
    ]
    return Family(points, predict)


# The kernels the model prices as memory-bound elementwise work (stage.py: norms, residual
# adds, activation functions, softmax). Pure streams (copy, scale) describe the bandwidth
# itself (profiler.device.nominal_gpu) and are not fitted.
ELEMENTWISE_KERNELS = ("add", "gelu", "layer_norm", "softmax")


def memory_family(gpu: GpuSpec, samples: Sequence[MemorySample]) -> Family:
    """Elementwise (memory-bound) samples priced with ``kernels.memory_bound_s``; others are left
    out."""
    samples = [s for s in samples if s.kernel in ELEMENTWISE_KERNELS]
    moved = np.array([s.bytes for s in samples])

    def predict(params: EfficiencyParams, members: np.ndarray) -> np.ndarray:
        return memory_bound_s(moved[members], _hardware(gpu, "fp32", params))

    points = [
        Point(
            source="memory",
            label=f"{s.kernel} {s.bytes / 1e6:.0f} MB {s.dtype}",
            key=f"memory|{gpu.name}|{s.kernel}|{s.dtype}|{s.bytes:.0f}",
            series=None,
            size=s.bytes,
            measured=s.median_s,
        )
        for s in samples
    ]
    return Family(points, predict)


def collective_family(gpu: GpuSpec, samples: Sequence[CollectiveSample]) -> Family:
    """Collective samples priced with ``comm``'s all-reduce, all-gather and all-to-all, series by op
    and topology."""
    size = np.array([s.size_B for s in samples])
    ranks = np.array([float(s.ranks) for s in samples])
    local = np.array([float(s.ranks_per_node) for s in samples])
    ops = np.array([s.op for s in samples])
    shapes = sorted({(s.ranks, s.ranks_per_node) for s in samples})

    def links(params: EfficiencyParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per sample: intra and inter bytes/s (x link efficiency) and domain size."""
        intra, inter, domain = (
            np.empty(len(samples)),
            np.empty(len(samples)),
            np.empty(len(samples)),
        )
        for shape in shapes:
            hw = group_hardware(node_group(gpu, *shape), "bf16", params)
            chosen = (ranks == shape[0]) & (local == shape[1])
            intra[chosen], inter[chosen] = hw.intra_Bps[0], hw.inter_Bps[0]
            domain[chosen] = hw.gpus_per_node[0]
        return intra, inter, domain

    def predict(params: EfficiencyParams, members: np.ndarray) -> np.ndarray:
        intra, inter, domain = (values[members] for values in links(params))
        n, per_node, op, data = (
            ranks[members],
            np.minimum(local[members], domain),
            ops[members],
            size[members],
        )
        latency = comm.link_latency_s(
            n, per_node, params.intra_node_latency_us * 1e-6, params.inter_node_latency_us * 1e-6
        )
        bandwidth_scale, latency_scale = np.ones(members.size), np.ones(members.size)
        for name, (bandwidth_field, latency_field) in COLLECTIVE_SCALES.items():
            chosen = op == name
            bandwidth_scale[chosen] = getattr(params, bandwidth_field)
            latency_scale[chosen] = getattr(params, latency_field)
        intra, inter = intra * bandwidth_scale, inter * bandwidth_scale
        latency = latency * latency_scale
        busbw = comm.bus_bandwidth_Bps(n, per_node, intra, inter)
        return np.select(
            [op == "all_reduce", op == "all_to_all", op == "p2p"],
            [
                comm.all_reduce_s(data, n, busbw, latency),
                comm.all_to_all_s(data, n, per_node, intra, inter, latency),
                comm.p2p_s(data, np.where(per_node >= 2, intra, inter), latency),
            ],
            # all_gather and reduce_scatter share one formula (comm.reduce_scatter_s).
            default=comm.all_gather_s(data, n, busbw, latency),
        )

    points = [
        Point(
            source=f"{s.op} ({s.source})",
            label=f"{s.op} {s.size_B:.0f} B on {s.ranks} ranks ({s.ranks_per_node}/node)",
            key=f"collective|{gpu.name}|{s.op}|{s.size_B:.0f}|{s.ranks}|{s.ranks_per_node}",
            series=f"{gpu.name}|{s.op}|{s.ranks}|{s.ranks_per_node}",
            size=s.size_B,
            measured=s.priced_s,
        )
        for s in samples
    ]
    return Family(points, predict)


# ---- observed steps ---------------------------------------------------------------------------
@dataclass
class _EstimateCache:
    """Step-time and memory families share one ``estimate`` call per observation and params."""

    observations: Sequence[StepObservation]
    params: EfficiencyParams | None = None
    estimates: dict[int, Estimate] = field(default_factory=dict)

    def get(self, params: EfficiencyParams, index: int) -> Estimate:
        if params != self.params:
            self.params, self.estimates = params, {}
        if index not in self.estimates:
            obs = self.observations[index]
            self.estimates[index] = estimate(
                obs.model, obs.training, obs.cluster, obs.plan, params=params
            )
        return self.estimates[index]


def _spec_key(obs: StepObservation) -> str:
    return json.dumps(
        [
            obs.model.model_dump(),
            obs.training.model_dump(),
            obs.cluster.model_dump(),
            obs.plan.model_dump(),
        ],
        sort_keys=True,
        default=str,
    )


def step_families(observations: Sequence[StepObservation]) -> list[Family]:
    """Observed training steps priced with ``estimate``: step times, and peak memory if measured."""
    cache = _EstimateCache(observations)
    step_points = [
        Point(
            source=obs.source,
            label=obs.name,
            key="step|" + _spec_key(obs),
            series=None,
            size=0.0,
            measured=obs.measured_step_time_s,
            inverse=obs.step_time_s is None,
            observed_run=True,
        )
        for obs in observations
    ]

    def predict_steps(params: EfficiencyParams, members: np.ndarray) -> np.ndarray:
        return np.array([cache.get(params, int(i)).step_time_s for i in members])

    families = [Family(step_points, predict_steps)]
    with_memory = [i for i, obs in enumerate(observations) if obs.peak_memory_gib is not None]
    if with_memory:
        memory_points = [
            Point(
                source=f"{observations[i].source} memory",
                label=f"{observations[i].name} peak memory",
                key="memory-peak|" + _spec_key(observations[i]),
                series=None,
                size=0.0,
                measured=float(observations[i].peak_memory_gib or 0.0),
                observed_run=True,
            )
            for i in with_memory
        ]
        index = np.array(with_memory)

        def predict_memory(params: EfficiencyParams, members: np.ndarray) -> np.ndarray:
            return np.array([cache.get(params, int(i)).peak_memory_gib for i in index[members]])

        families.append(Family(memory_points, predict_memory))
    return families


# ---- all points -------------------------------------------------------------------------------
@dataclass
class PointSet:
    """All points in one flat order, and the family each belongs to."""

    points: list[Point]
    families: list[Family]
    family_of: np.ndarray
    member_of: np.ndarray  # index within its family

    @classmethod
    def build(
        cls, profiles: Sequence[Profile], observations: Sequence[StepObservation]
    ) -> "PointSet":
        """Every point of ``profiles`` and ``observations``, family by family."""
        families: list[Family] = []
        for profile in profiles:
            gpu = profile.gpu
            if profile.gemm:
                families.append(gemm_family(gpu, profile.gemm))
            if profile.attention:
                families.append(attention_family(gpu, profile.attention))
            if any(s.kernel in ELEMENTWISE_KERNELS for s in profile.memory):
                families.append(memory_family(gpu, profile.memory))
            if profile.collectives:
                families.append(collective_family(gpu, profile.collectives))
        if observations:
            families.extend(step_families(observations))
        points = [point for family in families for point in family.points]
        family_of = np.concatenate(
            [np.full(len(f.points), i) for i, f in enumerate(families)] or [np.zeros(0, int)]
        ).astype(int)
        member_of = np.concatenate(
            [np.arange(len(f.points)) for f in families] or [np.zeros(0, int)]
        ).astype(int)
        return cls(points, families, family_of, member_of)

    def __len__(self) -> int:
        return len(self.points)

    @property
    def measured(self) -> np.ndarray:
        """Measured value of each point (seconds, GiB for peak memory), shape ``(n_points,)``."""
        return np.array([point.measured for point in self.points])

    @property
    def sources(self) -> np.ndarray:
        """Reporting source of each point, object array of shape ``(n_points,)``."""
        return np.array([point.source for point in self.points], dtype=object)

    @property
    def observed_runs(self) -> np.ndarray:
        """Whether each point is an observed training run, bool array of shape ``(n_points,)``."""
        return np.array([point.observed_run for point in self.points], dtype=bool)

    def predict(self, params: EfficiencyParams, subset: np.ndarray) -> np.ndarray:
        """The cost model's value for the points ``subset`` (indices, shape ``(n_subset,)``) under
        ``params``; same shape and units as ``measured``."""
        out = np.empty(subset.size)
        for index, family in enumerate(self.families):
            chosen = self.family_of[subset] == index
            if chosen.any():
                out[chosen] = family.predict(params, self.member_of[subset[chosen]])
        return out
