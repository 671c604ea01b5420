"""The built-in per-GPU defaults: ``fit_calibration`` on each GPU's published micro-benchmarks.

``scripts/build_default_profiles.py`` turns ``validation/microbench.csv`` into one ``Profile``
per catalog GPU (``costmodel/defaults/profiles/<GPU>.json``) and calls ``fit_default_params`` on
each; ``costmodel.gpu_defaults`` reads the resulting ``costmodel/defaults/params/<GPU>.json``.
The procedure is the one users calibrate with, with these choices of its own:

- Only the parameters the GPU's data identifies are fitted (``identified_params``): a GPU with
  one GEMM ceiling gets a GEMM efficiency and nothing else, and a single figure may determine
  its parameter exactly (``spare_points=0``: nothing is left to cross-validate such a point).
- Sustained clocks. Training holds a GPU at its power limit for hours, where the clocks settle
  below the boost clocks a short benchmark runs at (A100: ~1.3 of 1.41 GHz under its 400 W cap,
  ``SUSTAINED_CLOCK_FACTOR``; see costmodel/hardware.py). Compute-bound samples marked
  ``sustained=False`` (tens of iterations: MAMF GEMM ceilings, the FlashAttention benchmark) are
  read at that clock -- their time divided by the factor -- before fitting; samples run for
  seconds to minutes (Azure's 10,000-warm-up cuBLASLt sweep) are taken as measured. Memory and
  link bandwidths do not follow the SM clock and are taken as measured.
- MAMF figures are ``ceiling`` samples (the fastest shape of a shape search): calibration reads
  them as the large-GEMM efficiency itself, without the size roll-off.
- GEMMs timed under ``SHORT_KERNEL_S`` stay in the profile but out of the fit (``_timed_long``).
- The fit runs in stages, one kind of data each (``STAGES``).

So the shipped GEMM efficiency is the large-GEMM efficiency at sustained clocks: for a GPU whose
16-bit GEMM figure is a MAMF ceiling, its catalog ``gemm_efficiency`` times the shipped
``gemm_efficiency_scale`` equals MAMF / peak x ``SUSTAINED_CLOCK_FACTOR`` (the scale is shipped
only where that differs from the catalog by more than 1%: A100, H100 and B200 confirm theirs).
"""

import math
from collections.abc import Callable
from typing import Any

from costmodel.calibration.fit import fit_calibration
from costmodel.calibration.points import ELEMENTWISE_KERNELS
from costmodel.calibration.result import CalibrationResult, SourceError
from costmodel.observations import Profile
from costmodel.params import DEFAULT_PARAMS

# Sustained / boost clock under the power limit (costmodel/hardware.py A100 comment: 1.3 of
# 1.41 GHz; its H100 comment's ~700-750 TF sustained against stas00's 794.5 TF MAMF burst
# agrees). One factor for every GPU: the data holds no per-GPU sustained-clock measurement. The
# Hopper FP8 rows hint it is milder there: Azure's 32768^3 FP8 GEMM, minutes under load, runs at
# 0.985 (H100) and 0.94 (H200, 16384^3) of stas00's short-burst FP8 ceilings.
SUSTAINED_CLOCK_FACTOR = 0.92
# Collectives at or below this size are latency-bound: they identify the per-step latency.
LATENCY_BOUND_B = 2**20
# A GEMM sweep over this many distinct sizes (of one datatype) identifies the roll-off.
ROLLOFF_SIZES = 3
# GEMMs timed below this are fixed-cost bound (see _timed_long).
SHORT_KERNEL_S = 20e-6
# Shipped values are rounded to this many significant digits.
DIGITS = 4
# Fit settings of the built-in defaults (fit_calibration's, spelled out: the tests re-run them).
FIT_OPTIONS: dict[str, Any] = {"k_folds": 5, "seed": 0, "spare_points": 0}


def identified_params(profile: Profile) -> tuple[str, ...]:
    """The parameters this profile's kinds of data identify, in ``PARAMETERS`` order."""
    names: list[str] = []
    dtypes = {sample.dtype for sample in profile.gemm}
    sixteen_bit = bool(dtypes & {"bf16", "fp16"})
    if sixteen_bit:
        names.append("gemm_efficiency_scale")
    sizes = {
        (sample.dtype, min(sample.m, math.isqrt(sample.n * sample.k)))
        for sample in profile.gemm
        if not sample.ceiling  # a ceiling is priced without roll-off: it says nothing of it
    }
    if any(sum(1 for d, _ in sizes if d == dtype) >= ROLLOFF_SIZES for dtype in dtypes):
        names.append("gemm_half_dim")
    if "fp8" in dtypes:
        # Without a 16-bit GEMM the FP8 figures set FP8 against the catalog's 16-bit efficiency.
        names.append("gemm_fp8_scale")
    if profile.attention:
        names.append("attention_efficiency")
    if any(sample.kernel in ELEMENTWISE_KERNELS for sample in profile.memory):
        names.append("memory_bound_efficiency")
    for inside, link, latency in (
        (True, "intra_node_efficiency", "intra_node_latency_us"),
        (False, "inter_node_efficiency", "inter_node_latency_us"),
    ):
        samples = [s for s in profile.collectives if (s.ranks_per_node >= s.ranks) == inside]
        if samples:
            names.append(link)
        if any(s.size_B <= LATENCY_BOUND_B for s in samples):
            names.append(latency)
    return tuple(names)


def at_sustained_clocks(profile: Profile) -> Profile:
    """The profile with its short-burst compute samples read at the sustained clock."""

    def slowed(samples: list[Any]) -> list[Any]:
        return [
            sample.model_copy(update={"median_s": sample.median_s / SUSTAINED_CLOCK_FACTOR})
            if sample.sustained is False
            else sample
            for sample in samples
        ]

    return profile.model_copy(
        update={"gemm": slowed(profile.gemm), "attention": slowed(profile.attention)}
    )


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


def _timed_long(sample: Any) -> bool:
    """GEMMs under ``SHORT_KERNEL_S`` are left out: their time is mostly the fixed cost every
    kernel pays (launch gap, prologue, epilogue, ~5-7 us on H100: Azure's 1024^3 FP8 GEMM takes
    7.8 us where its FLOPs need 1.6 us at the large-GEMM rate, 2048^3 17 us against 12), which
    the model charges per kernel (``host_op_overhead_us``), not through the size roll-off; kept,
    they drag ``gemm_half_dim`` to where it mispredicts every larger GEMM (cross-validation
    refuses that fit)."""
    return bool(sample.median_s >= SHORT_KERNEL_S)


# The fit runs in stages, each on one kind of data: the parameters of different kinds are
# disjoint, so a joint fit would give the same values, but cross-validating each kind alone
# keeps a kind with one figure (attention, a GEMM ceiling) from vetoing a kind with many. Order
# matters where one kind's pricing uses another's parameters: FP8 GEMMs are priced against the
# 16-bit efficiency, multi-node collectives over the intra-node links too.
Select = Callable[[Any], bool]
STAGES: tuple[tuple[str, str, Select, Select], ...] = (
    # (label, profile list, which samples belong to the stage, which of them are fitted)
    ("16-bit GEMMs", "gemm", lambda s: s.dtype in ("bf16", "fp16"), _timed_long),
    ("FP8 GEMMs", "gemm", lambda s: s.dtype == "fp8", _timed_long),
    ("fused attention", "attention", lambda s: True, lambda s: True),
    ("memory-bound kernels", "memory", lambda s: s.kernel in ELEMENTWISE_KERNELS, lambda s: True),
    (
        "intra-node collectives",
        "collectives",
        lambda s: s.ranks_per_node >= s.ranks,
        lambda s: True,
    ),
    ("inter-node collectives", "collectives", lambda s: s.ranks_per_node < s.ranks, lambda s: True),
)
_KINDS = ("gemm", "memory", "attention", "collectives")


def _stage_samples(profile: Profile, kind: str, belongs: Select, fitted: Select) -> list[Any]:
    return [sample for sample in getattr(profile, kind) if belongs(sample) and fitted(sample)]


def _stage_profile(profile: Profile, kind: str, belongs: Select, fitted: Select) -> Profile | None:
    samples = _stage_samples(profile, kind, belongs, fitted)
    if not samples:
        return None
    update: dict[str, Any] = {name: [] for name in _KINDS}
    update[kind] = samples
    return profile.model_copy(update=update)


def fit_stages(profile: Profile) -> list[tuple[str, CalibrationResult]]:
    """Each stage's calibration result, each starting from the stages before it."""
    sustained = at_sustained_clocks(profile)
    base = DEFAULT_PARAMS
    results: list[tuple[str, CalibrationResult]] = []
    for label, kind, belongs, fitted in STAGES:
        part = _stage_profile(sustained, kind, belongs, fitted)
        names = tuple(
            name
            for name in (identified_params(part) if part is not None else ())
            if not any(name in result.fitted for _, result in results)
        )
        if part is None or not names:
            continue
        result = fit_calibration([part], base=base, params=names, **FIT_OPTIONS)
        base = base.model_copy(update={c.name: c.after for c in result.moved})
        results.append((label, result))
    return results


def _mean(errors: list[SourceError], attribute: str) -> float:
    """Over sources, each once (as the fit weighs them)."""
    return _rounded(sum(getattr(error, attribute) for error in errors) / len(errors))


def _errors(errors: list[SourceError]) -> dict[str, Any]:
    if not errors:
        return {}
    return {
        "mape": _mean(errors, "mape_after"),
        "mape_before": _mean(errors, "mape_before"),
        "log_error": _mean(errors, "log_error_after"),
    }


def fit_default_params(profile: Profile, *, profile_file: str) -> dict[str, Any]:
    """The params document of one GPU: the fitted fields that moved from ``DEFAULT_PARAMS``,
    and where they come from (per stage: points, parameters, error before and after)."""
    stages = fit_stages(profile)
    left_out = {
        label: len(_stage_samples(profile, kind, belongs, lambda s: True))
        - len(_stage_samples(profile, kind, belongs, fitted))
        for label, kind, belongs, fitted in STAGES
    }
    moved = {change.name: _rounded(change.after) for _, result in stages for change in result.moved}
    sources = [error for _, result in stages for error in result.in_sample]
    return {
        "gpu": profile.gpu.name,
        "params": moved,
        "provenance": {
            "profile": profile_file,
            "points": sum(result.points for _, result in stages),
            # In-sample, each source (GEMM datatype, collective series...) once.
            "fit_error": _errors(sources),
            "sustained_clock_factor": SUSTAINED_CLOCK_FACTOR,
            "stages": [
                {
                    "data": label,
                    "points": result.points,
                    "left_out": left_out.get(label, 0),
                    "fitted": {change.name: _rounded(change.after) for change in result.changes},
                    "moved": [change.name for change in result.moved],
                    "not_identifiable": result.not_identifiable,
                    "fit_error": _errors(result.in_sample),
                    "held_out_error": _errors(result.held_out),
                    "by_source": [
                        {
                            "source": error.source,
                            "points": error.points,
                            "mape": _rounded(error.mape_after),
                            "mape_before": _rounded(error.mape_before),
                        }
                        for error in result.in_sample
                    ],
                    "warnings": result.warnings,
                }
                for label, result in stages
            ],
        },
    }
