"""Refuse measurements that cannot be trusted, before anything is fitted.

- Contradictions: the same experiment (same GEMM shape and dtype, same collective, size and
  topology, same plan) measured with times more than ``REPEAT_RATIO`` apart; or a collective
  that moved more data ``SERIES_RATIO`` times faster than a smaller message of the same series.
  A few such points among many micro-benchmarks are outliers the robust loss absorbs (reported
  as warnings); more than one and more than ``MAX_INCONSISTENT_SHARE`` of a source, or any
  contradicting training step, refuses the data.
- Physics: a GEMM faster than the GPU's peak, a kernel faster than its memory bandwidth, a
  collective whose bus bandwidth beats the links at their best efficiency. These mean the
  device description (GPU, topology) is wrong or the timing was broken.
- Unpriceable points: the cost model must give a finite, positive prediction for each.
"""

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from costmodel import comm
from costmodel.calibration.points import CAUSAL_SKIP, PointSet, attention_factor, node_group
from costmodel.calibration.space import PARAMETERS
from costmodel.hardware import peak_tflops
from costmodel.hardware_arrays import group_hardware
from costmodel.observations import Profile
from costmodel.params import EfficiencyParams

REPEAT_RATIO = 1.5
SERIES_RATIO = 2.0
MAX_INCONSISTENT_SHARE = 0.10
# Clocks above base and measurement jitter let a sample sit slightly above a nominal peak.
PEAK_SLACK = 1.05


class CalibrationError(ValueError):
    """Calibration refused its input or its result; the message is one line for users."""


def _examples(items: list[str], limit: int = 3) -> str:
    more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
    return "; ".join(items[:limit]) + more


def _fmt_time(seconds: float) -> str:
    return f"{seconds * 1e3:.3g} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.3g} us"


def check_consistency(points: PointSet) -> list[str]:
    """Raise on contradicting data; return warnings for tolerated outliers."""
    by_key: dict[str, list[int]] = defaultdict(list)
    for index, point in enumerate(points.points):
        by_key[point.key].append(index)
    bad_keys: dict[str, str] = {}
    for key, members in by_key.items():
        times = [points.points[i].measured for i in members]
        if len(times) > 1 and max(times) > REPEAT_RATIO * min(times):
            point = points.points[members[0]]
            bad_keys[key] = (
                f"{point.label} measured {_fmt_time(min(times))} and {_fmt_time(max(times))}"
            )
    series: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for key, members in by_key.items():
        point = points.points[members[0]]
        if point.series is not None:
            median = float(np.median([points.points[i].measured for i in members]))
            series[point.series].append((point.size, median, key))
    for entries in series.values():
        entries.sort()
        for position, (size, median, key) in enumerate(entries):
            larger = [m for s, m, _ in entries[position + 1 :] if s > size]
            if larger and median > SERIES_RATIO * min(larger):
                label = points.points[by_key[key][0]].label
                bad_keys.setdefault(
                    key,
                    f"{label} took {_fmt_time(median)}, longer than a larger message "
                    f"({_fmt_time(min(larger))})",
                )
    keys_by_source: dict[str, set[str]] = defaultdict(set)
    for point in points.points:
        keys_by_source[point.source].add(point.key)
    warnings = []
    for source, keys in sorted(keys_by_source.items()):
        bad = [bad_keys[key] for key in sorted(keys) if key in bad_keys]
        if not bad:
            continue
        is_step = next(iter(keys)).startswith(("step|", "memory-peak|"))
        if is_step or len(bad) > max(1.0, MAX_INCONSISTENT_SHARE * len(keys)):
            raise CalibrationError(
                f"contradicting samples in '{source}' ({len(bad)} of {len(keys)}): "
                f"{_examples(bad)}; re-measure or remove them"
            )
        warnings.append(f"'{source}': {len(bad)} outlier(s) down-weighted: {_examples(bad)}")
    return warnings


def check_physics(profiles: Sequence[Profile]) -> None:
    """Raise when a sample beats what the described hardware can do."""
    best = EfficiencyParams(
        intra_node_efficiency=PARAMETERS["intra_node_efficiency"].upper,
        inter_node_efficiency=PARAMETERS["inter_node_efficiency"].upper,
    )
    for profile in profiles:
        gpu = profile.gpu
        for sample in profile.gemm:
            peak = peak_tflops(gpu, sample.dtype) * 1e12
            if peak <= 0:
                raise CalibrationError(
                    f"profile '{profile.name}': {gpu.name} has no {sample.dtype} peak, but a "
                    f"{sample.dtype} GEMM was measured; describe the device's {sample.dtype} peak"
                )
            achieved = sample.flops / sample.median_s
            if achieved > PEAK_SLACK * peak:
                raise CalibrationError(
                    f"profile '{profile.name}': GEMM {sample.m}x{sample.n}x{sample.k} "
                    f"{sample.dtype} ran at {achieved / 1e12:.3g} TFLOP/s, above the "
                    f"{peak / 1e12:.3g} TFLOP/s peak of {gpu.name}: wrong GPU or broken timing"
                )
        for memory in profile.memory:
            rate = memory.bytes / memory.median_s
            if rate > PEAK_SLACK * gpu.hbm_GBps * 1e9:
                raise CalibrationError(
                    f"profile '{profile.name}': {memory.kernel} moved {rate / 1e9:.3g} GB/s, "
                    f"above the {gpu.hbm_GBps:.3g} GB/s memory bandwidth of {gpu.name}"
                )
        for attention in profile.attention:
            peak = peak_tflops(gpu, "bf16" if attention.dtype == "fp8" else attention.dtype) * 1e12
            # On the model's count: a causal kernel may reach CAUSAL_SKIP x peak on it.
            achieved = attention.full_flops / attention.median_s * attention_factor(attention)
            if peak <= 0 or achieved > CAUSAL_SKIP * PEAK_SLACK * peak:
                raise CalibrationError(
                    f"profile '{profile.name}': attention {attention.direction} ran at "
                    f"{achieved / 1e12:.3g} TFLOP/s on {gpu.name} whose {attention.dtype} peak is "
                    f"{peak / 1e12:.3g} TFLOP/s"
                )
        for collective in profile.collectives:
            hw = group_hardware(
                node_group(gpu, collective.ranks, collective.ranks_per_node), "bf16", best
            )
            local = min(collective.ranks_per_node, float(hw.gpus_per_node[0]))
            limit = float(
                comm.bus_bandwidth_Bps(collective.ranks, local, hw.intra_Bps[0], hw.inter_Bps[0])
            )
            if collective.op == "p2p":
                limit = float(hw.intra_Bps[0] if local >= 2 else hw.inter_Bps[0])
            if collective.busbw_GBps * 1e9 > PEAK_SLACK * limit:
                raise CalibrationError(
                    f"profile '{profile.name}': {collective.op} of {collective.size_B:.0f} B on "
                    f"{collective.ranks} ranks reached {collective.busbw_GBps:.3g} GB/s bus "
                    f"bandwidth, more than {gpu.name}'s links allow ({limit / 1e9:.3g} GB/s); "
                    "check the GPU and ranks_per_node"
                )


def check_priceable(points: PointSet, predicted: np.ndarray) -> None:
    """Raise ``CalibrationError`` naming the points the cost model prices as non-finite or <= 0.

    ``predicted``: seconds (or GiB) per point of ``points``, shape ``(n_points,)``.
    """
    bad = [
        points.points[i].label for i in np.flatnonzero(~np.isfinite(predicted) | (predicted <= 0))
    ]
    if bad:
        raise CalibrationError(f"the cost model cannot price: {_examples(bad)}")
