"""The FastAPI application: ``create_app`` wires settings, database, error handling and routers.

``uvicorn app.main:create_app --factory`` and ``autopar serve`` both end up here; the lifespan
migrates the database and loads the catalog first unless ``migrate_on_startup`` is off.
"""

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio.to_thread
from fastapi import FastAPI
from sqlalchemy import Engine
from sqlalchemy.orm import Session, sessionmaker

from app.auth.access import admit_before_errors
from app.calibrations.router import router as calibrations_router
from app.clusters.router import router as clusters_router
from app.dashboard import install_dashboard
from app.db import is_sqlite, make_engine, make_session_factory, redact
from app.errors import TRAILING_SLASH_REDIRECT, error_responses, install_handlers
from app.estimates.router import router as estimates_router
from app.gpus.router import router as gpus_router
from app.health.router import router as health_router
from app.middleware import BodySizeLimitMiddleware
from app.migrate import upgrade_to_head
from app.modelspecs.router import router as models_router
from app.observations.router import router as observations_router
from app.plans.router import router as plans_router
from app.presets.router import router as presets_router
from app.presets.service import sync_catalog
from app.profiles.router import router as profiles_router
from app.searches.router import router as searches_router
from app.serving import tune_process
from app.settings import Settings
from app.webhooks.router import router as webhooks_router
from app.workers.embedded import EmbeddedWorker
from app.workers.service import WorkerOptions

logger = logging.getLogger(__name__)


def prepare_database(engine: Engine) -> None:
    """Migrate to head and load the built-in catalog; both are idempotent."""
    upgrade_to_head(engine)
    with Session(engine) as session:
        report = sync_catalog(session)
    logger.info(
        "database %s ready: catalog %d added, %d updated, %d removed",
        redact(engine.url),
        report.added,
        report.updated,
        report.removed,
    )


def create_app(
    settings: Settings | None = None, *, session_factory: sessionmaker[Session] | None = None
) -> FastAPI:
    """Build the app. Tests pass ``session_factory`` (bound to a connection they roll back) and
    settings with ``migrate_on_startup=False``."""
    settings = settings or Settings()
    engine = (
        None
        if session_factory is not None
        else make_engine(settings.database_url, settings.database_timeouts())
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if engine is not None and settings.migrate_on_startup:
            prepare_database(engine)
        worker = _embedded_worker(settings, engine)
        if worker is not None:
            worker.start()
        tune_process(settings)
        yield
        if worker is not None:
            await anyio.to_thread.run_sync(worker.stop)
        if engine is not None:
            engine.dispose()

    app = FastAPI(
        title="autopar",
        summary="Auto-parallelism planner for training large transformer models.",
        version="v1",
        lifespan=lifespan,
        # Served by the dashboard from vendored assets instead of a CDN (offline clusters).
        docs_url=None,
        redoc_url=None,
        # What any operation may answer, whatever it does: its path with a trailing slash (an
        # empty last path parameter included) redirected without it (307), a method the path
        # does not serve (405, with Allow), the database away (503, with Retry-After), a bug (500).
        responses={307: TRAILING_SLASH_REDIRECT, **error_responses(405, 500, 503)},
    )
    app.state.settings = settings
    app.state.session_factory = session_factory or make_session_factory(engine)
    install_handlers(app)
    app.add_middleware(BodySizeLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    # A request is matched against the routers in this order, one route at a time, so the ones
    # schedulers and dashboards call most come first (matching the estimate's path behind five
    # routers was a tenth of its event-loop time). No two routers serve the same path.
    for router in (
        estimates_router,
        searches_router,
        webhooks_router,
        plans_router,
        health_router,
        gpus_router,
        models_router,
        clusters_router,
        presets_router,
        profiles_router,
        observations_router,
        calibrations_router,
    ):
        # Every route but the public ones admits its caller by API key: a 401 when refused.
        public = router in (health_router, presets_router)
        app.include_router(router, responses=None if public else error_responses(401))
    install_dashboard(app)
    # Last: it wraps the error handlers installed above (API keys are checked lazily, app.db).
    admit_before_errors(app)
    return app


def _embedded_worker(settings: Settings, engine: Engine | None) -> EmbeddedWorker | None:
    """The in-process search worker, unless turned off or the app runs on a test session."""
    if engine is None or not settings.embedded_worker:
        return None
    if is_sqlite(engine.url) and engine.url.database in (None, "", ":memory:"):
        # Every thread would see its own empty in-memory database.
        logger.warning("no embedded search worker on an in-memory SQLite database")
        return None
    return EmbeddedWorker(
        session_factory=make_session_factory(engine),
        database_url=settings.database_url,
        options=WorkerOptions(
            lease_s=settings.worker_lease_s,
            poll_s=settings.worker_poll_s,
            db_timeouts=settings.database_timeouts(),
            webhook_secret=settings.webhook_secret,
        ),
    )
