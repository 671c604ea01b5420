"""``autopar worker``: claim queued searches from the database and run them, until stopped."""

import logging
import signal
from types import FrameType
from typing import Annotated

import typer
from pydantic import ValidationError

from app.cli import cli
from app.cli._common import fail
from costmodel.errors import format_validation_error

logger = logging.getLogger("app.workers")


@cli.command("worker")
def worker_command(
    database_url: Annotated[
        str | None,
        typer.Option(help="Database to serve. Default: AUTOPAR_DATABASE_URL or ./autopar.db."),
    ] = None,
    lease_s: Annotated[
        float | None,
        typer.Option(
            min=1,
            max=3600,
            help="Seconds a claim lasts without a heartbeat (a dead worker's search is taken "
            "over after this long). Default: AUTOPAR_WORKER_LEASE_S or 60.",
        ),
    ] = None,
    poll_s: Annotated[
        float | None,
        typer.Option(
            min=0.01,
            max=300,
            help="Seconds between looks at an empty queue. Default: AUTOPAR_WORKER_POLL_S or 1.",
        ),
    ] = None,
    once: Annotated[
        bool,
        typer.Option(
            help="Run at most one search, try the due webhooks once, then exit (cron jobs, tests)."
        ),
    ] = False,
) -> None:
    """Run searches queued by the API: any number of workers on any machines may share one
    PostgreSQL database, and several may serve one Optuna study. SIGTERM or Ctrl-C stops after
    the current batch of trials and puts the search back in the queue for the next worker."""
    from app.db import make_engine, make_session_factory, redact
    from app.migrate import upgrade_to_head
    from app.settings import Settings
    from app.workers.service import SearchWorker, WorkerOptions

    try:
        settings = Settings()
    except ValidationError as exc:
        fail(format_validation_error(exc, prefix="AUTOPAR"))
    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    url = database_url or settings.database_url
    engine = make_engine(url, settings.database_timeouts())
    try:
        if settings.migrate_on_startup:
            upgrade_to_head(engine)
        worker = SearchWorker(
            session_factory=make_session_factory(engine),
            database_url=url,
            options=WorkerOptions(
                lease_s=lease_s or settings.worker_lease_s,
                poll_s=poll_s or settings.worker_poll_s,
                db_timeouts=settings.database_timeouts(),
                webhook_secret=settings.webhook_secret,
            ),
        )
        logger.info("worker %s on %s", worker.worker_id, redact(url))
        if once:
            search_id = worker.run_once()
            print(f"ran search {search_id}" if search_id else "no search queued")
            worker.deliver_webhooks()  # due ones, its own included: one attempt each
            return

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            logger.info("signal %d: stopping after the current batch", signum)
            worker.stop()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        worker.run_forever()
    finally:
        engine.dispose()
