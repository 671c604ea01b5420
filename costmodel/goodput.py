"""Goodput: the share of wall time spent on training steps that are kept.

A synchronous job stops whenever one of its nodes fails; it then restarts (requeue, init, a
replacement node if the failed one is gone and no hot spare is free), loads its last durable
checkpoint and redoes the steps since. Checkpoints themselves stall training. With exponential
failures of mean time ``M`` (MTBF), checkpoint stall ``delta``, restart ``R`` and ``tau`` of
compute between checkpoints, Daly (2006, "A higher order estimate of the optimum checkpoint
interval for restart dumps", FGCS 22, eq. 13) gives the expected wall time of one segment:

    T(tau) = M e^{R/M} (e^{(tau + delta)/M} - 1)

and goodput is tau / T(tau). The interval that minimizes T(tau) / tau solves
e^{(tau+delta)/M} (1 - tau/M) = 1; Young's (1974) first-order tau = sqrt(2 delta M) and Daly's
higher-order refinement, tau = sqrt(2 delta M) [1 + sqrt(delta / 2M) / 3 + delta / 18M] - delta
(delta < 2M; else tau = M), start a few Newton steps that land on it exactly.

An asynchronous save stalls only for the device-to-host copy, but its checkpoint is durable
only after the background write (``lag``): a failure in that window falls back one checkpoint,
which costs ``lag`` more lost work on average (priced as part of R), and the next save cannot
start before the last is written (tau + delta >= lag). Planned interruptions (a checkpoint is
written just before) cost a restart each.

Every function works on numpy arrays: the scalar estimate and the vectorized search price
goodput with the same code; per-plan arrays have shape ``(n_plans,)``.

See README.md, 'Goodput: failures, checkpoints and restarts'.
"""

from dataclasses import dataclass

import numpy as np

from costmodel.specs import CheckpointSpec, GoodputEstimate, LostTime, ReliabilitySpec

SECONDS_PER_DAY = 86_400.0
GB = 1e9
GIB = float(1024**3)
STRATEGY_CODES = {"sync": 0, "async": 1, "in_memory": 2}
STRATEGY_NAMES = {code: name for name, code in STRATEGY_CODES.items()}
_MAX_EXPONENT = 700.0  # e^700 ~ 1e304: keeps a hopeless plan's goodput tiny, not NaN
_NEWTON_STEPS = 5  # from Daly's estimate: 1e-10 relative for every delta / M


@dataclass
class GoodputInputs:
    """Per plan (arrays of one length, or scalars that broadcast)."""

    step_time_s: np.ndarray
    job_nodes: np.ndarray  # nodes the plan's GPUs occupy
    idle_nodes: np.ndarray  # nodes of its group it leaves idle (the hot-spare pool)
    gpus_per_node: float
    write_gib_per_gpu: np.ndarray  # largest share of the unique checkpoint one GPU writes
    load_gib_per_gpu: np.ndarray  # largest state one GPU holds and reloads
    total_gib: np.ndarray  # the whole checkpoint
    inter_node_GBps_per_gpu: np.ndarray  # scale-out link (in-memory copies go to peers)


def young_interval_s(delta_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """Young (1974): tau = sqrt(2 delta M), first order in delta / M."""
    return np.sqrt(2.0 * delta_s * mtbf_s)


def daly_interval_s(delta_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """Daly (2006) eq. 37: the higher-order estimate, M when delta >= 2M."""
    ratio = delta_s / mtbf_s
    estimate = young_interval_s(delta_s, mtbf_s) * (
        1.0 + np.sqrt(ratio / 2.0) / 3.0 + ratio / 18.0
    ) - np.asarray(delta_s)
    return np.where(ratio < 2.0, np.maximum(estimate, 0.0), mtbf_s)


def optimal_interval_s(delta_s: np.ndarray, mtbf_s: np.ndarray) -> np.ndarray:
    """The tau minimizing Daly's T(tau) / tau exactly: Newton on ln(1 - x) + x + d = 0
    (x = tau / M, d = delta / M), started from Daly's higher-order estimate and kept within
    the root's bounds 1 - e^-d <= x <= 1 - e^-(1+d) (h is concave: from the right, Newton
    converges monotonically)."""
    # Past d = 30 the root is 1 - e^-31 (tau = M) to double precision: solve there instead.
    d = np.minimum(np.asarray(delta_s, dtype=float) / mtbf_s, 30.0)
    lower = np.maximum(-np.expm1(-d), 1e-300)
    upper = -np.expm1(-1.0 - d)
    x = np.clip(daly_interval_s(delta_s, mtbf_s) / mtbf_s, lower, upper)
    for _ in range(_NEWTON_STEPS):
        value = np.log1p(-x) + x + d
        slope = -x / (1.0 - x)
        x = np.clip(x - value / np.minimum(slope, -1e-300), lower, upper)
    return x * mtbf_s


def segment_wall_s(
    interval_s: np.ndarray, delta_s: np.ndarray, restart_s: np.ndarray, mtbf_s: np.ndarray
) -> np.ndarray:
    """Daly (2006) eq. 13: expected wall time to complete ``interval_s`` of compute and its
    checkpoint under exponential failures (MTBF ``mtbf_s``), ``restart_s`` per failure."""
    segment = np.minimum((interval_s + delta_s) / mtbf_s, _MAX_EXPONENT)
    exponent = np.asarray(restart_s) / mtbf_s + np.log(np.expm1(segment))
    return mtbf_s * np.exp(np.minimum(exponent, _MAX_EXPONENT))


def _poisson_at_least(count: np.ndarray, mean: np.ndarray) -> np.ndarray:
    """P(N >= count) for N ~ Poisson(mean), count a non-negative integer array; computed once
    per distinct (count, mean) pair (a search's plans share a few job sizes)."""
    count, mean = np.broadcast_arrays(np.asarray(count, dtype=np.int64), np.asarray(mean, float))
    means, mean_id = np.unique(mean.ravel(), return_inverse=True)
    key = mean_id.reshape(-1) * (int(count.max(initial=0)) + 1) + count.ravel()
    keys, inverse = np.unique(key, return_inverse=True)
    stride = int(count.max(initial=0)) + 1
    tails = _poisson_tail(keys % stride, means[keys // stride])
    return tails[inverse.reshape(-1)].reshape(count.shape)


def _poisson_tail(count: np.ndarray, mean: np.ndarray) -> np.ndarray:
    mean = np.asarray(mean, dtype=float)
    # Past mean + 12 sd + 40 the Poisson tail is below 1e-20: more spares change nothing.
    reach = float(np.max(mean, initial=0.0))
    bound = int(np.ceil(reach + 12.0 * np.sqrt(reach) + 40.0))
    count = np.minimum(np.asarray(count, dtype=np.int64), bound)
    top = int(count.max()) if count.size else 0
    term = np.exp(-mean) * np.ones_like(count, dtype=float)
    below = np.zeros_like(term)
    for k in range(top):
        below = below + np.where(k < count, term, 0.0)
        term = term * mean / (k + 1)
    return np.clip(1.0 - below, 0.0, 1.0)


def price_goodput(
    inputs: GoodputInputs, reliability: ReliabilitySpec, checkpoint: CheckpointSpec
) -> dict[str, np.ndarray]:
    """Goodput and its parts for every plan of ``inputs`` (see the module docstring).

    Returns arrays of shape ``(n_plans,)``: goodput, strategy (STRATEGY_CODES), mtbf_s,
    write_s, exposed_s, load_s, interval_s, restart_s, lost_work_per_failure_s,
    host_gib_per_node, hot_spares, the lost shares of wall time (lost_writes, lost_recomputed,
    lost_restarts) and, per second of fault-free compute, unplanned_per_compute_s and
    planned_per_compute_s.
    """
    gpn = float(inputs.gpus_per_node)
    nodes = np.maximum(np.asarray(inputs.job_nodes, dtype=float), 1.0)
    write_node_B = np.asarray(inputs.write_gib_per_gpu) * GIB * gpn
    load_node_B = np.asarray(inputs.load_gib_per_gpu) * GIB * gpn
    write_Bps = reliability.checkpoint_write_GBps_per_node * GB
    read_Bps = reliability.checkpoint_read_GBps_per_node * GB
    copy_Bps = reliability.host_copy_GBps_per_gpu * GB
    net_Bps = np.asarray(inputs.inter_node_GBps_per_gpu) * GB * gpn
    host_B = reliability.host_memory_gib_per_node * GIB

    sync_write_s = write_node_B / write_Bps
    copy_s = np.asarray(inputs.write_gib_per_gpu) * GIB / copy_Bps
    storage_load_s = load_node_B / read_Bps
    copies = checkpoint.in_memory_copies
    # What each strategy costs, and whether this plan can run it.
    wanted = STRATEGY_CODES[checkpoint.strategy]
    async_host_B = write_node_B  # one pinned staging buffer of the node's shards
    memory_host_B = write_node_B * (1 + copies)  # own shards + peers' copies
    runs = {
        0: np.ones_like(nodes, dtype=bool),
        1: async_host_B <= host_B,
        2: (memory_host_B <= host_B) & (nodes >= copies + 1),
    }[wanted]
    strategy = np.where(runs, wanted, 0)
    exposed_by = {0: sync_write_s, 1: copy_s, 2: copy_s}
    lag_by = {0: np.zeros_like(sync_write_s), 1: sync_write_s, 2: write_node_B * copies / net_Bps}
    # In memory: the replacement node fetches its shards from a peer, the others from DRAM.
    load_by = {
        0: storage_load_s,
        1: storage_load_s,
        2: np.maximum(load_node_B / net_Bps, np.asarray(inputs.load_gib_per_gpu) * GIB / copy_Bps),
    }
    host_by = {0: np.zeros_like(sync_write_s), 1: async_host_B, 2: memory_host_B}
    exposed = np.where(strategy == wanted, exposed_by[wanted], sync_write_s)
    lag = np.where(strategy == wanted, lag_by[wanted], 0.0)
    load = np.where(strategy == wanted, load_by[wanted], storage_load_s)
    host_gib = np.where(strategy == wanted, host_by[wanted], 0.0) / GIB

    # Failure rates of the job: every node of it can stop it.
    unplanned_per_s = nodes * reliability.unplanned_per_node_day / SECONDS_PER_DAY
    planned_per_s = nodes * reliability.planned_interruptions_per_node_day / SECONDS_PER_DAY
    replace_per_s = nodes * reliability.replacement_per_node_day / SECONDS_PER_DAY
    mtbf = np.where(unplanned_per_s > 0, 1.0 / np.maximum(unplanned_per_s, 1e-300), np.inf)
    mtbf_model = np.minimum(mtbf, 1e30)  # finite stand-in where nothing fails

    # Hot spares: a replaced node waits only when every spare is out for repair
    # (nodes in repair ~ Poisson(replacement rate x repair time), an M/G/inf queue).
    idle = np.maximum(np.asarray(inputs.idle_nodes, dtype=np.int64), 0)
    wanted_spares = idle if checkpoint.hot_spare_nodes is None else checkpoint.hot_spare_nodes
    spares = np.minimum(wanted_spares, idle)
    pool_empty = _poisson_at_least(spares, replace_per_s * reliability.node_repair_s)
    replace_share = np.where(
        unplanned_per_s > 0, replace_per_s / np.maximum(unplanned_per_s, 1e-300), 0.0
    )
    restart = (
        reliability.restart_s + load + replace_share * pool_empty * reliability.node_replacement_s
    )

    floor = np.maximum(np.asarray(inputs.step_time_s, dtype=float), lag - exposed)
    if checkpoint.interval_s is not None:
        interval = np.maximum(np.full_like(floor, checkpoint.interval_s), floor)
    else:
        interval = np.maximum(optimal_interval_s(exposed, mtbf_model), floor)
    wall = segment_wall_s(interval, exposed, restart + lag, mtbf_model)
    unplanned_goodput = interval / wall
    planned_restart = reliability.restart_s + load
    planned_share = np.minimum(planned_per_s * planned_restart, 1.0 - 1e-12)
    goodput = np.clip(unplanned_goodput * (1.0 - planned_share), 1e-300, 1.0)

    # Breakdown per second of wall time: writes of the kept segments, restarts, the rest redone.
    writes = goodput * exposed / interval
    unplanned_failures = (1.0 - planned_share) / mtbf_model  # per wall second
    restarts = np.minimum(unplanned_failures * restart + planned_share, 1.0 - goodput - writes)
    restarts = np.maximum(restarts, 0.0)
    recomputed = np.maximum(1.0 - goodput - writes - restarts, 0.0)
    per_compute_s = 1.0 / goodput  # wall seconds per second of kept compute
    return {
        "goodput": goodput,
        "strategy": strategy,
        "mtbf_s": mtbf,
        "write_s": np.where(strategy == 2, lag, sync_write_s),
        "exposed_s": exposed,
        "load_s": load,
        "interval_s": interval,
        "restart_s": restart,
        "lost_work_per_failure_s": np.where(
            unplanned_failures > 0, recomputed / np.maximum(unplanned_failures, 1e-300), 0.0
        ),
        "host_gib_per_node": host_gib,
        "hot_spares": spares,
        "lost_writes": writes,
        "lost_recomputed": recomputed,
        "lost_restarts": restarts,
        "unplanned_per_compute_s": unplanned_failures * per_compute_s,
        "planned_per_compute_s": planned_per_s * per_compute_s,
        "total_gib": np.asarray(inputs.total_gib, dtype=float) * np.ones_like(goodput),
    }


def finish_arrays(
    arrays: dict[str, np.ndarray],
    parts: dict[str, np.ndarray],
    train_tokens: float | None,
) -> None:
    """Add the goodput-priced figures to ``arrays`` (tokens_per_s and usd_per_hour in it):
    goodput, effective_tokens_per_s, checkpoint_interval_s, time_to_train_s (NaN without
    ``train_tokens``), usd_to_train, usd_per_million_effective_tokens, interruptions, and
    every part of ``price_goodput`` as ``goodput_<part>``."""
    goodput = parts["goodput"]
    effective = arrays["tokens_per_s"] * goodput
    tokens = train_tokens if train_tokens is not None else np.nan
    compute_s = tokens / arrays["tokens_per_s"]
    arrays["goodput"] = goodput
    arrays["effective_tokens_per_s"] = effective
    arrays["checkpoint_interval_s"] = parts["interval_s"]
    arrays["time_to_train_s"] = tokens / effective
    arrays["usd_to_train"] = arrays["usd_per_hour"] * arrays["time_to_train_s"] / 3600.0
    arrays["usd_per_million_effective_tokens"] = arrays["usd_per_hour"] / 3600.0 / effective * 1e6
    arrays["interruptions"] = compute_s * (
        parts["unplanned_per_compute_s"] + parts["planned_per_compute_s"]
    )
    for name, values in parts.items():
        arrays[f"goodput_{name}"] = values


def homogeneous_goodput(
    arrays: dict[str, np.ndarray],
    gpus_per_node: int,
    reliability: ReliabilitySpec,
    checkpoint: CheckpointSpec,
    train_tokens: float | None,
) -> None:
    """Price goodput for the plans of ``evaluate_homogeneous``'s ``arrays`` (in place)."""
    parts = price_goodput(
        GoodputInputs(
            step_time_s=arrays["step_time_s"],
            job_nodes=arrays["job_nodes"],
            idle_nodes=arrays["idle_nodes"],
            gpus_per_node=gpus_per_node,
            write_gib_per_gpu=arrays["checkpoint_gib_per_gpu"],
            load_gib_per_gpu=arrays["checkpoint_load_gib_per_gpu"],
            total_gib=arrays["checkpoint_total_gib"],
            inter_node_GBps_per_gpu=arrays["inter_node_GBps"],
        ),
        reliability,
        checkpoint,
    )
    finish_arrays(arrays, parts, train_tokens)


def _finite(value: float) -> float | None:
    return float(value) if np.isfinite(value) else None


def goodput_estimate(arrays: dict[str, np.ndarray], index: int) -> GoodputEstimate:
    """The ``GoodputEstimate`` of plan ``index`` of ``finish_arrays``' output."""

    def part(name: str) -> float:
        return float(np.asarray(arrays[f"goodput_{name}"]).reshape(-1)[index])

    def value(name: str) -> float:
        return float(np.asarray(arrays[name]).reshape(-1)[index])

    shares = LostTime(
        checkpoint_writes=part("lost_writes"),
        recomputed=part("lost_recomputed"),
        restarts=part("lost_restarts"),
    )
    wall_s = value("time_to_train_s")
    mtbf = _finite(part("mtbf_s"))
    interruptions = _finite(value("interruptions"))
    rates = part("unplanned_per_compute_s") + part("planned_per_compute_s")
    unplanned = (
        interruptions * part("unplanned_per_compute_s") / rates
        if interruptions is not None and rates > 0
        else interruptions
    )
    return GoodputEstimate(
        goodput=value("goodput"),
        checkpoint_strategy=STRATEGY_NAMES[int(part("strategy"))],
        job_nodes=int(value("job_nodes")),
        hot_spare_nodes=int(part("hot_spares")),
        mtbf_s=mtbf,
        checkpoint_gib_per_gpu=value("checkpoint_gib_per_gpu"),
        checkpoint_total_gib=value("checkpoint_total_gib"),
        checkpoint_load_gib_per_gpu=value("checkpoint_load_gib_per_gpu"),
        checkpoint_write_s=part("write_s"),
        checkpoint_exposed_s=part("exposed_s"),
        checkpoint_load_s=part("load_s"),
        checkpoint_interval_s=part("interval_s") if mtbf is not None else None,
        restart_s=part("restart_s"),
        lost_work_per_failure_s=part("lost_work_per_failure_s"),
        host_memory_gib_per_node=part("host_gib_per_node"),
        interruptions=interruptions,
        unplanned_interruptions=unplanned,
        lost_share=shares,
        lost_time_s=(
            LostTime(
                checkpoint_writes=shares.checkpoint_writes * wall_s,
                recomputed=shares.recomputed * wall_s,
                restarts=shares.restarts * wall_s,
            )
            if np.isfinite(wall_s)
            else None
        ),
    )


def goodput_warnings(estimate: GoodputEstimate, wanted: str) -> list[str]:
    """Say when the checkpoint strategy asked for cannot run and sync was priced instead."""
    if estimate.checkpoint_strategy == wanted:
        return []
    why = "host memory is short" if wanted == "async" else "host memory or peer nodes are short"
    return [f"checkpoint strategy {wanted} cannot run ({why}): goodput is priced for sync saves"]


def combined_reliability(groups: list[tuple[ReliabilitySpec, int]]) -> ReliabilitySpec:
    """One reliability for a job spread over several node groups (``(spec, job nodes)``):
    failure rates weighted by the job's nodes in each group (a job fails when any node does),
    the slowest storage and host copy, the smallest host memory and the longest waits."""
    nodes = sum(count for _, count in groups) or 1
    rates = {
        name: sum(getattr(spec, name) * count for spec, count in groups) / nodes
        for name in ReliabilitySpec.model_fields
        if name.endswith("_per_node_day")
    }
    slowest = {
        name: min(getattr(spec, name) for spec, _ in groups)
        for name in (
            "checkpoint_write_GBps_per_node",
            "checkpoint_read_GBps_per_node",
            "host_memory_gib_per_node",
            "host_copy_GBps_per_gpu",
        )
    }
    longest = {
        name: max(getattr(spec, name) for spec, _ in groups)
        for name in ("restart_s", "node_replacement_s", "node_repair_s")
    }
    return ReliabilitySpec(**rates, **slowest, **longest)
