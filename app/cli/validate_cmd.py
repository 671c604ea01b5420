"""``autopar validate``: compare the cost model with published training runs."""

import json
from pathlib import Path
from typing import Annotated

import typer

from app.cli import cli
from app.cli._common import fail


@cli.command("validate")
def validate_command(
    data: Annotated[
        Path,
        typer.Option(
            "--data", help="Folder holding the data set's runs.csv (and layer_times.csv)."
        ),
    ] = Path("validation"),
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the summary as a Markdown table.")
    ] = False,
) -> None:
    """Score the cost model against the measured runs in DATA/runs.csv (default ./validation)."""
    if as_json and markdown:
        fail("--json and --markdown are alternatives; pass one")
    # Imported lazily: the harness and its report are not needed by other commands.
    from app.validation import DataSetError, run
    from app.validation.report import format_markdown, format_text, to_dict

    try:
        report = run(data)
    except DataSetError as exc:
        fail(str(exc))
    if as_json:
        print(json.dumps(to_dict(report), indent=2))
    elif markdown:
        print(format_markdown(report))
    else:
        print(format_text(report))
