"""``autopar serve``: migrate the database, load the catalog and serve the REST API."""

import copy
import os
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from app.cli import cli
from app.cli._common import fail
from app.cli.serve_processes import reuse_port_supported, serve_processes
from costmodel.errors import format_validation_error


@cli.command("serve")
def serve_command(
    host: Annotated[
        str | None, typer.Option(help="Interface to bind. Default: AUTOPAR_HOST or 127.0.0.1.")
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(min=1, max=65535, help="Port to bind. Default: AUTOPAR_PORT or 8000."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(
            min=1, max=64, help="API processes sharing the port. Default: AUTOPAR_WORKERS or 1."
        ),
    ] = None,
    reload: Annotated[
        bool, typer.Option(help="Restart when the code changes (development).")
    ] = False,
    access_log: Annotated[bool, typer.Option(help="Log one line per request.")] = True,
) -> None:
    """Serve the API (OpenAPI at /docs) on the database named by AUTOPAR_DATABASE_URL
    (default: ./autopar.db), migrating it and loading the built-in catalog first."""
    # Imported here: the other commands should not pay for the web stack.
    import uvicorn

    from app.settings import Settings

    try:
        settings = Settings()
    except ValidationError as exc:
        fail(format_validation_error(exc, prefix="AUTOPAR"))
    options: dict[str, Any] = {
        "host": host or settings.host,
        "port": port or settings.port,
        "log_level": settings.log_level,
        "log_config": _log_config(settings.log_level),
        "access_log": access_log,
        # asyncio's own loop, not uvloop: a read-only request runs in the loop's
        # thread (app.db.run_read_in_session), so under load a turn of the loop is long, and
        # uvloop then left new connections in the listen queue for seconds (28 of 64 opened
        # at once still there 4 s later; their first requests timed out). asyncio accepts all
        # waiting connections each turn: 180 against 164 req/s and no time-outs (wrk, 64
        # connections, 1 process, SQLite).
        "loop": "asyncio",
    }
    process_count = workers or settings.workers
    if process_count == 1 and not reload:
        from app.main import create_app

        uvicorn.run(create_app(settings), **options)
        return
    # Several processes (or a reloading child) import the app themselves, through the factory
    # and the same environment. Prepare the database once, here, rather than racing N times.
    if settings.migrate_on_startup:
        _prepare_database(settings.database_url, settings.log_level)
        os.environ["AUTOPAR_MIGRATE_ON_STARTUP"] = "false"
    if reload or not reuse_port_supported():
        uvicorn.run(
            "app.main:create_app", factory=True, workers=process_count, reload=reload, **options
        )
        return
    try:
        code = serve_processes(process_count, options)
    except OSError as exc:
        fail(f"cannot listen on {options['host']}:{options['port']}: {exc.strerror or exc}")
    raise typer.Exit(code)


def _prepare_database(url: str, log_level: str) -> None:
    import logging.config

    from app.db import make_engine
    from app.main import prepare_database

    logging.config.dictConfig(_log_config(log_level))
    engine = make_engine(url)
    try:
        prepare_database(engine)
    finally:
        engine.dispose()


def _log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging setup, plus the application's own ``app.*`` loggers."""
    from uvicorn.config import LOGGING_CONFIG

    config = copy.deepcopy(LOGGING_CONFIG)
    config["loggers"]["app"] = {"handlers": ["default"], "level": level.upper(), "propagate": False}
    return config
