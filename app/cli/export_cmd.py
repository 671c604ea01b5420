"""``autopar export``: write a plan as the files its framework's launcher reads.

``PLAN`` is a plan a search stored (its id: the service at ``--url`` exports it) or, with
``--model``, ``--training`` and ``--cluster``, a plan preset or file exported here, offline.
"""

import os
import stat
import sys
from pathlib import Path
from typing import Annotated, cast

import typer

from app.cli import cli
from app.cli._common import fail, load_or_fail
from app.exports import (
    EXPORT_FORMATS,
    LAUNCH_FRAMEWORKS,
    ExportError,
    ExportFormat,
    ExportResult,
    LaunchFramework,
    build_export,
)
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec

_SPEC_HELP = "Preset name or a JSON/YAML file (exports offline, with the other two)."
_EXECUTABLE = (".sh", ".sbatch")


@cli.command("export")
def export_command(
    plan: Annotated[
        str,
        typer.Argument(
            help="A stored plan's id (exported by the service at --url), or a plan preset or "
            "file together with --model, --training and --cluster."
        ),
    ],
    format: Annotated[
        str, typer.Option("--format", "-f", help=f"One of: {', '.join(EXPORT_FORMATS)}.")
    ],
    framework: Annotated[
        str | None,
        typer.Option(
            help=f"Launcher slurm/kubernetes wrap ({', '.join(LAUNCH_FRAMEWORKS)}); default: "
            "the first framework that can launch the plan."
        ),
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help=_SPEC_HELP)] = None,
    training: Annotated[str | None, typer.Option("--training", "-t", help=_SPEC_HELP)] = None,
    cluster: Annotated[str | None, typer.Option("--cluster", "-c", help=_SPEC_HELP)] = None,
    url: Annotated[
        str | None,
        typer.Option(
            help="The autopar service, for a stored plan. Default: AUTOPAR_URL or localhost."
        ),
    ] = None,
    api_key: Annotated[
        str | None, typer.Option(help="API key (bearer token). Default: AUTOPAR_API_KEY.")
    ] = None,
    image: Annotated[
        str | None, typer.Option(help="Container image for the kubernetes export.")
    ] = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the files into this directory.")
    ] = None,
    json_output: Annotated[
        bool, typer.Option("--json", help="Print the whole export (files included) as JSON.")
    ] = False,
) -> None:
    """Export a plan for Megatron-LM/NeMo, DeepSpeed, torchtitan, Slurm or Kubernetes."""
    if format not in EXPORT_FORMATS:
        fail(f"--format: '{format}' is not one of {', '.join(EXPORT_FORMATS)}")
    if framework is not None and framework not in LAUNCH_FRAMEWORKS:
        fail(f"--framework: '{framework}' is not one of {', '.join(LAUNCH_FRAMEWORKS)}")
    specs = {"--model": model, "--training": training, "--cluster": cluster}
    if any(value is not None for value in specs.values()):
        missing = [name for name, value in specs.items() if value is None]
        if missing:
            fail(
                "an offline export needs --model, --training and --cluster "
                f"(missing {', '.join(missing)})"
            )
        result: ExportResult = _export_offline(
            plan, model, training, cluster, format=format, framework=framework, image=image
        )
    elif Path(plan).is_file():
        fail(f"plan file '{plan}' needs --model, --training and --cluster")
    else:
        result = _export_stored(url, api_key, plan, format=format, framework=framework, image=image)
    for warning in result.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if json_output:
        print(result.model_dump_json(indent=2))
    elif out is not None:
        _write(result, out)
    elif len(result.files) == 1:
        sys.stdout.write(result.files[0].content)
    else:
        for file in result.files:
            sys.stdout.write(f"# ==> {file.name} <==\n{file.content}\n")


def _export_offline(
    plan: str,
    model: str | None,
    training: str | None,
    cluster: str | None,
    *,
    format: str,
    framework: str | None,
    image: str | None,
) -> ExportResult:
    specs = (
        load_or_fail("model", model or ""),
        load_or_fail("training", training or ""),
        load_or_fail("cluster", cluster or ""),
        load_or_fail("plan", plan),
    )
    assert isinstance(specs[0], ModelSpec) and isinstance(specs[1], TrainingSpec)
    assert isinstance(specs[2], ClusterSpec) and isinstance(specs[3], Plan)
    try:
        return build_export(
            *specs,
            format=cast(ExportFormat, format),  # checked against EXPORT_FORMATS by export()
            framework=framework,
            image=image,
        )
    except ExportError as exc:
        fail(str(exc))


def _export_stored(
    url: str | None,
    api_key: str | None,
    plan_id: str,
    *,
    format: str,
    framework: str | None,
    image: str | None,
) -> ExportResult:
    from app.client import ApiError, AutoparClient, AutoparError

    try:
        with AutoparClient(url, api_key=api_key) as autopar:
            # Both were checked against EXPORT_FORMATS / LAUNCH_FRAMEWORKS by the command.
            return autopar.export_plan(
                plan_id,
                cast(ExportFormat, format),
                framework=cast(LaunchFramework | None, framework),
                image=image,
            )
    except ApiError as exc:
        fail(f"plan '{plan_id}': {exc.message} (HTTP {exc.status_code})")
    except AutoparError as exc:
        fail(str(exc))


def _write(result: ExportResult, out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
        for file in result.files:
            path = out / file.name
            path.write_text(file.content)
            if file.name.endswith(_EXECUTABLE):
                mode = path.stat().st_mode
                os.chmod(path, mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
            print(path)
    except OSError as exc:
        fail(f"--out {out}: {exc}")
    print(f"# {result.command}", file=sys.stderr)
