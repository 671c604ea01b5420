"""Database backends for tests: SQLite always, PostgreSQL too when AUTOPAR_TEST_POSTGRES_URL is set.

Any test that takes ``database_backend`` (directly or through the fixtures below) runs once per
backend. On PostgreSQL each database is a fresh schema of the server's database (selected with
``search_path`` in the URL), dropped afterwards, so tests never see each other's tables.

Under CI (``CI`` set) PostgreSQL is mandatory: a missing URL or an unreachable server ends the
run with a failure instead of silently testing SQLite alone.
"""

import os
import secrets
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

# The test process starts hundreds of apps; freezing what each startup leaves alive (app.serving)
# would keep every earlier app's reference cycles for the rest of the run.
os.environ.setdefault("AUTOPAR_FREEZE_STARTUP_OBJECTS", "false")

POSTGRES_ENV = "AUTOPAR_TEST_POSTGRES_URL"
_POSTGRES_URL = os.environ.get(POSTGRES_ENV) or None
BACKENDS = ["sqlite", "postgresql"] if _POSTGRES_URL else ["sqlite"]

MakeDatabase = Callable[[], str]


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "postgresql_only: runs on the PostgreSQL backend only (not generated for SQLite)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Drop the SQLite instances of ``postgresql_only`` tests: they test a PostgreSQL mode, so
    on SQLite they would have nothing to assert. Under CI PostgreSQL is mandatory, so they run."""
    kept, dropped = [], []
    for item in items:
        params = getattr(item, "callspec", None)
        backend = params.params.get("database_backend") if params else None
        sqlite_instance = item.get_closest_marker("postgresql_only") and backend == "sqlite"
        (dropped if sqlite_instance else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


@pytest.fixture(scope="session")
def postgres_admin_url() -> str:
    """The server URL from the environment, checked once; unreachable is fatal, never a skip."""
    assert _POSTGRES_URL is not None, "only requested when the postgresql backend is enabled"
    try:
        engine = create_engine(_POSTGRES_URL, connect_args={"connect_timeout": 5})
        with engine.connect() as connection:
            connection.execute(text("SELECT 1"))
        engine.dispose()
    except SQLAlchemyError as exc:
        pytest.exit(
            f"{POSTGRES_ENV}={make_url(_POSTGRES_URL).render_as_string(hide_password=True)} "
            f"is unreachable: {exc.__class__.__name__}: {str(exc).splitlines()[0]}",
            returncode=1,
        )
    return _POSTGRES_URL


@pytest.fixture(scope="session")
def _postgres_required_in_ci() -> None:
    if _in_ci() and _POSTGRES_URL is None:
        pytest.exit(f"CI runs must test PostgreSQL too: set {POSTGRES_ENV}", returncode=1)


@pytest.fixture(scope="session", params=BACKENDS)
def database_backend(request: pytest.FixtureRequest, _postgres_required_in_ci: None) -> str:
    return str(request.param)


def _database_factory(
    backend: str, folder: Path, request: pytest.FixtureRequest
) -> Iterator[MakeDatabase]:
    created_schemas: list[str] = []
    admin_url = request.getfixturevalue("postgres_admin_url") if backend == "postgresql" else ""

    def make() -> str:
        if backend == "sqlite":
            return f"sqlite:///{folder / f'autopar-{secrets.token_hex(4)}.db'}"
        schema = f"autopar_test_{secrets.token_hex(6)}"
        engine = create_engine(admin_url)
        with engine.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        engine.dispose()
        created_schemas.append(schema)
        url = make_url(admin_url).update_query_dict({"options": f"-csearch_path={schema}"})
        return url.render_as_string(hide_password=False)

    yield make
    if created_schemas:
        engine = create_engine(admin_url)
        with engine.begin() as connection:
            for schema in created_schemas:
                connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        engine.dispose()


@pytest.fixture
def make_empty_database(
    database_backend: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[MakeDatabase]:
    """Call it for the URL of a new, empty database of the current backend."""
    yield from _database_factory(database_backend, tmp_path, request)


@pytest.fixture(scope="session")
def make_session_database(
    database_backend: str,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[MakeDatabase]:
    """As ``make_empty_database``, for databases shared by the whole session."""
    folder = tmp_path_factory.mktemp(f"db-{database_backend}")
    yield from _database_factory(database_backend, folder, request)
