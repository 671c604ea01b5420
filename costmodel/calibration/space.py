"""The parameters calibration may move, their physical bounds and how the solver sees them.

Multiplicative quantities (efficiencies, bandwidths, latencies, the GEMM roll-off size) are
fitted in log space: a step means the same relative change at any magnitude, and they stay
positive. Quantities that are naturally zero (overheads, overlap fractions, framework memory)
are fitted in linear space, in units of ``unit`` so steps are comparable.

Bounds are physical, not numerical. A bound marked ``resting`` is a legitimate answer (no
overhead, no overlap, no GEMM roll-off); the others are limits the data must not push against
(an efficiency above 100% of peak). A fit whose optimum lies beyond a non-resting bound by more
than ``BOUND_TOLERANCE`` is refused: the data contradicts the hardware description.
"""

from dataclasses import dataclass
from typing import Literal

import numpy as np

from costmodel.params import EfficiencyParams

Transform = Literal["log", "linear"]
_FACTOR_3 = float(np.log(3.0))


@dataclass(frozen=True)
class ParamSpec:
    """One calibratable parameter: its bounds, transform (log or linear) and prior width."""

    name: str
    label: str
    transform: Transform
    lower: float
    upper: float
    resting_lower: bool = False
    resting_upper: bool = False
    unit: float = 1.0  # linear transform: one solver unit; log transform: unused
    # Width of the weak prior that keeps poorly constrained parameters near the base, in solver
    # units (default for log parameters: a factor of 3).
    prior_sigma: float | None = None

    @property
    def sigma(self) -> float:
        """Width of the prior around the base value, in solver units."""
        if self.prior_sigma is not None:
            return self.prior_sigma
        return _FACTOR_3 if self.transform == "log" else 1.0

    def to_solver(self, value: float) -> float:
        """Parameter value -> solver coordinate (ln for log parameters, value / unit otherwise)."""
        if self.transform == "log":
            return float(np.log(value))
        return value / self.unit

    def from_solver(self, coordinate: float) -> float:
        """Solver coordinate -> parameter value (inverse of ``to_solver``)."""
        if self.transform == "log":
            return float(np.exp(coordinate))
        return coordinate * self.unit

    def solver_bounds(self) -> tuple[float, float]:
        """(lower, upper) in solver coordinates."""
        return self.to_solver(self.lower), self.to_solver(self.upper)


# Per-collective scales multiply all-reduce's bus bandwidth and per-step latency (EfficiencyParams).
# Their prior is tighter than the link parameters' (a factor of 2 against 3): where the data
# cannot tell a link change from a per-op one, the link parameter takes it. Bandwidth scales are
# bounded at 1/50..50: beyond that an op is not "the same links" any more. A latency scale may
# rest at its (near-zero) lower bound: an op with no measurable fixed cost.
_FACTOR_2 = float(np.log(2.0))
_COLLECTIVE_OPS = {
    "all_gather": "all-gather",
    "reduce_scatter": "reduce-scatter",
    "all_to_all": "all-to-all",
    "p2p": "point-to-point",
}


def _collective_specs() -> list[ParamSpec]:
    specs = []
    for op, label in _COLLECTIVE_OPS.items():
        specs.append(
            ParamSpec(
                f"{op}_bandwidth_scale",
                f"{label} bandwidth (x all-reduce)",
                "log",
                0.02,
                50.0,
                prior_sigma=_FACTOR_2,
            )
        )
        specs.append(
            ParamSpec(
                f"{op}_latency_scale",
                f"{label} latency (x all-reduce)",
                "log",
                1e-3,
                1e3,
                resting_lower=True,
                prior_sigma=_FACTOR_2,
            )
        )
    return specs


PARAMETERS: dict[str, ParamSpec] = {
    spec.name: spec
    for spec in (
        # Efficiency can never exceed the peak: the upper bound is set per data set from the GPUs
        # involved (1 / their catalog gemm_efficiency), see ``bounds_for``.
        ParamSpec("gemm_efficiency_scale", "GEMM efficiency (x catalog)", "log", 0.02, 2.0),
        ParamSpec("gemm_half_dim", "GEMM roll-off size", "log", 1.0, 16384.0, resting_lower=True),
        # Against the 16-bit efficiency: only GEMMs (or steps) of that datatype move them.
        ParamSpec("gemm_fp8_scale", "FP8 GEMM efficiency (x 16-bit)", "log", 0.1, 10.0),
        ParamSpec("gemm_fp32_scale", "FP32/TF32 GEMM efficiency (x 16-bit)", "log", 0.02, 10.0),
        ParamSpec("attention_efficiency", "fused attention efficiency", "log", 0.005, 1.0),
        ParamSpec("memory_bound_efficiency", "memory-bound kernel efficiency", "log", 0.005, 1.0),
        # NVLink SHARP (NVLS) lets all-reduce bus bandwidth exceed the link rate; EfficiencyParams
        # caps these at 1.5 and 1.2 for that reason.
        ParamSpec("intra_node_efficiency", "intra-node link efficiency", "log", 0.005, 1.5),
        ParamSpec("inter_node_efficiency", "inter-node link efficiency", "log", 0.005, 1.2),
        ParamSpec(
            "intra_node_latency_us", "intra-node latency (us)", "log", 0.05, 1e5, resting_lower=True
        ),
        ParamSpec(
            "inter_node_latency_us", "inter-node latency (us)", "log", 0.05, 1e5, resting_lower=True
        ),
        *_collective_specs(),
        ParamSpec(
            "grad_reduce_overlap",
            "DP overlap with backward",
            "linear",
            0.0,
            1.0,
            resting_lower=True,
            resting_upper=True,
            prior_sigma=0.5,
        ),
        ParamSpec(
            "overlap_interference",
            "overlap interference",
            "linear",
            0.0,
            1.0,
            resting_lower=True,
            resting_upper=True,
            prior_sigma=0.5,
        ),
        ParamSpec(
            "tp_comm_overlap_fraction",
            "TP comm hidden",
            "linear",
            0.0,
            1.0,
            resting_lower=True,
            resting_upper=True,
            prior_sigma=0.5,
        ),
        ParamSpec("host_op_overhead_us", "host time per kernel (us)", "log", 0.1, 10_000.0),
        ParamSpec(
            "per_microbatch_overhead_s",
            "overhead per micro-batch (s)",
            "linear",
            0.0,
            10.0,
            resting_lower=True,
            unit=1e-3,
            prior_sigma=100.0,
        ),
        ParamSpec(
            "per_step_overhead_s",
            "overhead per step (s)",
            "linear",
            0.0,
            1000.0,
            resting_lower=True,
            unit=1e-2,
            prior_sigma=100.0,
        ),
        ParamSpec(
            "framework_memory_gib",
            "framework memory (GiB)",
            "linear",
            0.0,
            1000.0,
            resting_lower=True,
            prior_sigma=10.0,
        ),
        ParamSpec("cpu_adam_GBps", "CPU Adam bandwidth (GB/s)", "log", 0.1, 10_000.0),
        ParamSpec("pcie_GBps", "host-device copy bandwidth (GB/s)", "log", 0.1, 10_000.0),
    )
}
DEFAULT_FIT = tuple(PARAMETERS)
# A fit may lie this far beyond a non-resting bound (solver units: log for ratios, so 5%) before
# it is refused as unphysical.
BOUND_TOLERANCE = 0.05


def check_names(names: tuple[str, ...]) -> None:
    """Raise ``ValueError`` listing the calibratable parameters if a name is not one."""
    unknown = [name for name in names if name not in PARAMETERS]
    if unknown:
        raise ValueError(
            f"cannot calibrate {', '.join(unknown)}; calibratable parameters: "
            + ", ".join(PARAMETERS)
        )


def start_value(spec: ParamSpec, base: EfficiencyParams) -> float:
    """The base value, moved inside the solver's domain (log parameters must be positive)."""
    value = float(getattr(base, spec.name))
    return min(max(value, spec.lower), spec.upper)
