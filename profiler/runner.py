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
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Literal

import torch
import torch.distributed as dist

from app.profiling import compute, timing
from app.profiling.catalog_match import match_catalog
from app.profiling.collectives import COMPUTE_BURST_S, OPS, collective_samples
from app.profiling.device import device_info, nominal_gpu, slug, software_versions
from app.profiling.launcher import run_ranks
from costmodel.observations import Profile

Mode = Literal["tiny", "default", "full"]
KiB, MiB = 1024, 1024 * 1024


@dataclass(frozen=True)
class Sweep:
    gemm_shapes: list[tuple[int, int, int]]
    dtypes: list[str]
    memory_mib: float
    attention_shapes: list[tuple[int, int, int, int]]
    collective_sizes_B: list[int]
    policy: timing.TimingPolicy = field(default=timing.DEFAULT)
    collective_policy: timing.TimingPolicy | None = None  # None: ``policy``
    compute_rounds: int = 1  # odd: each compute kernel keeps its middle round


def _powers(low: int, high: int, factor: int) -> list[int]:
    sizes, size = [], low
    while size <= high:
        sizes.append(size)
        size *= factor
    return sizes


def sweep_for(kind: str, mode: Mode) -> Sweep:
    """What each mode measures. Shapes mix squares (the roll-off with size) with transformer
    GEMMs (tokens x hidden -> QKV, FFN, vocabulary widths)."""
    if mode == "tiny":
        return Sweep(
            gemm_shapes=[(32, 32, 32), (64, 64, 64), (128, 64, 64)],
            dtypes=["fp32"],
            memory_mib=1,
            attention_shapes=[(1, 2, 32, 16)],
            collective_sizes_B=[4 * KiB, 64 * KiB],
            policy=timing.QUICK,
        )
    if kind == "cuda":
        squares = [(n, n, n) for n in _powers(512, 8192 if mode == "full" else 4096, 2)]
        transformer = [(8192, 3 * 4096, 4096), (8192, 4096, 4096), (8192, 16384, 4096)]
        return Sweep(
            gemm_shapes=squares + transformer,
            dtypes=["bf16", "fp16", "tf32"] if mode == "full" else ["bf16", "tf32"],
            memory_mib=1024,
            attention_shapes=[(4, 16, 1024, 128), (2, 16, 2048, 128), (1, 32, 4096, 128)],
            collective_sizes_B=_powers(4 * KiB, (1024 if mode == "full" else 256) * MiB, 4),
            policy=timing.FULL if mode == "full" else timing.DEFAULT,
            compute_rounds=3,
        )
    squares = [(n, n, n) for n in _powers(128, 2048 if mode == "full" else 1024, 2)]
    transformer = [(2048, n, k) for n, k in ((256, 256), (768, 256), (1024, 256), (256, 1024))]
    transformer.append((2048, 4096, 256))
    return Sweep(
        gemm_shapes=squares + transformer,
        dtypes=["fp32", "bf16"],
        memory_mib=64 if mode == "full" else 32,
        attention_shapes=[(2, 8, 128, 32), (2, 8, 256, 32), (2, 8, 512, 32), (1, 4, 1024, 64)],
        collective_sizes_B=_powers(4 * KiB, (64 if mode == "full" else 16) * MiB, 4),
        policy=timing.FULL if mode == "full" else timing.DEFAULT,
        collective_policy=timing.FULL if mode == "full" else timing.CPU_COLLECTIVES,
        compute_rounds=3,
    )


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
    rounds = [
        (
            compute.gemm_samples(device, sweep.gemm_shapes, sweep.dtypes, per_round, align),
            compute.memory_samples(device, sweep.memory_mib, "fp32", per_round, align),
            compute.attention_samples(
                device, sweep.attention_shapes, attention_dtypes, per_round, align
            ),
        )
        for _ in range(sweep.compute_rounds)
    ]
    gemm = timing.middle_round([take[0] for take in rounds])
    memory = timing.middle_round([take[1] for take in rounds])
    attention = timing.middle_round([take[2] for take in rounds])
    dist.barrier()
    comms = []
    if collectives and ranks > 1:
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


def run_profile(options: ProfileOptions | None = None) -> Profile:
    options = options or ProfileOptions()
    kind, ranks, threads = options.resolve()
    backend = "nccl" if kind == "cuda" else "gloo"
    sweep = sweep_for(kind, options.mode)
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
        gpu={"name": "pending", "bf16_tflops": 0.0, "hbm_gib": 1.0, "hbm_GBps": 1.0},
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
    settings = {f"sweep_{key}": str(value) for key, value in asdict(sweep).items()}
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
