"""/healthz, /v1/version, /v1/presets and the OpenAPI document."""

from pathlib import Path

import httpx

from app.db import make_engine, make_session_factory
from app.main import create_app
from app.migrate import head_revision
from app.settings import Settings
from costmodel.catalog import list_presets
from tests.app.service.api_helpers import asgi_client, assert_error


def test_healthz_checks_the_database(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok", "database": "ok"}


def test_version_reports_the_schema(client: httpx.Client, database_backend: str) -> None:
    body = client.get("/v1/version").json()
    assert body["api"] == "v1"
    assert body["database_backend"] == database_backend
    assert body["schema_revision"] == body["schema_head"] == head_revision()


def test_presets_index_and_one_preset(client: httpx.Client) -> None:
    index = client.get("/v1/presets").json()
    assert index == {kind: list_presets(kind) for kind in ("model", "cluster", "training", "plan")}
    training = client.get("/v1/presets/training/LLAMA2-4K").json()
    assert training["name"] == "llama2-4k"
    assert training["spec"]["seq_length"] == 4096
    assert_error(client.get("/v1/presets/training/nope"), 404, "not_found")
    assert_error(client.get("/v1/presets/widget/llama2-4k"), 422, "invalid_input")


def test_openapi_documents_the_error_body(client: httpx.Client) -> None:
    document = client.get("/openapi.json").json()
    assert "ErrorBody" in document["components"]["schemas"]
    responses = document["paths"]["/v1/models/{key}"]["delete"]["responses"]
    assert {"204", "404", "409"} <= set(responses)
    assert client.get("/docs").status_code == 200


def test_unknown_route_and_method_use_the_error_body(client: httpx.Client) -> None:
    assert_error(client.get("/v1/nothing-here"), 404, "not_found")
    assert_error(client.put("/v1/models"), 405, "method_not_allowed")


def test_unreachable_database_is_503_not_500(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'missing-folder' / 'autopar.db'}"  # cannot be opened
    engine = make_engine(url)
    app = create_app(
        Settings(database_url=url, migrate_on_startup=False),
        session_factory=make_session_factory(engine),
    )
    with asgi_client(app) as client:
        for path in ("/healthz", "/v1/models", "/v1/gpus/H100-80GB"):
            response = client.get(path)
            error = assert_error(response, 503, "unavailable")
            assert "database" in error["message"]
            assert response.headers["retry-after"] == "1"
        assert client.get("/v1/presets").status_code == 200  # needs no database
    engine.dispose()
