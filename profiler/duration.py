"""How long a sweep will take on this machine, predicted from a profile already measured here:
each measurement lasts its warm-up plus ``max(min_repeats x kernel, min_total_s)`` (capped by
``max_repeats``), where a kernel's time comes from the rates the profile measured. Used to tell
a user what ``--full`` costs before they start it."""

from costmodel.observations import Profile
from profiler.sweeps import Sweep
from profiler.timing import TimingPolicy


def _measurement_s(kernel_s: float, policy: TimingPolicy) -> float:
    timed = max(policy.min_repeats * kernel_s, policy.min_total_s)
    timed = min(timed, policy.max_repeats * kernel_s) if kernel_s > 0 else timed
    return (policy.warmup + 1) * kernel_s + max(timed, policy.min_run_s * policy.min_repeats)


def _best_rate(values: list[float], fallback: float) -> float:
    positive = [value for value in values if value > 0]
    return max(positive) if positive else fallback


def predicted_duration_s(profile: Profile, sweep: Sweep, ranks: int) -> float:
    """Seconds ``sweep`` takes on the machine ``profile`` was measured on (compute families
    times their rounds, then the collectives)."""
    gemm_rate = {
        dtype: _best_rate([s.flops / s.median_s for s in profile.gemm if s.dtype == dtype], 0.0)
        for dtype in {s.dtype for s in profile.gemm}
    }
    fallback_rate = min(gemm_rate.values(), default=1e9) or 1e9
    bandwidth = _best_rate([s.bytes / s.median_s for s in profile.memory], 1e9)
    policy = sweep.policy
    per_round = TimingPolicy(
        **{**policy.__dict__, "min_total_s": policy.min_total_s / sweep.compute_rounds}
    )
    total = 0.0
    for dtype in sweep.dtypes:
        rate = gemm_rate.get(dtype, fallback_rate)
        for m, n, k in sweep.gemm_shapes:
            total += _measurement_s(2 * m * n * k / rate, per_round)
    total += 6 * _measurement_s(3 * sweep.memory_mib * 2**20 / bandwidth, per_round)
    attention_rate = _best_rate([s.full_flops / s.median_s for s in profile.attention], 1e9)
    for batch, heads, seq, head_dim in sweep.attention_shapes:
        flops = 4 * batch * heads * seq * seq * head_dim
        total += _measurement_s(flops / attention_rate, per_round)  # forward
        total += _measurement_s(2.5 * flops / attention_rate, per_round)  # backward
    total *= sweep.compute_rounds
    return total + _collectives_s(profile, sweep, ranks)


def _collectives_s(profile: Profile, sweep: Sweep, ranks: int) -> float:
    if ranks < 2 or not profile.collectives:
        return 0.0
    policy = sweep.collective_policy or sweep.policy
    busbw_Bps = _best_rate([s.busbw_GBps * 1e9 for s in profile.collectives], 1e9)
    latency_s = min(s.median_s for s in profile.collectives)
    ops = len({s.op for s in profile.collectives})
    burst_s = float(profile.settings.get("collectives_after_compute_s", 0.0) or 0.0)
    per_op = sum(
        _measurement_s(latency_s + size / busbw_Bps + burst_s, policy)
        for size in sweep.collective_sizes_B
    )
    return ops * per_op
