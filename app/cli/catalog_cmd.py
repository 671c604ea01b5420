"""``autopar presets``, ``autopar gpus`` and ``autopar import-hf``: what the planner knows about."""

import json
import sys
from pathlib import Path
from typing import Annotated

import typer
import yaml
from rich.console import Console
from rich.table import Table

from app.cli import cli
from app.cli._common import fail
from costmodel.catalog import SPEC_KINDS, SpecKind, list_presets, load_preset
from costmodel.hardware import CATALOG
from costmodel.hf_import import import_hf_config
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.base import Spec

# Accept the folder names shown in help ("models") as well as the singular kind ("model").
_KIND_ALIASES: dict[str, SpecKind] = {
    **{kind: kind for kind in SPEC_KINDS},
    **{f"{kind}s": kind for kind in SPEC_KINDS},
}


@cli.command("presets")
def presets_command(
    kind: Annotated[
        str | None,
        typer.Argument(help="models, clusters, trainings or plans (default: all)."),
    ] = None,
) -> None:
    """List the built-in presets usable as --model/--training/--cluster/--plan."""
    if kind is None:
        kinds = list(SPEC_KINDS)
    elif kind.lower() in _KIND_ALIASES:
        kinds = [_KIND_ALIASES[kind.lower()]]
    else:
        fail(f"unknown preset kind '{kind}'; choices: models, clusters, trainings, plans")
    console = Console(highlight=False)
    for index, current in enumerate(kinds):
        table = Table(title=f"{current} presets", title_justify="left")
        table.add_column("name", style="bold", no_wrap=True)
        table.add_column("summary")
        for name in list_presets(current):
            table.add_row(name, summarize(load_preset(current, name)))
        if index:
            console.print()
        console.print(table)


def summarize(spec: Spec) -> str:
    """One line describing a spec, for listings."""
    if isinstance(spec, ModelSpec):
        heads = f"{spec.num_attention_heads} heads"
        if spec.kv_heads != spec.num_attention_heads:
            heads += f" ({spec.kv_heads} kv)"
        text = (
            f"{spec.num_layers} layers, hidden {spec.hidden_size}, {heads}, "
            f"ffn {spec.ffn_size} {spec.activation}, vocab {spec.vocab_size}"
        )
        if spec.moe is not None:
            text += f", MoE {spec.moe.num_experts} experts top-{spec.moe.top_k}"
        return text
    if isinstance(spec, ClusterSpec):
        groups = " + ".join(
            f"{group.num_gpus}x {group.gpu if isinstance(group.gpu, str) else group.gpu.name}"
            + (f" ({group.zone})" if group.zone != "default" else "")
            for group in spec.groups
        )
        return f"{spec.num_gpus} GPUs: {groups}"
    if isinstance(spec, TrainingSpec):
        text = f"seq {spec.seq_length}, batch {spec.global_batch_size}, {spec.precision}"
        if spec.train_tokens:
            text += f", {_token_count(spec.train_tokens)} tokens"
        return text
    if isinstance(spec, Plan):
        text = f"dp {spec.dp} · tp {spec.tp} · pp {spec.pp}"
        for label, value in (("cp", spec.cp), ("ep", spec.ep), ("vpp", spec.vpp)):
            if value > 1:
                text += f" · {label} {value}"
        text += f", micro-batch {spec.micro_batch_size}, ZeRO {spec.zero_stage}"
        text += f", recompute {spec.recompute}"
        if spec.stages is not None:
            text += f", {len(spec.stages)} explicit stages"
        return text
    return type(spec).__name__


def _token_count(tokens: float) -> str:
    return f"{tokens / 1e12:g}T" if tokens >= 1e12 else f"{tokens / 1e9:g}B"


def _tflops(value: float | None) -> str:
    return f"{value:,.0f}" if value else "—"


@cli.command("gpus")
def gpus_command() -> None:
    """List the GPU catalog (dense peaks; link bandwidths per GPU, one direction)."""
    table = Table(title="GPU catalog", title_justify="left")
    for column in ("GPU", "BF16 TF", "FP8 TF", "HBM GiB", "HBM GB/s", "intra GB/s", "inter GB/s"):
        table.add_column(column, justify="left" if column == "GPU" else "right", no_wrap=True)
    table.add_column("GEMM eff", justify="right")
    for gpu in CATALOG.values():
        table.add_row(
            gpu.name,
            _tflops(gpu.bf16_tflops or gpu.fp16_tflops),
            _tflops(gpu.fp8_tflops),
            f"{gpu.hbm_gib:g}",
            f"{gpu.hbm_GBps:,.0f}",
            f"{gpu.intra_node_GBps:g}" if gpu.intra_node_GBps else "—",
            f"{gpu.inter_node_GBps:g}" if gpu.inter_node_GBps else "—",
            f"{gpu.gemm_efficiency:.2f}" if gpu.gemm_efficiency else "—",
        )
    Console(highlight=False).print(table)


@cli.command("import-hf")
def import_hf_command(
    config_path: Annotated[Path, typer.Argument(help="A Hugging Face config.json.")],
    name: Annotated[str | None, typer.Option("--name", help="Model name in the spec.")] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Write the YAML here.")] = None,
) -> None:
    """Convert a Hugging Face config.json into a ModelSpec YAML (offline)."""
    try:
        config = json.loads(config_path.read_text(encoding="utf-8"))
    except OSError as exc:
        fail(f"cannot read '{config_path}': {exc.strerror or exc}")
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        fail(f"'{config_path}' is not valid JSON: {exc}")
    try:
        converted = import_hf_config(config, name=name)
    except ValueError as exc:
        fail(f"{config_path}: {exc}")
    spec = converted.spec
    for warning in converted.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    header = f"# Imported by `autopar import-hf` from {config_path.name}"
    header += f" (model_type {config['model_type']}).\n"
    text = header + yaml.safe_dump(spec.model_dump(exclude_none=True), sort_keys=False)
    if out is None:
        sys.stdout.write(text)
        return
    try:
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"cannot write '{out}': {exc.strerror or exc}")
    print(f"wrote {out}", file=sys.stderr)
