"""The API under test: one migrated database per backend for the session (catalog loaded), and
per test a connection whose outer transaction is rolled back afterwards, so every test starts
from the same data while the app commits as usual (its commits become savepoints).

Requests go through httpx with its ASGI transport (``api_helpers.asgi_client``).
"""

import json
from collections.abc import Callable, Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Connection, Engine, select
from sqlalchemy.orm import sessionmaker

from app.db import make_engine
from app.main import create_app, prepare_database
from app.orm import Base
from app.settings import Settings
from tests.app.service.api_helpers import Snapshot, asgi_client
from tests.app.service.search_helpers import Live, live_service


@pytest.fixture(scope="session")
def service_database_url(make_session_database: Callable[[], str]) -> str:
    url = make_session_database()
    engine = make_engine(url)
    prepare_database(engine)
    engine.dispose()
    return url


@pytest.fixture(scope="session")
def service_engine(service_database_url: str) -> Iterator[Engine]:
    engine = make_engine(service_database_url)
    yield engine
    engine.dispose()


@pytest.fixture(scope="session")
def service_app(service_database_url: str) -> FastAPI:
    settings = Settings(database_url=service_database_url, migrate_on_startup=False)
    # The real factory is swapped in per test (``client``).
    return create_app(settings, session_factory=sessionmaker())


@pytest.fixture
def db_connection(service_engine: Engine) -> Iterator[Connection]:
    with service_engine.connect() as connection:
        transaction = connection.begin()
        yield connection
        transaction.rollback()


@pytest.fixture
def client(service_app: FastAPI, db_connection: Connection) -> Iterator[httpx.Client]:
    service_app.state.session_factory = sessionmaker(
        bind=db_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    with asgi_client(service_app) as http:
        yield http


@pytest.fixture
def snapshot(db_connection: Connection) -> Snapshot:
    """Everything stored, to show that a refused request changed nothing."""

    def take() -> dict[str, list[str]]:
        return {
            table.name: sorted(
                json.dumps(row._asdict(), default=str, sort_keys=True)
                for row in db_connection.execute(select(table))
            )
            for table in Base.metadata.sorted_tables
        }

    return take


@pytest.fixture(scope="module")
def worker_database_url(make_session_database: Callable[[], str]) -> str:
    """A migrated database (catalog loaded) whose rows are really committed, so workers on
    other connections and threads see them; shared by a test module."""
    url = make_session_database()
    engine = make_engine(url)
    prepare_database(engine)
    engine.dispose()
    return url


@pytest.fixture
def live(worker_database_url: str) -> Iterator[Live]:
    """The API over ``worker_database_url`` plus workers for it; searches are deleted after."""
    with live_service(worker_database_url) as service:
        yield service
