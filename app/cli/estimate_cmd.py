"""``autopar estimate``: price one plan and explain where the time, memory and money go."""

import math
from typing import Annotated

import typer
from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

import costmodel
from app.cli import cli
from app.cli._common import FrameworkOption, fail, load_or_fail, no_fit, with_framework
from app.cli.calibration_store import CalibrationOption, params_or_fail
from costmodel.specs import Estimate

_SPEC_HELP = "Preset name (see `autopar presets`) or a JSON/YAML file."
_SECONDS_PER_DAY = 86_400.0


@cli.command("estimate")
def estimate_command(
    model: Annotated[str, typer.Option("--model", "-m", help=f"Model. {_SPEC_HELP}")],
    training: Annotated[str, typer.Option("--training", "-t", help=f"Training. {_SPEC_HELP}")],
    cluster: Annotated[str, typer.Option("--cluster", "-c", help=f"Cluster. {_SPEC_HELP}")],
    plan: Annotated[str, typer.Option("--plan", "-p", help=f"Plan. {_SPEC_HELP}")],
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the full Estimate as JSON.")
    ] = False,
    calibration: CalibrationOption = None,
    framework: FrameworkOption = None,
) -> None:
    """Estimate step time, throughput, memory and cost of one parallelization plan."""
    model_spec = load_or_fail("model", model)
    training_spec = with_framework(load_or_fail("training", training), framework)
    cluster_spec = load_or_fail("cluster", cluster)
    plan_spec = load_or_fail("plan", plan)
    params = params_or_fail(calibration)
    try:
        result = costmodel.estimate(
            model=model_spec,
            training=training_spec,
            cluster=cluster_spec,
            plan=plan_spec,
            params=params,
        )
    except ValueError as exc:  # plan does not fit the model/cluster (tp vs heads, GPU count...)
        fail(str(exc))
    if json_output:
        print(result.model_dump_json(indent=2))
    else:
        title = f"{model} · {training} · {cluster} · {plan}"
        Console(highlight=False).print(render_estimate(result, title=title))
    if not result.feasible:
        no_fit("the plan does not fit: " + "; ".join(result.reasons))


# Rendering -------------------------------------------------------------------------------------
def _number(value: float | None, fmt: str) -> str:
    if value is None or math.isnan(value) or math.isinf(value):
        return "—"
    return format(value, fmt)


def _duration(seconds: float | None) -> str:
    if seconds is None or math.isnan(seconds) or math.isinf(seconds):
        return "—"
    if seconds >= 2 * _SECONDS_PER_DAY:
        return f"{seconds / _SECONDS_PER_DAY:,.1f} days"
    if seconds >= 7200:
        return f"{seconds / 3600:,.1f} h"
    if seconds >= 1:
        return f"{seconds:,.3f} s"
    return f"{seconds * 1e3:,.2f} ms"


def _key_value_table(title: str) -> Table:
    table = Table(title=title, title_justify="left", show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold")
    table.add_column(justify="right")
    return table


def _verdict(result: Estimate) -> Text:
    if result.feasible:
        verdict = Text("feasible: yes", style="bold green")
        if result.warnings:
            verdict.append(" (with warnings)", style="bold yellow")
    else:
        verdict = Text("feasible: NO", style="bold red")
    for reason in result.reasons:
        verdict.append(f"\n  - {reason}", style="red")
    for warning in result.warnings:
        verdict.append(f"\n  warning: {warning}", style="yellow")
    return verdict


def _notes(result: Estimate) -> Text:
    """The layout in words (heterogeneous plans): who runs which stages, unused groups."""
    text = Text("Layout", style="bold")
    for note in result.notes:
        text.append(f"\n  - {note}")
    return text


def _params(count: int | None) -> str:
    return "—" if count is None else f"{count / 1e9:,.2f} B"


def _throughput(result: Estimate) -> Table:
    table = _key_value_table("Throughput")
    table.add_row("parameters", f"{_params(result.total_params)} total")
    table.add_row("active per token", _params(result.active_params))
    table.add_row("GPUs", f"{result.num_gpus:,}")
    table.add_row("step time", _duration(result.step_time_s))
    table.add_row("tokens/s", _number(result.tokens_per_s, ",.0f"))
    table.add_row("tokens/s per GPU", _number(result.tokens_per_s_per_gpu, ",.1f"))
    table.add_row("model TFLOP/s per GPU", _number(result.model_tflops_per_gpu, ",.1f"))
    table.add_row("MFU", _number(result.mfu * 100, ".1f") + " %")
    table.add_row("HFU", _number(result.hfu * 100, ".1f") + " %")
    return table


def _memory(result: Estimate) -> Table:
    table = _key_value_table("Memory per GPU (GiB)")
    breakdown = result.memory_gib
    for label, value in (
        ("parameters", breakdown.parameters),
        ("gradients", breakdown.gradients),
        ("optimizer states", breakdown.optimizer_states),
        ("activations", breakdown.activations),
        ("other", breakdown.other),
    ):
        table.add_row(label, _number(value, ",.2f"))
    capacity = max((stage.capacity_gib for stage in result.per_stage), default=float("nan"))
    peak = _number(result.peak_memory_gib, ",.2f")
    table.add_row("peak", f"{peak} / {_number(capacity, ',.0f')}")
    return table


def _time_breakdown(result: Estimate) -> Table:
    table = Table(title="Time per step", title_justify="left", box=None, pad_edge=False)
    table.add_column("component", style="bold")
    table.add_column("seconds", justify="right")
    table.add_column("share %", justify="right")
    step = result.step_time_s
    for name, seconds in result.time_breakdown_s.model_dump().items():
        if seconds:  # zero parts (no pipeline, no TP...) are noise
            share = seconds / step * 100 if step and math.isfinite(step) else float("nan")
            table.add_row(name.replace("_", " "), _number(seconds, ",.4f"), _number(share, ".1f"))
    return table


def _stages(result: Estimate) -> Table:
    table = Table(title="Pipeline stages", title_justify="left", box=None, pad_edge=False)
    for column in ("stage", "group", "GPU", "layers", "tp", "dp", "µbatch s", "peak GiB"):
        table.add_column(column, justify="left" if column in ("group", "GPU") else "right")
    for stage in result.per_stage:
        peak = f"{_number(stage.peak_memory_gib, ',.1f')} / {_number(stage.capacity_gib, ',.0f')}"
        table.add_row(
            str(stage.stage),
            Text(stage.group),  # user-chosen names: never parse them as rich markup
            Text(stage.gpu),
            str(stage.num_layers),
            str(stage.tp),
            str(stage.dp),
            _number(stage.time_per_microbatch_s, ",.4f"),
            peak,
        )
    return table


def _cost(result: Estimate) -> Table:
    table = _key_value_table("Cost")
    table.add_row("$/hour", _number(result.usd_per_hour, ",.2f"))
    table.add_row("$/M tokens", _number(result.usd_per_million_tokens, ",.4f"))
    table.add_row("time to train", _duration(result.time_to_train_s))
    table.add_row("$ to train", _number(result.usd_to_train, ",.0f"))
    return table


def _goodput(result: Estimate) -> Table:
    """Failures, checkpoints and restarts (``costmodel.goodput``)."""
    goodput = result.goodput
    table = _key_value_table("Goodput")
    if goodput is None:
        return table
    lost = goodput.lost_share
    table.add_row("goodput", f"{goodput.goodput:.2%}")
    table.add_row("effective tokens/s", _number(result.effective_tokens_per_s, ",.0f"))
    table.add_row(
        "checkpoint",
        f"{goodput.checkpoint_strategy}, {goodput.checkpoint_total_gib:,.1f} GiB in total, "
        f"{goodput.checkpoint_gib_per_gpu:,.2f} GiB per GPU; write "
        f"{_duration(goodput.checkpoint_write_s)}, stall {_duration(goodput.checkpoint_exposed_s)}"
        f", load {_duration(goodput.checkpoint_load_s)}",
    )
    table.add_row("checkpoint every", _duration(goodput.checkpoint_interval_s))
    table.add_row("job MTBF", _duration(goodput.mtbf_s))
    table.add_row(
        "per failure",
        f"restart {_duration(goodput.restart_s)}, redo {_duration(goodput.lost_work_per_failure_s)}"
        f" ({goodput.hot_spare_nodes} hot spare nodes)",
    )
    table.add_row("interruptions", _number(goodput.interruptions, ",.0f"))
    table.add_row(
        "lost time",
        f"checkpoint writes {lost.checkpoint_writes:.2%}, recomputed steps "
        f"{lost.recomputed:.2%}, restarts {lost.restarts:.2%}",
    )
    return table


# Beyond this many stages a per-stage table is a wall of near-identical rows.
_MAX_STAGE_ROWS = 16


def render_estimate(result: Estimate, *, title: str = "Estimate") -> Group:
    """Rich renderable of an Estimate: verdict, throughput, memory, time breakdown, cost."""
    parts: list[Table | Text] = [
        Text(title, style="bold underline"),
        _verdict(result),
        _throughput(result),
        _memory(result),
        _time_breakdown(result),
    ]
    if result.notes:
        parts.append(_notes(result))
    if 1 < len(result.per_stage) <= _MAX_STAGE_ROWS:
        parts.append(_stages(result))
    parts.append(_cost(result))
    if result.goodput is not None:
        parts.append(_goodput(result))
    spaced: list[Table | Text] = []
    for part in parts:
        spaced.extend([part, Text("")])
    return Group(*spaced[:-1])
