"""A finished search's plans page is built once per process (app.searches.plan_pages) and stays
what the API documents: the same JSON as built afresh, scoped to the tenant, and rebuilt when the
search runs again."""

import json

import pytest
from sqlalchemy import delete, update

from app.auth.keys import create_key
from app.orm import DEFAULT_TENANT, ApiKeyRow, SearchRow, utcnow
from app.searches import service
from app.searches.plan_pages import FinishedPlanPages
from app.searches.schemas import SearchPlans
from tests.app.service.search_helpers import EXHAUSTIVE, Live


@pytest.fixture
def pages(monkeypatch: pytest.MonkeyPatch) -> FinishedPlanPages:
    fresh = FinishedPlanPages()
    monkeypatch.setattr(service, "finished_pages", fresh)
    return fresh


def test_a_finished_page_is_kept_and_matches_a_fresh_build(
    live: Live, pages: FinishedPlanPages
) -> None:
    search = live.submit(EXHAUSTIVE)
    assert live.http.get(f"/v1/searches/{search['id']}/plans").json()["items"] == []
    assert len(pages) == 0  # queued: nothing kept while the ranking can change
    live.worker("w1").run_once()
    first = live.http.get(f"/v1/searches/{search['id']}/plans")
    assert first.status_code == 200 and first.headers["content-type"] == "application/json"
    assert len(pages) == 1
    second = live.http.get(f"/v1/searches/{search['id']}/plans")
    assert second.content == first.content
    with live.sessions() as session:
        fresh = service.search_plans(session, search_id=search["id"])
    assert SearchPlans.model_validate_json(first.content) == fresh
    assert json.loads(first.content) == fresh.model_dump(mode="json")
    assert [plan["rank"] for plan in first.json()["items"]] == [1, 2, 3, 4, 5]


def test_a_search_that_runs_again_gets_a_new_page(live: Live, pages: FinishedPlanPages) -> None:
    search = live.submit(EXHAUSTIVE)
    live.worker("w1").run_once()
    before = live.http.get(f"/v1/searches/{search['id']}/plans").json()
    # What a search that ends again changes: its status and finish time (set by hand here).
    with live.sessions() as session:
        session.execute(
            update(SearchRow)
            .where(SearchRow.id == search["id"])
            .values(finished_at=utcnow(), status="cancelled")
        )
        session.commit()
    after = live.http.get(f"/v1/searches/{search['id']}/plans").json()
    assert after["status"] == "cancelled" and before["status"] == "succeeded"
    assert after["items"] == before["items"]
    assert len(pages) == 2


def test_another_tenant_never_gets_a_kept_page(live: Live, pages: FinishedPlanPages) -> None:
    search = live.submit(EXHAUSTIVE)
    live.worker("w1").run_once()
    page = f"/v1/searches/{search['id']}/plans"
    assert live.http.get(page).status_code == 200 and len(pages) == 1
    with live.sessions() as session:
        _, own_token = create_key(session, tenant=DEFAULT_TENANT)
        _, other_token = create_key(session, tenant="other")
    try:
        own = live.http.get(page, headers={"Authorization": f"Bearer {own_token}"})
        assert own.status_code == 200 and len(pages) == 1
        theirs = live.http.get(page, headers={"Authorization": f"Bearer {other_token}"})
        assert theirs.status_code == 404
    finally:  # the module's later tests run without access control
        with live.sessions() as session:
            session.execute(delete(ApiKeyRow))
            session.commit()
