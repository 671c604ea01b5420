"""Service settings, read from ``AUTOPAR_*`` environment variables (pydantic-settings)."""

from typing import TYPE_CHECKING, Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

if TYPE_CHECKING:
    from app.common.limits import ServiceLimits
    from app.db import DatabaseTimeouts

LogLevel = Literal["critical", "error", "warning", "info", "debug"]


class Settings(BaseSettings):
    """Every field is also an environment variable: ``database_url`` is ``AUTOPAR_DATABASE_URL``."""

    model_config = SettingsConfigDict(env_prefix="AUTOPAR_", extra="ignore", frozen=True)

    database_url: str = Field(
        default="sqlite:///./autopar.db",
        description=(
            "SQLAlchemy URL. The embedded default is a SQLite file in the working directory; "
            "PostgreSQL: postgresql+psycopg://user:password@host:5432/dbname."
        ),
    )
    host: str = Field(default="127.0.0.1", description="Interface `autopar serve` binds to.")
    port: int = Field(default=8000, ge=1, le=65535, description="Port `autopar serve` binds to.")
    workers: int = Field(
        default=1,
        ge=1,
        le=64,
        description="API processes `autopar serve` starts (uvicorn workers sharing the port).",
    )
    max_body_bytes: int = Field(
        default=1_048_576,
        ge=1024,
        description="Largest accepted request body; larger bodies get 413.",
    )
    migrate_on_startup: bool = Field(
        default=True,
        description=(
            "Apply Alembic migrations and load the built-in catalog when the API starts. Turn it "
            "off when a deployment step migrates instead."
        ),
    )
    log_level: LogLevel = Field(default="info", description="Log level of the API and uvicorn.")
    embedded_worker: bool = Field(
        default=True,
        description=(
            "Run a search worker in a thread of each API process. Turn it off when `autopar "
            "worker` processes serve the database instead (docker-compose does)."
        ),
    )
    request_threads: int = Field(
        default=4,
        ge=1,
        le=1000,
        description=(
            "Threads per API process that run the database-backed part of requests. Requests "
            "beyond them wait their turn; a few threads serve most throughput and the shortest "
            "tail (app.serving). Raise it when the database is remote and slow to answer."
        ),
    )
    freeze_startup_objects: bool = Field(
        default=True,
        description=(
            "Take the objects alive after startup out of Python's garbage collector's full "
            "collections (gc.freeze): they live as long as the process, and walking them stalled "
            "requests by 100+ ms under load."
        ),
    )
    worker_lease_s: float = Field(
        default=60.0,
        ge=1,
        le=3600,
        description=(
            "How long a worker's claim on a search lasts without a heartbeat; a dead worker's "
            "search is taken over after this long."
        ),
    )
    worker_poll_s: float = Field(
        default=1.0, gt=0, le=300, description="Pause between looks at an empty search queue."
    )
    db_connect_timeout_s: float = Field(
        default=5.0,
        ge=1,
        le=300,
        description="PostgreSQL: seconds to establish a connection before giving up (a 503).",
    )
    db_statement_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        description=(
            "PostgreSQL: the server cancels a statement running longer (statement_timeout), and "
            "the client closes a connection that answers nothing for 2 s more (a hung server or "
            "a black-holed network): the request fails with 503 and rolls back. Migrations run "
            "without it."
        ),
    )
    db_pool_timeout_s: float = Field(
        default=10.0,
        gt=0,
        le=300,
        description="Seconds a request waits for a free pooled connection before a 503.",
    )
    db_busy_timeout_s: float = Field(
        default=5.0,
        ge=0,
        le=300,
        description='SQLite: seconds a writer waits for the lock before "database is locked".',
    )
    db_loop_read_timeout_s: float = Field(
        default=0.5,
        ge=0,
        le=60,
        description=(
            "PostgreSQL: the hot read-only requests run in the event loop while the database "
            "answers each exchange within this many seconds; one that does not is run again in "
            "the thread pool, where reads stay for 10 s (app.loop_reads). 0 keeps them in the "
            "thread pool: for a database a network away (round trips over ~0.2 ms), whose "
            "waits the pool's threads overlap and the loop cannot."
        ),
    )

    def database_timeouts(self) -> "DatabaseTimeouts":
        from app.db import DatabaseTimeouts  # app.db imports the web stack; settings does not

        return DatabaseTimeouts(
            connect_s=self.db_connect_timeout_s,
            statement_s=self.db_statement_timeout_s,
            pool_s=self.db_pool_timeout_s,
            busy_s=self.db_busy_timeout_s,
            loop_read_s=self.db_loop_read_timeout_s,
        )

    require_auth: bool = Field(
        default=False,
        description=(
            "Refuse every /v1 request without a valid API key. Off: access control turns on by "
            "itself once the first key exists (`autopar keys create`); until then every request "
            "acts for the 'default' tenant."
        ),
    )
    searches_per_minute: int | None = Field(
        default=60,
        ge=1,
        description=(
            "Searches one API key may submit per rolling minute (429 with Retry-After beyond); "
            "a key's own limit (`autopar keys create --searches-per-minute`) overrides it."
        ),
    )
    max_cluster_gpus: int | None = Field(
        default=1_048_576,
        ge=1,
        description=(
            "Most GPUs a cluster may have in POST /v1/clusters, /v1/estimate, /v1/searches and "
            "/v1/observations (422 beyond). 2^20: five times the largest clusters built so far, "
            "so no real cluster is refused, while the specs' own bounds (100,000 nodes x 1,024 "
            "GPUs per group, 1,000 groups) would let a client make the search enumerate "
            "degrees of 10^11 GPUs."
        ),
    )
    max_search_trials: int | None = Field(
        default=100_000,
        ge=1,
        description="Largest trials budget a search may ask for (422 beyond).",
    )
    max_search_timeout_s: float | None = Field(
        default=86_400.0,
        gt=0,
        description="Largest timeout_s a search may ask for, seconds (422 beyond).",
    )
    max_active_searches_per_tenant: int | None = Field(
        default=500,
        ge=1,
        description=(
            "Searches one tenant may have queued or running at once; one more is a 429 with "
            "Retry-After (a queue one tenant cannot flood)."
        ),
    )

    def service_limits(self) -> "ServiceLimits":
        from app.common.limits import ServiceLimits  # imports the specs; settings does not

        return ServiceLimits(
            max_cluster_gpus=self.max_cluster_gpus,
            max_search_trials=self.max_search_trials,
            max_search_timeout_s=self.max_search_timeout_s,
            max_active_searches_per_tenant=self.max_active_searches_per_tenant,
        )

    webhook_secret: str | None = Field(
        default=None,
        min_length=16,
        max_length=200,
        repr=False,
        description=(
            "Key that signs the webhooks of searches submitted without their own "
            "callback_secret. Workers sign when they send, so `autopar worker` processes need "
            "it too."
        ),
    )
