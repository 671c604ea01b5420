"""``autopar`` command line. Each command lives in its own module and registers itself here."""

import typer

cli = typer.Typer(
    name="autopar",
    help="Auto-parallelism planner for training large transformer models.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def register_commands() -> None:
    # Imported for their side effect of adding commands to ``cli``.
    from app.cli import (  # noqa: F401
        calibrate_cmd,
        catalog_cmd,
        estimate_cmd,
        export_cmd,
        keys_cmd,
        profile_cmd,
        search_cmd,
        serve_cmd,
        submit_cmd,
        validate_cmd,
        worker_cmd,
    )


def main() -> None:
    register_commands()
    cli()
