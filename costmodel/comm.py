"""Collective and point-to-point communication times on a two-level (node / network) topology.

Bandwidth conventions follow nccl-tests PERFORMANCE.md: for a buffer of S bytes over n ranks,
``busbw = algbw * factor`` with factor 2(n-1)/n for all-reduce and (n-1)/n for all-gather,
reduce-scatter and all-to-all. We therefore price a collective as
``S * factor / busbw + steps * latency``, where busbw is what the slowest link sustains.

Placement (Megatron rank order, tensor-parallel innermost): a group of ``n`` ranks whose ``local``
members share a node runs at the scale-up bus bandwidth when it fits the node (local == n);
otherwise NCCL's rings cross nodes, and with one NIC per GPU (rail-optimized fabric) each ring
crossing uses a different NIC, so the network sustains ``local * NIC bandwidth`` for the group,
capped by the node's scale-up bandwidth.

All functions are numpy-vectorized: every argument may be a scalar or an array (the stage
model passes ``(n_instances,)``); results have the broadcast shape, in seconds (bandwidths in
bytes/s). See README.md, 'How the cost model works'.
"""

import numpy as np

Array = np.ndarray


def scaled(value: Array, scale: float) -> Array:
    """``value * scale``; the neutral 1.0 (every uncalibrated per-collective scale) skips the
    array multiply: the vectorized search prices millions of plans through these paths."""
    return value if scale == 1.0 else value * scale


def bus_bandwidth_Bps(
    n: Array | float, local: Array | float, intra_Bps: Array, inter_Bps: Array
) -> Array:
    """Achievable bus bandwidth (bytes/s) of a group of n ranks with ``local`` per node."""
    across = np.minimum(intra_Bps, inter_Bps * local)
    return np.where(local >= n, intra_Bps, across)


def link_latency_s(n: Array, local: Array, intra_s: Array | float, inter_s: Array | float) -> Array:
    """Mean per-step latency of a ring over n ranks with ``local`` per node.

    A ring laid out node by node (NCCL's rings follow the topology) crosses the network once
    per node, n / local times, and takes its other n - n / local steps over the scale-up links;
    a group inside one node never leaves it.
    """
    crossings = np.minimum(n / np.maximum(local, 1), n)
    mean = (crossings * inter_s + (n - crossings) * intra_s) / np.maximum(n, 1)
    return np.where(local >= n, intra_s, mean)


def all_reduce_s(size_B: Array, n: Array, busbw_Bps: Array, latency_s: Array) -> Array:
    """Ring all-reduce, or NCCL's tree when its log-depth latency wins (small messages).

    Tree bandwidth is taken as 90% of ring bandwidth (nccl-tests: double binary trees reach
    near-ring bus bandwidth for large messages across nodes).
    """
    n = np.maximum(n, 1)
    volume = size_B * 2.0 * (n - 1) / n
    ring = volume / busbw_Bps + 2.0 * (n - 1) * latency_s
    tree = volume / (0.9 * busbw_Bps) + 2.0 * np.ceil(np.log2(n)) * latency_s
    return np.where(n > 1, np.minimum(ring, tree), 0.0)


def all_gather_s(size_B: Array, n: Array, busbw_Bps: Array, latency_s: Array) -> Array:
    """Ring all-gather of a ``size_B`` OUTPUT buffer (reduce-scatter: same cost, input size)."""
    n = np.maximum(n, 1)
    return np.where(n > 1, size_B * (n - 1) / n / busbw_Bps + (n - 1) * latency_s, 0.0)


reduce_scatter_s = all_gather_s


def all_to_all_s(
    size_B: Array,
    n: Array,
    local: Array,
    intra_Bps: Array,
    inter_Bps: Array,
    latency_s: Array,
) -> Array:
    """All-to-all where each rank holds ``size_B`` and keeps 1/n of it.

    The (local-1)/n share destined for node-mates moves over the scale-up links, the (n-local)/n
    share over this GPU's own NIC; both proceed concurrently, so the slower one sets the time.
    """
    n = np.maximum(n, 1)
    local = np.minimum(local, n)
    on_node = size_B * (local - 1) / n / intra_Bps
    off_node = size_B * (n - local) / n / inter_Bps
    return np.where(n > 1, np.maximum(on_node, off_node) + (n - 1) * latency_s, 0.0)


def p2p_s(size_B: Array, bandwidth_Bps: Array, latency_s: Array) -> Array:
    """Point-to-point send of ``size_B`` bytes: size / bandwidth + latency, seconds; elementwise."""
    return size_B / bandwidth_Bps + latency_s


def ranks_per_node(size: Array, stride: Array | int, gpus_per_node: Array) -> Array:
    """Members of a group (``size`` ranks, ``stride`` apart in rank order) sharing one node."""
    per_node = np.maximum(gpus_per_node // np.maximum(stride, 1), 1)
    return np.minimum(size, per_node)
