"""``autopar validate``: compare the cost model with published training runs."""

import importlib

import typer

from app.cli import cli
from app.cli._common import fail


@cli.command("validate")
def validate_command() -> None:
    """Score the cost model against the measured runs in validation/runs.csv."""
    # Imported lazily: the validation harness reads CSVs and is not needed by other commands.
    try:
        validation = importlib.import_module("costmodel.validation")
    except ModuleNotFoundError as exc:
        if exc.name != "costmodel.validation":
            raise
        fail("costmodel.validation is not available in this installation")
    status = validation.main()
    if isinstance(status, int) and status:
        raise typer.Exit(code=status)
