"""Schemathesis over every operation of the OpenAPI document, against the ASGI app in process.

Every generated request must get an answer that is not a 5xx, whose status code the operation
documents and whose body matches the schema documented for that status. The request models
carry OpenAPI ``examples`` built from the presets (``app.common.examples``), so the examples
phase reaches the 200/201/202 paths, not only the 4xx ones that random bodies get; and the ids
in paths (searches, plans, deliveries, profiles, observations, calibrations) are, every other
case, ids of rows seeded before the run (a finished search with plans and a webhook delivery, a
profile, observations and a calibration), so the reads of stored rows are checked too.

The app runs on a database of its own per backend (migrated, catalog loaded), so what the
fuzzer creates stays out of every other test. Bounded: a few examples per operation,
derandomized, no stateful phase.
"""

import itertools
import os
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import schemathesis
from fastapi import FastAPI
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.specs.openapi.checks import (
    response_schema_conformance,
    status_code_conformance,
)
from sqlalchemy import update
from sqlalchemy.orm import Session, sessionmaker

from app.db import make_engine, make_session_factory
from app.main import create_app, prepare_database
from app.orm import WebhookDeliveryRow
from app.settings import Settings
from app.workers.service import SearchWorker, WorkerOptions
from tests.support.calibration_data import TRUTH, measured, observations
from tests.support.calibration_data import unmeasured_profile as synthetic_profile

JSON = "application/json"
CHECKS = [not_a_server_error, status_code_conformance, response_schema_conformance]
# AUTOPAR_FUZZ_EXAMPLES=200 AUTOPAR_FUZZ_COVERAGE=1 for a deeper run (minutes per operation);
# the suite's run is a few examples each plus every documented example.
MAX_EXAMPLES = int(os.environ.get("AUTOPAR_FUZZ_EXAMPLES", "8"))
COVERAGE = os.environ.get("AUTOPAR_FUZZ_COVERAGE", "") not in ("", "0")

CONFIG = SchemathesisConfig.from_dict(
    {
        "phases": {
            "examples": {"enabled": True},
            # Boundary and negative values of every field: 3-4 minutes on SQLite alone here.
            "coverage": {"enabled": COVERAGE},
            "fuzzing": {"enabled": True},
            "stateful": {"enabled": False},
        },
        "generation": {"max-examples": MAX_EXAMPLES},
        # The seeded calibration fits for several seconds on a busy 2-core machine.
        "request-timeout": 120,
    }
)

# The schema is read once at import, from an app whose database is bound per backend below
# (``seeded``): the OpenAPI document does not depend on the database, and schemathesis'
# fixture-loaded schemas (``from_fixture``) fail under this pytest (they set ``Item._nodeid``).
APP: FastAPI = create_app(
    Settings(database_url="sqlite://", embedded_worker=False, migrate_on_startup=False),
    session_factory=sessionmaker(),
)
schema = schemathesis.openapi.from_asgi("/openapi.json", APP, config=CONFIG)

SEARCH = {
    "preset": "llama3-8b",
    "training": {"seq_length": 4096, "global_batch_size": 64},
    "cluster_id": "dgx-a100-1n",
    "sampler": "exhaustive",
    "top_k": 3,
}
# Statuses seen per operation, for the closing test.
SEEN: dict[str, Counter[int]] = {}


def _call(
    method: str, path: str, body: Any = None, **path_parameters: str
) -> schemathesis.Response:
    """A request of the seeding, checked like the generated ones."""
    operation = schema[path][method]
    case = (
        operation.Case(path_parameters=path_parameters)
        if body is None
        else operation.Case(path_parameters=path_parameters, body=body, media_type=JSON)
    )
    response = case.call_and_validate(checks=CHECKS)
    assert response.status_code < 300, response.text
    SEEN.setdefault(operation.label, Counter())[response.status_code] += 1
    return response


def _seed(worker: SearchWorker, sessions: sessionmaker[Session]) -> dict[str, str]:
    """Rows for the path ids: {parameter name (or operation path) -> id}."""
    webhook = {"callback_url": "http://127.0.0.1:9/hook", "callback_secret": "s" * 32}
    done = _call("POST", "/v1/searches", {**SEARCH, **webhook}).json()
    assert worker.run_once() == done["id"]
    plans = _call("GET", "/v1/searches/{search_id}/plans", search_id=done["id"]).json()
    deliveries = _call("GET", "/v1/searches/{search_id}/deliveries", search_id=done["id"])
    delivery_id = deliveries.json()["items"][0]["id"]
    with sessions.begin() as session:  # as if its retries ran out: retrying it is a 202
        session.execute(
            update(WebhookDeliveryRow)
            .where(WebhookDeliveryRow.id == delivery_id)
            .values(status="failed")
        )
    queued = _call("POST", "/v1/searches", SEARCH).json()
    profiles, observed = measured([synthetic_profile()], observations(), TRUTH)
    body = {"profile": profiles[0].model_dump(mode="json")}
    profile_id = _call("POST", "/v1/profiles", body).json()["id"]
    observation_ids = []
    for item in observed:
        run = item.model_dump(mode="json", include={"model", "training", "cluster", "plan"})
        run.update(name=item.name, source=item.source, step_time_s=item.step_time_s)
        observation_ids.append(_call("POST", "/v1/observations", run).json()["id"])
    # The fuzzer's calibration bodies are refused (too little data, 422): this one is a 201.
    fit = {"name": "lab", "profile_ids": [profile_id], "observation_sources": ["cpu runs"]}
    calibration_id = _call("POST", "/v1/calibrations", fit).json()["id"]
    return {
        "search_id": done["id"],
        "/v1/searches/{search_id}/cancel": queued["id"],
        "plan_id": plans["items"][0]["id"],
        "delivery_id": delivery_id,
        "profile_id": profile_id,
        "observation_id": observation_ids[0],
        "/v1/calibrations/{key}": calibration_id,
    }


@pytest.fixture(scope="module")
def seeded(make_session_database: Callable[[], str]) -> Iterator[dict[str, str]]:
    url = make_session_database()
    engine = make_engine(url)
    prepare_database(engine)
    sessions = make_session_factory(engine)
    APP.state.session_factory = sessions
    worker = SearchWorker(
        session_factory=sessions, database_url=url, options=WorkerOptions(poll_s=0.05)
    )
    SEEN.clear()
    yield _seed(worker, sessions)
    APP.state.session_factory = sessionmaker()
    engine.dispose()


_TURNS: dict[str, Iterator[bool]] = {}


def _use_seeded_ids(case: schemathesis.Case, ids: dict[str, str]) -> None:
    """Every other case of an operation with an id in its path asks for a stored row."""
    names = [name for name in case.path_parameters or {} if name in ids or case.path in ids]
    if not names:
        return
    turn = _TURNS.setdefault(case.operation.label, itertools.cycle([True, False]))
    if next(turn):
        for name in names:
            case.path_parameters[name] = ids.get(case.path, ids.get(name))  # type: ignore[index]


@pytest.mark.slow
@schema.parametrize()
@settings(
    max_examples=MAX_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)
def test_every_operation(case: schemathesis.Case, seeded: dict[str, str]) -> None:
    _use_seeded_ids(case, seeded)
    response = case.call_and_validate(checks=CHECKS)
    SEEN.setdefault(case.operation.label, Counter())[response.status_code] += 1


@pytest.mark.slow
def test_every_operation_reached_a_success(seeded: dict[str, str]) -> None:
    """The runs above got past validation: each operation answered a 2xx at least once
    (the seeding's own requests count). Run after them, in this module's order."""
    labels = {operation.ok().label for operation in schema.get_all_operations()}
    # Run alone (-k) this fails too: it checks what the module's runs saw, so run the module.
    assert labels <= set(SEEN), f"operations never run: {sorted(labels - set(SEEN))}"
    missed = {
        label: dict(SEEN[label])
        for label in sorted(labels)
        if not any(200 <= status < 300 for status in SEEN[label])
    }
    assert not missed, f"operations that never answered a 2xx: {missed}"
