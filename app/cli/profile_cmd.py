"""``autopar profile``: measure this machine, or import nccl-tests output, into a profile file."""

import time
from pathlib import Path
from typing import Annotated, Literal, cast

import typer
import yaml
from pydantic import ValidationError

from app.cli import cli
from app.cli._common import fail
from app.profiles.nccl_import import NcclImportError, profile_from_nccl_tests
from costmodel.errors import format_validation_error
from costmodel.hardware import UnknownGpuError, lookup_gpu
from costmodel.observations import CollectiveOp, Profile
from costmodel.specs import GpuSpec

_OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p")


@cli.command("profile")
def profile_command(
    out: Annotated[Path, typer.Option("--out", "-o", help="Profile file to write.")] = Path(
        "profile.json"
    ),
    full: Annotated[bool, typer.Option("--full", help="Sweep wider (minutes).")] = False,
    ranks: Annotated[
        int | None,
        typer.Option("--ranks", min=1, help="Ranks (default: all GPUs, or 2 CPU ranks)."),
    ] = None,
    threads_per_rank: Annotated[
        int | None, typer.Option("--threads-per-rank", min=1, help="CPU threads per rank.")
    ] = None,
    device: Annotated[str, typer.Option("--device", help="auto, cpu or cuda.")] = "auto",
    name: Annotated[str | None, typer.Option("--name", help="Profile name.")] = None,
    quick: Annotated[bool, typer.Option("--quick", hidden=True)] = False,
    nccl_tests: Annotated[
        list[Path] | None,
        typer.Option(
            "--nccl-tests",
            help="Import this nccl-tests output instead of measuring (repeatable).",
        ),
    ] = None,
    gpu: Annotated[
        str | None,
        typer.Option("--gpu", help="With --nccl-tests: catalog GPU or a GpuSpec JSON/YAML file."),
    ] = None,
    op: Annotated[
        str | None, typer.Option("--op", help=f"With --nccl-tests: {', '.join(_OPS)}.")
    ] = None,
    ranks_per_node: Annotated[
        int | None, typer.Option("--ranks-per-node", min=1, help="With --nccl-tests.")
    ] = None,
) -> None:
    """Measure GEMMs, memory bandwidth, attention and collectives on this machine (PyTorch)."""
    started = time.perf_counter()
    if nccl_tests:
        profile = _import_nccl_tests(nccl_tests, gpu, op, ranks, ranks_per_node, name)
    else:
        if device not in ("auto", "cpu", "cuda"):
            fail(f"--device must be auto, cpu or cuda, not '{device}'")
        checked = cast(Literal["auto", "cpu", "cuda"], device)  # one of the three: checked above
        profile = _measure(full, quick, checked, ranks, threads_per_rank, name)
    out.write_text(profile.model_dump_json(indent=2) + "\n")
    _summarize(profile, out, time.perf_counter() - started)
    if not nccl_tests and not full and not quick:
        _predict_full(profile)


def _measure(
    full: bool,
    quick: bool,
    device: Literal["auto", "cpu", "cuda"],
    ranks: int | None,
    threads: int | None,
    name: str | None,
) -> Profile:
    try:
        # Imported here: torch is the optional 'profile' extra, and other commands work without.
        from profiler.runner import ProfileOptions, run_profile
    except ModuleNotFoundError as exc:
        if exc.name != "torch":
            raise
        fail("profiling needs PyTorch: pip install 'autopar[profile]'")
    mode: Literal["tiny", "default", "full"] = "tiny" if quick else ("full" if full else "default")
    options = ProfileOptions(
        mode=mode, device=device, ranks=ranks, threads_per_rank=threads, name=name
    )
    try:
        return run_profile(options)
    except ValueError as exc:
        fail(str(exc))


def _load_gpu(value: str) -> GpuSpec:
    path = Path(value)
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        try:
            return GpuSpec.model_validate(yaml.safe_load(path.read_text()))
        except OSError as exc:
            fail(f"GPU file '{value}': {exc.strerror}")
        except ValidationError as exc:
            fail(f"GPU file '{value}': {format_validation_error(exc, 'gpu')}")
    try:
        return lookup_gpu(value)
    except UnknownGpuError as exc:
        fail(str(exc))


def _import_nccl_tests(
    paths: list[Path],
    gpu_option: str | None,
    op: str | None,
    ranks: int | None,
    ranks_per_node: int | None,
    name: str | None,
) -> Profile:
    if op is not None and op not in _OPS:
        fail(f"--op must be one of {', '.join(_OPS)}, not '{op}'")
    texts: list[str] = []
    for path in paths:
        try:
            texts.append(path.read_text())
        except OSError as exc:
            fail(f"nccl-tests file '{path}': {exc.strerror}")
    try:
        return profile_from_nccl_tests(
            texts,
            gpu=_load_gpu(gpu_option) if gpu_option is not None else None,
            op=cast(CollectiveOp | None, op),  # one of _OPS (checked above) or None
            ranks=ranks,
            ranks_per_node=ranks_per_node,
            name=name,
            origin=", ".join(str(path) for path in paths),
        )
    except NcclImportError as exc:
        if exc.index is not None:
            fail(f"nccl-tests file '{paths[exc.index]}': {exc.reason}")
        fail(exc.reason.replace("give the GPU", "give --gpu"))


def _predict_full(profile: Profile) -> None:
    """What ``--full`` would cost here, from the rates just measured (profiler.duration)."""
    from profiler.duration import predicted_duration_s
    from profiler.sweeps import sweep_for

    kind = profile.device.kind if profile.device.kind in ("cuda", "cpu") else "cpu"
    seconds = predicted_duration_s(profile, sweep_for(kind, "full"), profile.device.ranks)
    print(f"  --full sweeps wider: about {seconds / 60:.0f} min on this machine ({seconds:.0f} s)")


def _summarize(profile: Profile, out: Path, seconds: float) -> None:
    lines = [f"profile '{profile.name}' -> {out} ({profile.sample_count} samples, {seconds:.0f} s)"]
    lines.append(f"  device: {profile.device.name} x{profile.device.ranks}")
    gpu = profile.gpu
    lines.append(f"  described as: {gpu.name} (gemm_efficiency {gpu.gemm_efficiency})")
    for dtype in sorted({s.dtype for s in profile.gemm}):
        best = max(s.flops / s.median_s for s in profile.gemm if s.dtype == dtype)
        lines.append(f"  GEMM {dtype}: best {best / 1e12:.3g} TFLOP/s")
    if profile.memory:
        best = max(s.bytes / s.median_s for s in profile.memory)
        lines.append(f"  memory: best {best / 1e9:.3g} GB/s")
    for direction in ("forward", "backward"):
        rates = [s.full_flops / s.median_s for s in profile.attention if s.direction == direction]
        if rates:
            lines.append(f"  attention {direction}: best {max(rates) / 1e12:.3g} TFLOP/s")
    for operation in _OPS:
        chosen = [s for s in profile.collectives if s.op == operation]
        if chosen:
            best = max(s.busbw_GBps for s in chosen)
            lines.append(f"  {operation}: best bus bandwidth {best:.3g} GB/s ({len(chosen)} sizes)")
    print("\n".join(lines))
