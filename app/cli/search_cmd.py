"""``autopar search``: find the best parallelization plans, with a progress bar on stderr."""

import math
from contextlib import nullcontext
from types import TracebackType
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from rich.text import Text

from app.cli import cli
from app.cli._common import FrameworkOption, fail, load_or_fail, no_fit, with_framework
from app.cli.calibration_store import CalibrationOption, params_or_fail
from costmodel.specs import Plan
from search import (
    OBJECTIVES,
    SAMPLERS,
    EquivalentPlan,
    RankedPlan,
    SearchRequest,
    SearchResult,
    format_request_error,
    run_search,
)
from search.objectives import DEFAULT_MAX_MEMORY_FRACTION

_SPEC_HELP = "Preset name (see `autopar presets`) or a JSON/YAML file."
_CONSTRAINT_HELP = (
    "Constrain a dimension: DIM=VALUE, DIM=MIN..MAX (either end may be empty) or DIM=A,B,C. "
    "Repeatable. Dimensions: dp, tp, pp, cp, ep, vpp, micro_batch_size, zero_stage, "
    "num_gpus, recompute, sequence_parallel, offload_optimizer."
)


@cli.command("search")
def search_command(
    model: Annotated[str, typer.Option("--model", "-m", help=f"Model. {_SPEC_HELP}")],
    training: Annotated[str, typer.Option("--training", "-t", help=f"Training. {_SPEC_HELP}")],
    cluster: Annotated[str, typer.Option("--cluster", "-c", help=f"Cluster. {_SPEC_HELP}")],
    objective: Annotated[
        str, typer.Option(help=f"What to optimize: {', '.join(OBJECTIVES)}.")
    ] = "throughput",
    sampler: Annotated[str, typer.Option(help=f"How to search: {', '.join(SAMPLERS)}.")] = "auto",
    trials: Annotated[
        int | None, typer.Option(help="Optuna trial budget (default 300 without --timeout).")
    ] = None,
    timeout: Annotated[float | None, typer.Option(help="Time budget, seconds.")] = None,
    seed: Annotated[int | None, typer.Option(help="Sampler seed (same seed, same result).")] = None,
    top: Annotated[int, typer.Option(help="How many ranked plans to return.")] = 10,
    constraint: Annotated[
        list[str] | None, typer.Option("--constraint", "-C", help=_CONSTRAINT_HELP)
    ] = None,
    max_memory_fraction: Annotated[
        float,
        typer.Option(
            help="Use at most this fraction of each GPU's memory: headroom for the memory "
            "estimate's error (about ±15%) and the allocator's fragmentation; 1 uses it all."
        ),
    ] = DEFAULT_MAX_MEMORY_FRACTION,
    global_batch: Annotated[
        list[int] | None,
        typer.Option(help="Global batch size(s) to search over; default: the training's."),
    ] = None,
    group: Annotated[
        list[str] | None, typer.Option(help="Node group(s) plans may use; default: all.")
    ] = None,
    warm_start: Annotated[
        bool, typer.Option(help="Seed Optuna with heuristic plans (Megatron-, FSDP-style).")
    ] = True,
    storage: Annotated[
        str | None,
        typer.Option(help="Optuna storage URL (e.g. sqlite:///study.db): resumable study."),
    ] = None,
    study_name: Annotated[str | None, typer.Option(help="Study name in --storage.")] = None,
    calibration: CalibrationOption = None,
    framework: FrameworkOption = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the result as JSON (progress stays on stderr).")
    ] = False,
) -> None:
    """Search the plan space for the fastest, cheapest or Pareto-best plans."""
    fields: dict[str, Any] = {
        "model": load_or_fail("model", model),
        "training": with_framework(load_or_fail("training", training), framework),
        "cluster": load_or_fail("cluster", cluster),
        "objective": objective,
        "sampler": sampler,
        "trials": trials,
        "timeout_s": timeout,
        "seed": seed,
        "top_k": top,
        "constraints": parse_constraints(constraint or []),
        "max_memory_fraction": max_memory_fraction,
        "global_batch_sizes": global_batch or None,
        "groups": group or None,
        "warm_start": warm_start,
        "params": params_or_fail(calibration),
    }
    try:
        request = SearchRequest(**fields)
    except ValidationError as exc:
        fail(format_request_error(exc))
    stderr = Console(stderr=True)
    with _progress(stderr) as report:
        try:
            result = run_search(request, storage=storage, study_name=study_name, progress=report)
        except ValueError as exc:  # e.g. a study name holding another search
            fail(str(exc))
    if json_output:
        print(result.model_dump_json(indent=2))
    else:
        title = f"{model} · {training} · {cluster} · objective {request.objective}"
        Console(highlight=False).print(render_result(result, title=title))
    if not result.plans:
        no_fit(f"no plan fits: {summary(result)}")


# Input ----------------------------------------------------------------------------------------
def _scalar(text: str) -> int | bool | str:
    lowered = text.strip().lower()
    if lowered in ("true", "yes", "on"):
        return True
    if lowered in ("false", "no", "off"):
        return False
    try:
        return int(lowered)
    except ValueError:
        return text.strip()


def parse_constraints(items: list[str]) -> dict[str, Any]:
    """``tp=8``, ``pp=2..8``, ``pp=..8``, ``recompute=selective,full`` -> request constraints."""
    constraints: dict[str, Any] = {}
    for item in items:
        dim, sep, value = item.partition("=")
        dim = dim.strip()
        if not sep or not dim or not value.strip():
            fail(f"--constraint '{item}': expected DIM=VALUE, DIM=MIN..MAX or DIM=A,B,...")
        if ".." in value:
            low, _, high = value.partition("..")
            bounds = {"min": _scalar(low) if low.strip() else None}
            bounds["max"] = _scalar(high) if high.strip() else None
            constraints[dim] = bounds
        elif "," in value:
            constraints[dim] = [_scalar(part) for part in value.split(",") if part.strip()]
        else:
            constraints[dim] = _scalar(value)
    return constraints


class _Report:
    """Progress callback feeding a rich progress bar."""

    def __init__(self, progress: Progress | None) -> None:
        self.progress = progress
        self.task: Any = None

    def __call__(self, done: int, total: int | None, best: float | None) -> None:
        if self.progress is None:
            return
        text = f"best {best:,.6g}" if best is not None else "best —"
        if self.task is None:
            self.task = self.progress.add_task("searching", total=total, best=text)
        self.progress.update(self.task, completed=done, total=total, best=text)


def _progress(console: Console) -> Any:
    if not console.is_terminal:
        return nullcontext(_Report(None))
    progress = Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[best]}"),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )

    class _Context:
        def __enter__(self) -> _Report:
            progress.__enter__()
            return _Report(progress)

        def __exit__(
            self,
            exc_type: type[BaseException] | None,
            exc: BaseException | None,
            traceback: TracebackType | None,
        ) -> None:
            progress.__exit__(exc_type, exc, traceback)

    return _Context()


# Rendering ------------------------------------------------------------------------------------
def _number(value: float | None, fmt: str) -> str:
    if value is None or math.isnan(value) or math.isinf(value):
        return "—"
    return format(value, fmt)


def layout(plan: Plan) -> str:
    """Compact text of a plan's parallel layout."""
    if plan.stages is None:
        parts = [f"dp{plan.dp}", f"tp{plan.tp}", f"pp{plan.pp}"]
        degrees = (("cp", plan.cp), ("ep", plan.ep), ("vpp", plan.vpp))
        parts += [f"{name}{value}" for name, value in degrees if value > 1]
        text = " ".join(parts)
        return f"{text} @{plan.group}" if plan.group else text
    extras = " ".join(f"{n}{v}" for n, v in (("cp", plan.cp), ("vpp", plan.vpp)) if v > 1)
    first = plan.stages[0]
    if first.replicas is not None:
        counts: dict[tuple[str, int], int] = {}
        for replica in first.replicas:
            counts[(replica.group, replica.tp)] = counts.get((replica.group, replica.tp), 0) + 1
        pipelines = " + ".join(f"{n}×{g} tp{tp}" for (g, tp), n in counts.items())
        layers = "/".join(str(stage.num_layers) for stage in plan.stages)
        return f"pipelines {pipelines}, pp{plan.pp} ({layers} layers) {extras}".strip()
    stages = " → ".join(f"{s.group}:{s.num_layers}L tp{s.tp or plan.tp}" for s in plan.stages)
    return f"dp{plan.dp} {stages} {extras}".strip()


def _options(plan: Plan) -> str:
    parts = [f"mbs{plan.micro_batch_size}", f"zero{plan.zero_stage}", plan.recompute]
    if plan.offload_optimizer:
        parts.append("offload")
    if plan.sequence_parallel is False and plan.tp > 1:
        parts.append("no-sp")
    return " ".join(parts)


_SHORT = {"micro_batch_size": "mbs", "zero_stage": "zero", "recompute": ""}


def _difference(equivalent: EquivalentPlan) -> str:
    """What sets an equivalent apart from its entry: 'dp16 cp2 mbs2', 'zero2', 'offload'."""
    plan = equivalent.plan
    parts = []
    for name in equivalent.differs:
        value = getattr(plan, name)
        if name == "offload_optimizer":
            parts.append("offload" if value else "no-offload")
        elif name == "sequence_parallel":
            parts.append("sp" if plan.sp else "no-sp")
        elif isinstance(value, int | str) and not isinstance(value, bool):
            parts.append(f"{_SHORT.get(name, name)}{value}")
    return " ".join(parts) or "same plan"


def _layout_cell(ranked: RankedPlan) -> Text:
    """The layout, and "+N equivalent" under it when near-ties fold into the row."""
    cell = Text(layout(ranked.plan))  # group names are user input: never rich markup
    if ranked.equivalents:
        cell.append(f"\n+{len(ranked.equivalents)} equivalent", style="dim")
    return cell


def plan_equivalents(plans: list[RankedPlan], objective_names: list[str]) -> list[Text]:
    """One line per entry with near-ties: what each differs in, and its objective value."""
    lines = []
    name = objective_names[0].replace("_", " ") if objective_names else "objective"
    for ranked in plans:
        if not ranked.equivalents:
            continue
        parts = [
            f"{_difference(equivalent)} ({_number(equivalent.objective_values[0], ',.6g')})"
            for equivalent in ranked.equivalents
        ]
        lines.append(Text(f"#{ranked.rank} ≈ " + "; ".join(parts) + f"  [{name}]", style="dim"))
    return lines


def plans_table(plans: list[RankedPlan], title: str) -> Table:
    table = Table(title=title, title_justify="left")
    for column in ("#", "GPUs", "layout", "options", "tokens/s", "MFU", "peak GiB", "$/M tok"):
        table.add_column(column, justify="left" if column in ("layout", "options") else "right")
    for ranked in plans:
        estimate = ranked.estimate
        # The fullest stage (by share of its GPU's memory): on mixed GPUs the largest peak may
        # sit on the largest memory.
        fullest = max(estimate.per_stage, key=lambda s: s.peak_memory_gib / s.capacity_gib)
        table.add_row(
            str(ranked.rank) + ("!" if estimate.warnings else ""),
            f"{estimate.num_gpus:,}",
            _layout_cell(ranked),
            _options(ranked.plan),
            _number(estimate.tokens_per_s, ",.0f"),
            _number(estimate.mfu * 100, ".1f") + " %",
            f"{_number(fullest.peak_memory_gib, ',.1f')} / {_number(fullest.capacity_gib, ',.0f')}",
            _number(estimate.usd_per_million_tokens, ",.3f"),
        )
    return table


def plan_warnings(plans: list[RankedPlan]) -> list[Text]:
    """One line per warning of the ranked plans ('!' in the table)."""
    return [
        Text(f"#{ranked.rank}: {warning}", style="yellow")
        for ranked in plans
        for warning in ranked.estimate.warnings
    ]


def summary(result: SearchResult) -> str:
    rate = result.evaluated / result.elapsed_s if result.elapsed_s > 0 else math.nan
    what = "valid plans" if result.sampler == "exhaustive" else "plans"
    text = (
        f"{result.sampler}: evaluated {result.evaluated:,} {what} ({result.feasible:,} fit in "
        f"memory) in {result.elapsed_s:,.1f} s, {_number(rate, ',.0f')} plans/s"
    )
    if result.trials is not None:
        text += f"; {result.trials:,} trials in study '{result.study_name}'"
    if result.space_size is not None and result.sampler != "exhaustive":
        text += f"; the space holds {result.space_size:,} valid homogeneous plans"
    if result.status != "completed":
        text += f"; {result.status} before the budget was spent"
    return text


def render_result(result: SearchResult, *, title: str) -> Any:
    from rich.console import Group

    parts: list[Any] = [Text(title, style="bold underline"), Text(summary(result))]
    if result.plans:
        heading = "Pareto front (fastest to cheapest)" if result.pareto_front else "Best plans"
        heading += (
            f" (one row per layout; near-ties within {result.near_tie_tolerance:.1%} fold into it)"
        )
        parts.append(plans_table(result.plans, heading))
        parts.extend(plan_equivalents(result.plans, result.objective_names))
        parts.extend(plan_warnings(result.plans))
    if result.single_type_best is not None and result.gain_over_single_type is not None:
        parts.append(plans_table([result.single_type_best], "Best plan on a single GPU type"))
        parts.append(
            Text(
                f"gain of the best plan over the best single-GPU-type plan: "
                f"{result.gain_over_single_type * 100:+.1f} %",
                style="bold",
            )
        )
    for note in result.notes:
        parts.append(Text(f"note: {note}", style="yellow"))
    return Group(*parts)
