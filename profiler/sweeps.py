"""What each profile mode measures: GEMM shapes and dtypes, memory-bound sizes, attention
shapes, collective sizes and the timing policy, per device kind. No torch here, so the CLI can
say what a sweep will cost before starting one."""

from dataclasses import dataclass, field
from typing import Literal

from costmodel.specs.training import Precision
from profiler import timing

Mode = Literal["tiny", "default", "full"]
KiB, MiB = 1024, 1024 * 1024


@dataclass(frozen=True)
class Sweep:
    gemm_shapes: list[tuple[int, int, int]]
    dtypes: list[Precision]
    memory_mib: float
    attention_shapes: list[tuple[int, int, int, int]]
    collective_sizes_B: list[int]
    policy: timing.TimingPolicy = field(default=timing.DEFAULT)
    collective_policy: timing.TimingPolicy | None = None  # None: ``policy``
    compute_rounds: int = 1  # odd: each compute kernel keeps its middle round
    # dtypes this device only emulates (``profiler.capabilities``): left out of the sweep, or
    # (with --full) timed at small GEMMs only; dtype -> the reason.
    skipped: dict[str, str] = field(default_factory=dict)
    emulated: dict[str, str] = field(default_factory=dict)


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
