"""``autopar submit``: queue a search on the service, wait for it, print the best plan's export.

Scheduler-facing: stdout holds only the answer (the search id, the best plan's id, or its launch
files), progress goes to stderr, and each way of failing has its own exit status:

    0  done
    2  bad input, or the service refused it (a bad spec, a 422, an export it cannot launch)
    3  the search finished and no plan fits
    4  the search failed or was cancelled, or --wait-timeout-s passed (the search runs on)
    5  the service is unreachable or answered 5xx (after the client's retries)
    130  interrupted: Ctrl-C stops the wait, not the search
"""

import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn, cast

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from app.cli import cli
from app.cli._common import fail, load_or_fail, no_fit
from app.cli.export_cmd import _write as write_files
from app.cli.search_cmd import parse_constraints
from app.client import (
    ApiError,
    AutoparClient,
    AutoparError,
    ServiceUnreachableError,
    WaitTimeoutError,
)
from app.exports import (
    EXPORT_FORMATS,
    LAUNCH_FRAMEWORKS,
    ExportFormat,
    LaunchFramework,
    PlanExport,
)
from app.exports.schemas import FORMAT_FRAMEWORK
from app.searches.schemas import SearchCreate, SearchRecord
from costmodel.catalog import SpecKind
from costmodel.errors import format_validation_error
from search import OBJECTIVES, SAMPLERS

EXIT_SEARCH_FAILED = 4
EXIT_UNAVAILABLE = 5
EXIT_INTERRUPTED = 130  # as a shell reports SIGINT
_SPEC_HELP = (
    "A JSON/YAML file (sent inline) or a name the service knows: a preset, or for --model and "
    "--cluster a stored one."
)
# Without a terminal (a batch job's log), a progress line at most this often.
_LINE_EVERY_S = 10.0


def _out_of_service(message: str) -> NoReturn:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(code=EXIT_UNAVAILABLE)


def _search_failed(message: str) -> NoReturn:
    print(f"error: {' '.join(message.split())}", file=sys.stderr)
    raise typer.Exit(code=EXIT_SEARCH_FAILED)


def _refused(what: str, error: AutoparError) -> NoReturn:
    """A client error as the exit status it belongs to."""
    if isinstance(error, ServiceUnreachableError):
        _out_of_service(str(error))
    if isinstance(error, ApiError):
        if error.status_code >= 500:
            _out_of_service(f"{what}: {error}")
        fail(f"{what}: {error}")
    _out_of_service(f"{what}: {error}")


@cli.command("submit")
def submit_command(
    model: Annotated[str, typer.Option("--model", "-m", help=f"Model. {_SPEC_HELP}")],
    training: Annotated[str, typer.Option("--training", "-t", help=f"Training. {_SPEC_HELP}")],
    cluster: Annotated[str, typer.Option("--cluster", "-c", help=f"Cluster. {_SPEC_HELP}")],
    objective: Annotated[
        str, typer.Option(help=f"What to optimize: {', '.join(OBJECTIVES)}.")
    ] = "throughput",
    sampler: Annotated[str, typer.Option(help=f"How to search: {', '.join(SAMPLERS)}.")] = "auto",
    trials: Annotated[int | None, typer.Option(help="Optuna trial budget.")] = None,
    timeout_s: Annotated[
        float | None, typer.Option("--timeout-s", help="The search's time budget, seconds.")
    ] = None,
    constraint: Annotated[
        list[str] | None,
        typer.Option("--constraint", "-C", help="DIM=VALUE, DIM=MIN..MAX or DIM=A,B (as search)."),
    ] = None,
    framework: Annotated[
        str | None,
        typer.Option(
            help=f"Plans for this launcher ({', '.join(LAUNCH_FRAMEWORKS)}); the one slurm and "
            "kubernetes exports wrap. Default: the --format's, else the training's."
        ),
    ] = None,
    name: Annotated[str | None, typer.Option(help="Label of the search.")] = None,
    wait: Annotated[
        bool, typer.Option("--wait", help="Wait for the search; print the best plan's export.")
    ] = False,
    format: Annotated[
        str | None,
        typer.Option(
            "--format", "-f", help=f"Export of the best plan: {', '.join(EXPORT_FORMATS)}."
        ),
    ] = None,
    image: Annotated[
        str | None, typer.Option(help="Container image for the kubernetes export.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the export's files into DIR.")
    ] = None,
    wait_timeout_s: Annotated[
        float | None, typer.Option(help="Give up waiting after this long (exit 4).")
    ] = None,
    poll_s: Annotated[float, typer.Option(min=0.01, help="Seconds between looks.")] = 2.0,
    idempotency_key: Annotated[
        str | None,
        typer.Option(help="Idempotency-Key: a rerun with the same key resumes the same search."),
    ] = None,
    url: Annotated[
        str | None, typer.Option(help="The autopar service. Default: AUTOPAR_URL or localhost.")
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (bearer token). Default: AUTOPAR_API_KEY.")
    ] = None,
) -> None:
    """Submit a search to the service; with --wait, print the best plan's export on stdout."""
    _check_options(format=format, framework=framework, wait=wait, out=out)
    launcher = framework or (FORMAT_FRAMEWORK.get(format) if format else None)
    request = _request(
        model,
        training,
        cluster,
        framework=launcher,
        fields={
            "name": name,
            "objective": objective,
            "sampler": sampler,
            "trials": trials,
            "timeout_s": timeout_s,
            "constraints": parse_constraints(constraint or []),
        },
    )
    export_options = _ExportOptions(
        # _check_options has checked both against EXPORT_FORMATS and LAUNCH_FRAMEWORKS.
        cast(ExportFormat | None, format),
        cast(LaunchFramework | None, framework),
        image,
        wait_timeout_s,
    )
    with AutoparClient(url, api_key=api_key) as autopar:
        try:
            search = autopar.create_search(request, idempotency_key=idempotency_key)
        except AutoparError as exc:
            _refused("search refused", exc)
        try:
            print(f"search {search.id} {search.status}", file=sys.stderr)
            export = _follow(autopar, search.id, wait=wait, export=export_options, poll_s=poll_s)
        except KeyboardInterrupt:
            # Stopping the wait is not cancelling the search: say where it is.
            print(f"interrupted: search {search.id} runs on at {autopar.base_url}", file=sys.stderr)
            raise typer.Exit(code=EXIT_INTERRUPTED) from None
    if export is not None:
        _emit(export, out)


@dataclass(frozen=True)
class _ExportOptions:
    format: ExportFormat | None
    framework: LaunchFramework | None
    image: str | None
    wait_timeout_s: float | None


def _follow(
    autopar: AutoparClient, search_id: str, *, wait: bool, export: _ExportOptions, poll_s: float
) -> PlanExport | None:
    """Print the search id, or wait and print the best plan's id, or return its export."""
    if not wait:
        print(search_id)
        return None
    done = _wait(autopar, search_id, timeout_s=export.wait_timeout_s, poll_s=poll_s)
    best = _best_plan(autopar, done)
    if export.format is None:
        print(best)
        return None
    try:
        return autopar.export_plan(
            best,
            export.format,
            framework=export.framework,
            image=export.image,
        )
    except AutoparError as exc:
        _refused(f"export of plan {best}", exc)


def _check_options(
    *, format: str | None, framework: str | None, wait: bool, out: Path | None
) -> None:
    if format is not None and format not in EXPORT_FORMATS:
        fail(f"--format: '{format}' is not one of {', '.join(EXPORT_FORMATS)}")
    if framework is not None and framework not in LAUNCH_FRAMEWORKS:
        fail(f"--framework: '{framework}' is not one of {', '.join(LAUNCH_FRAMEWORKS)}")
    implied = FORMAT_FRAMEWORK.get(format or "")
    if framework is not None and implied is not None and framework != implied:
        fail(f"--framework {framework} contradicts --format {format} (a {implied} export)")
    if (format is not None or out is not None) and not wait:
        fail("--format and --out need --wait (the export is of the finished search's best plan)")


def _spec_field(kind: SpecKind, value: str) -> tuple[str, Any]:
    """A file is loaded here and sent inline; a name is sent for the service to resolve."""
    if Path(value).is_file():
        return kind, load_or_fail(kind, value)
    return {"model": "model_id", "cluster": "cluster_id"}.get(kind, kind), value


def _request(
    model: str, training: str, cluster: str, *, framework: str | None, fields: dict[str, Any]
) -> SearchCreate:
    body: dict[str, Any] = dict([_spec_field("model", model), _spec_field("cluster", cluster)])
    if framework is not None:
        # Plans the export's launcher can run: the training says so (a preset is read here).
        spec = load_or_fail("training", training)
        body["training"] = spec.model_copy(update={"framework": framework})
    else:
        body["training"] = _spec_field("training", training)[1]
    body |= {name: value for name, value in fields.items() if value is not None}
    try:
        return SearchCreate.model_validate(body)
    except ValidationError as exc:
        fail(format_validation_error(exc))


# Waiting ----------------------------------------------------------------------------------------
class _Progress:
    """The search's progress on stderr: a bar on a terminal, else a line now and then."""

    def __init__(self) -> None:
        console = Console(stderr=True)
        self._bar: Progress | None = None
        self._task: Any = None
        self._last_line = 0.0
        if console.is_terminal:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[best]}"),
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.start()

    def __call__(self, record: SearchRecord) -> None:
        progress = record.progress
        best = (
            f"best {progress.best.value:,.6g} {progress.best.metric}"
            if progress.best is not None
            else "best —"
        )
        if self._bar is not None:
            if self._task is None:
                self._task = self._bar.add_task(record.status, total=None, best=best)
            self._bar.update(
                self._task,
                description=record.status,
                completed=progress.trials_done,
                total=progress.trials_budget,
                best=best,
            )
            return
        now = time.monotonic()
        if now - self._last_line >= _LINE_EVERY_S or record.status != "running":
            self._last_line = now
            budget = f"/{progress.trials_budget:,}" if progress.trials_budget else ""
            print(
                f"search {record.id} {record.status}: {progress.trials_done:,}{budget} trials, "
                f"{best}",
                file=sys.stderr,
            )

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()


def _wait(
    autopar: AutoparClient, search_id: str, *, timeout_s: float | None, poll_s: float
) -> SearchRecord:
    progress = _Progress()
    try:
        done = autopar.wait_for(search_id, timeout_s=timeout_s, poll_s=poll_s, on_progress=progress)
    except WaitTimeoutError as exc:
        _search_failed(f"{exc}; it runs on (autopar submit again, or cancel it)")
    except AutoparError as exc:
        _refused(f"search {search_id}", exc)
    finally:
        progress.close()
    if done.status != "succeeded":
        reason = f": {done.error}" if done.error else ""
        _search_failed(f"search {search_id} {done.status}{reason}")
    return done


def _best_plan(autopar: AutoparClient, search: SearchRecord) -> str:
    try:
        plans = autopar.search_plans(search.id).items
    except AutoparError as exc:
        _refused(f"plans of search {search.id}", exc)
    if not plans:
        progress = search.progress
        counts = (
            f" ({progress.evaluated:,} plans evaluated, {progress.feasible or 0:,} fit in memory)"
            if progress.evaluated is not None
            else ""
        )
        no_fit(f"no plan fits: search {search.id} found none{counts}")
    return plans[0].id


def _emit(export: PlanExport, out: Path | None) -> None:
    """The files on stdout (several: each after a ``# ==> name <==`` line), or into ``out``."""
    for warning in export.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if out is not None:
        write_files(export, out)
    elif len(export.files) == 1:
        sys.stdout.write(export.files[0].content)
    else:
        for file in export.files:
            sys.stdout.write(f"# ==> {file.name} <==\n{file.content}\n")
