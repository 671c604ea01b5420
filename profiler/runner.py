"""``run_profile``: measure this machine and return a ``costmodel.observations.Profile``.

All ranks run the compute benchmarks at the same time (each rank is one "device": a GPU, or on
CPUs a process with ``threads_per_rank`` threads), so the figures reflect devices that are busy
together as in training -- shared memory bandwidth, power and clocks; rank 0's numbers are kept.
The compute sweep runs in ``compute_rounds`` rounds, each with its share of the repeats, and
every kernel keeps its middle round: a busy spell of the machine (another process for a few
seconds) slows one round of a few kernels, not a kernel's whole measurement, and is voted out.
The collectives follow. Sizes per sweep keep the default run under a minute on a 2-core CPU
machine; ``tiny`` is for tests (seconds), ``full`` sweeps wider.
"""

import os
import sys
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from typing import Literal

import torch
import torch.distributed as dist

from costmodel.observations import Profile
from costmodel.specs import GpuSpec
from profiler import compute, timing
from profiler.capabilities import EMULATED_MAX_SIDE, emulated_dtypes
from profiler.catalog_match import match_catalog
from profiler.collectives import COMPUTE_BURST_S, OPS, collective_samples
from profiler.device import device_info, nominal_gpu, slug, software_versions
from profiler.launcher import run_ranks
from profiler.sweeps import Mode, Sweep, sweep_for


@dataclass(frozen=True)
class ProfileOptions:
    mode: Mode = "default"
    device: Literal["auto", "cpu", "cuda"] = "auto"
    ranks: int | None = None  # default: every GPU, or 2 CPU ranks
    threads_per_rank: int | None = None  # CPU: default cores / ranks
    collectives: bool = True
    name: str | None = None

    def resolve(self) -> tuple[str, int, int | None]:
        """(device kind, ranks, threads per rank)."""
        kind = self.device
        if kind == "auto":
            kind = "cuda" if torch.cuda.is_available() else "cpu"
        if kind == "cuda":
            if not torch.cuda.is_available():
                raise ValueError("no CUDA device is available; use device='cpu'")
            ranks = self.ranks or torch.cuda.device_count()
            if ranks > torch.cuda.device_count():
                raise ValueError(f"{ranks} ranks requested but {torch.cuda.device_count()} GPUs")
            return kind, ranks, None
        cores = os.cpu_count() or 1
        ranks = self.ranks or min(2, cores)
        threads = self.threads_per_rank or max(1, cores // ranks)
        return kind, ranks, threads


def _measure_rank(sweep: Sweep, kind: str, collectives: bool, ranks: int, source: str) -> dict:
    """Body of every rank; rank 0 returns the samples (plain dicts: they cross processes)."""
    rank = dist.get_rank()
    device = torch.device("cuda", rank) if kind == "cuda" else torch.device("cpu")
    torch.manual_seed(rank)
    policy = sweep.policy
    align = dist.barrier
    # Each round takes its share of the time a kernel is timed for (not fewer than
    # min_repeats runs), so rounds cost about what one long measurement would.
    per_round = replace(policy, min_total_s=policy.min_total_s / sweep.compute_rounds)
    attention_dtypes = [d for d in sweep.dtypes if d != "tf32"][:1]
    rounds = []
    for number in range(1, sweep.compute_rounds + 1):
        of = f"(round {number}/{sweep.compute_rounds})"
        gemm_round = []
        for dtype in sweep.dtypes:
            shapes = shapes_for(sweep, dtype)
            _report(rank, f"GEMM {dtype}: {len(shapes)} shapes {of}")
            gemm_round += compute.gemm_samples(device, shapes, [dtype], per_round, align)
        _report(rank, f"memory-bound kernels: {sweep.memory_mib:g} MiB {of}")
        memory_round = compute.memory_samples(device, sweep.memory_mib, "fp32", per_round, align)
        _report(
            rank,
            f"attention {'/'.join(attention_dtypes)}: {len(sweep.attention_shapes)} shapes {of}",
        )
        attention_round = compute.attention_samples(
            device, sweep.attention_shapes, attention_dtypes, per_round, align
        )
        rounds.append((gemm_round, memory_round, attention_round))
    gemm = timing.middle_round([take[0] for take in rounds])
    memory = timing.middle_round([take[1] for take in rounds])
    attention = timing.middle_round([take[2] for take in rounds])
    dist.barrier()
    comms = []
    if collectives and ranks > 1:
        _report(rank, f"collectives: {len(OPS)} ops x {len(sweep.collective_sizes_B)} sizes")
        comms = collective_samples(
            sweep.collective_sizes_B,
            OPS,
            device=device,
            ranks_per_node=ranks,
            source=source,
            policy=sweep.collective_policy or policy,
        )
    dump = [sample.model_dump() for sample in (*gemm, *memory, *attention, *comms)]
    return {
        "gemm": dump[: len(gemm)],
        "memory": dump[len(gemm) : len(gemm) + len(memory)],
        "attention": dump[len(gemm) + len(memory) : len(gemm) + len(memory) + len(attention)],
        "collectives": dump[len(gemm) + len(memory) + len(attention) :],
    }


def _report(rank: int, message: str) -> None:
    """Progress on stderr, from rank 0 only (every rank measures the same families)."""
    if rank == 0:
        print(f"profile: {message}", file=sys.stderr, flush=True)


def shapes_for(sweep: Sweep, dtype: str) -> list[tuple[int, int, int]]:
    if dtype not in sweep.emulated:
        return sweep.gemm_shapes
    return [shape for shape in sweep.gemm_shapes if max(shape) <= EMULATED_MAX_SIDE] or [
        (EMULATED_MAX_SIDE,) * 3
    ]


def with_native_dtypes(sweep: Sweep, kind: str, mode: Mode) -> Sweep:
    """Drop (default) or cap at small GEMMs (full) the dtypes this device only emulates."""
    emulated = emulated_dtypes(kind, sweep.dtypes, compute.TORCH_DTYPES)
    if not emulated:
        return sweep
    if mode == "full":
        return replace(sweep, emulated=emulated)
    kept = [dtype for dtype in sweep.dtypes if dtype not in emulated]
    return replace(sweep, dtypes=kept or ["fp32"], skipped=emulated)


def run_profile(options: ProfileOptions | None = None) -> Profile:
    options = options or ProfileOptions()
    kind, ranks, threads = options.resolve()
    backend = "nccl" if kind == "cuda" else "gloo"
    sweep = sweep_for(kind, options.mode)
    if options.mode != "tiny":
        sweep = with_native_dtypes(sweep, kind, options.mode)
        for dtype, reason in {**sweep.skipped, **sweep.emulated}.items():
            action = "skipped" if dtype in sweep.skipped else f"GEMMs capped at {EMULATED_MAX_SIDE}"
            print(f"profile: {dtype} {action}: {reason}", file=sys.stderr, flush=True)
    samples = run_ranks(
        _measure_rank,
        (sweep, kind, options.collectives, ranks, f"torch.distributed {backend}"),
        world=ranks,
        backend=backend,
        threads_per_rank=threads,
    )
    if threads:
        torch.set_num_threads(threads)  # so device_info below describes what was measured
    device = torch.device("cuda", 0) if kind == "cuda" else torch.device("cpu")
    info = device_info(device, ranks, threads, backend)
    draft = Profile(
        name=options.name or f"{slug(info.name)}-x{ranks}",
        device=info,
        gpu=GpuSpec(name="pending", bf16_tflops=1.0, hbm_gib=1.0, hbm_GBps=1.0),
        **samples,
    )
    gpu = match_catalog(info.name) if kind == "cuda" else None
    if gpu is None:
        gpu = nominal_gpu(
            name=f"{slug(info.name)}",
            memory_gib=info.memory_gib or 1.0,
            gemm=draft.gemm,
            memory=draft.memory,
            collectives=draft.collectives,
        )
    settings: dict[str, float | int | str | bool] = {
        f"sweep_{key}": str(value) for key, value in asdict(sweep).items()
    }
    settings.update({"mode": options.mode, "ranks": ranks, "threads_per_rank": threads or 0})
    if kind == "cpu":
        settings["collectives_after_compute_s"] = COMPUTE_BURST_S
    return draft.model_copy(
        update={
            "gpu": gpu,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "software": software_versions(),
            "settings": settings,
        }
    )
