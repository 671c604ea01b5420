"""Collective micro-benchmarks inside an initialized ``torch.distributed`` process group.

Every rank runs the same sequence; each timed run starts after a barrier so ranks enter together,
and a collective's time is the slowest rank's median (the group finishes when its last member
does). Point-to-point is a ping-pong between ranks 0 and 1: one-way time = round trip / 2.

On CPU ranks each timed collective follows a burst of compute (``COMPUTE_BURST_S`` of GEMMs),
as it does in training, where every tensor-parallel all-reduce, pipeline send and gradient
bucket comes right after the GEMMs that produced it. Entered from an idle rank, a gloo
collective finds its threads awake and its peer already waiting; after compute, the ranks
arrive with their compute jitter between them and the backend's threads must first be
scheduled again. On a 2-core machine a 1 MiB all-reduce timed idle took a median ~0.6 ms, after
~10 ms of GEMMs ~4 ms, and inside a 2-way tensor-parallel training step ~3.4 ms: the idle
figure would price training's collectives 5x too cheap. GPUs do not need this (NCCL kernels
are launched on a stream and timed by their own synchronization).
Sizes follow nccl-tests (``costmodel.observations``): all-gather is timed by its output buffer,
reduce-scatter by its input buffer.
"""

import math
import time
from collections.abc import Callable

import torch
import torch.distributed as dist

from costmodel.observations import CollectiveOp, CollectiveSample
from profiler.timing import DEFAULT, Timed, TimingPolicy, summarize

# Compute before each timed CPU collective: about one small layer's GEMMs between two of
# training's collectives (the mini-GPT of scripts/calibration_cpu_e2e.py runs ~5-20 ms there).
COMPUTE_BURST_S = 5e-3
OPS: tuple[CollectiveOp, ...] = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")
# torch 2.13 renamed the tensor variants; older releases only have the *_tensor names.
_ALL_GATHER = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
_REDUCE_SCATTER = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor


def _operation(
    op: CollectiveOp, size_B: int, device: torch.device, rank: int, world: int
) -> Callable[[], None] | None:
    elements = max(world, size_B // 4 // world * world)  # fp32, divisible by the group
    buffer = torch.ones(elements, device=device)
    if op == "all_reduce":
        return lambda: dist.all_reduce(buffer)
    if op == "all_gather":
        shard = torch.ones(elements // world, device=device)
        return lambda: _ALL_GATHER(buffer, shard)
    if op == "reduce_scatter":
        shard = torch.empty(elements // world, device=device)
        return lambda: _REDUCE_SCATTER(shard, buffer)
    if op == "all_to_all":
        received = torch.empty_like(buffer)
        return lambda: dist.all_to_all_single(received, buffer)
    if rank > 1:
        return None  # p2p: ranks 0 and 1 only

    def ping_pong() -> None:
        if rank == 0:
            dist.send(buffer, 1)
            dist.recv(buffer, 1)
        else:
            dist.recv(buffer, 0)
            dist.send(buffer, 0)

    return ping_pong


def compute_burst(seconds: float) -> Callable[[], None]:
    """GEMMs for about ``seconds`` (a fixed count, sized once, so every run does the same work
    and ranks differ only by their own jitter)."""
    a, b = torch.randn(256, 256), torch.randn(256, 256)
    out = torch.empty(256, 256)
    torch.matmul(a, b, out=out)
    start = time.perf_counter()
    for _ in range(10):
        torch.matmul(a, b, out=out)
    per_gemm_s = max((time.perf_counter() - start) / 10, 1e-7)
    count = max(1, round(seconds / per_gemm_s))
    # Every rank must do the same work: agree on the slowest rank's count.
    agreed = torch.tensor([count], dtype=torch.int64)
    dist.all_reduce(agreed, op=dist.ReduceOp.MIN)
    count = int(agreed[0])

    def burst() -> None:
        for _ in range(count):
            torch.matmul(a, b, out=out)

    return burst


def _time_collective(
    operation: Callable[[], None] | None,
    policy: TimingPolicy,
    sync: Callable[[], object],
    device: torch.device,
    before: Callable[[], None] | None = None,
) -> list[float]:
    def run_once() -> float:
        dist.barrier()
        if before is not None:
            before()
        start = time.perf_counter()
        if operation:
            operation()
        sync()
        return time.perf_counter() - start

    for _ in range(policy.warmup):
        run_once()
    # Every rank must run the same number of barriers: agree on the repeat count from the
    # slowest rank's first run.
    first = torch.tensor([run_once()], dtype=torch.float64, device=device)
    dist.all_reduce(first, op=dist.ReduceOp.MAX)
    wanted = math.ceil(policy.min_total_s / max(float(first[0]), 1e-9))
    repeats = max(policy.min_repeats, min(policy.max_repeats, wanted))
    return [run_once() for _ in range(repeats)]


def collective_samples(
    sizes_B: list[int],
    ops: tuple[CollectiveOp, ...] = OPS,
    *,
    device: torch.device,
    ranks_per_node: int,
    source: str,
    policy: TimingPolicy = DEFAULT,
) -> list[CollectiveSample]:
    """Run on every rank; returns the samples on rank 0 (an empty list elsewhere)."""
    rank, world = dist.get_rank(), dist.get_world_size()
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)
    before = compute_burst(COMPUTE_BURST_S) if device.type == "cpu" else None
    # Backends set up connections and buffers on first use: one untimed round of every op.
    for op in ops:
        if op != "p2p" or world >= 2:
            _time_collective(
                _operation(op, min(sizes_B), device, rank, world), policy, sync, device, before
            )
    samples = []
    for op in ops:
        if op == "p2p" and world < 2:
            continue
        for size in sizes_B:
            operation = _operation(op, size, device, rank, world)
            durations = _time_collective(operation, policy, sync, device, before)
            if op == "p2p":
                durations = [d / 2 for d in durations]
            timed = summarize(durations)
            medians: list[Timed | None] = [None] * world
            dist.all_gather_object(medians, timed if operation else None)
            slowest = max((t for t in medians if t is not None), key=lambda t: t.median_s)
            elements = max(world, size // 4 // world * world)
            if rank == 0:
                samples.append(
                    CollectiveSample(
                        op=op,
                        size_B=float(elements * 4),
                        ranks=2 if op == "p2p" else world,
                        ranks_per_node=min(ranks_per_node, 2 if op == "p2p" else world),
                        dtype="float",
                        source=source,
                        **slowest.as_fields(),
                    )
                )
    return samples
