"""With access control on, a request without an API key answers 401 at exactly the operations
whose OpenAPI entry documents a 401: all of /v1 but the public version and presets."""

from collections.abc import Iterator

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy import Connection
from sqlalchemy.orm import sessionmaker

from app.main import create_app
from app.settings import Settings
from tests.app.service.api_helpers import asgi_client, assert_error

ID_PARAMETERS = ("key", "search_id", "plan_id", "delivery_id", "profile_id", "observation_id")
PUBLIC = {"GET /healthz", "GET /v1/version", "GET /v1/presets", "GET /v1/presets/{kind}/{name}"}


@pytest.fixture
def locked(service_database_url: str, db_connection: Connection) -> Iterator[FastAPI]:
    settings = Settings(
        database_url=service_database_url,
        migrate_on_startup=False,
        embedded_worker=False,
        require_auth=True,
    )
    factory = sessionmaker(
        bind=db_connection, join_transaction_mode="create_savepoint", expire_on_commit=False
    )
    yield create_app(settings, session_factory=factory)


def test_401_is_documented_where_it_is_answered(locked: FastAPI) -> None:
    operations = [
        (method.upper(), path, "401" in operation["responses"])
        for path, methods in locked.openapi()["paths"].items()
        for method, operation in methods.items()
    ]
    assert {f"{method} {path}" for method, path, documented in operations if not documented} == (
        PUBLIC
    )
    with asgi_client(locked) as http:
        for method, path, documented in operations:
            url = path.replace("{kind}", "model").replace("{name}", "llama3-8b")
            for name in ID_PARAMETERS:
                url = url.replace("{" + name + "}", "0" * 32)
            body = {} if method == "POST" else None
            response: httpx.Response = http.request(method, url, json=body)
            if documented:
                assert_error(response, 401, "unauthorized")
            else:
                assert response.status_code == 200, (method, path, response.text)
