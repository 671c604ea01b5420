from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Request, Response, status

from app.common.examples import search_examples
from app.common.pagination import CursorQuery, LimitQuery
from app.db import SessionDep, run_in_session, run_read_in_session
from app.errors import error_responses
from app.idempotency import IdempotencyDep, create_once
from app.searches import service
from app.searches.schemas import (
    SearchCreate,
    SearchPage,
    SearchPlans,
    SearchRecord,
    SearchStatus,
)

router = APIRouter(prefix="/v1/searches", tags=["searches"])

SearchIdPath = Annotated[str, Path(max_length=200, description="Search id.")]


@router.post(
    "",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SearchRecord,
    # 429: the key's searches per minute, or its tenant's searches queued or running.
    responses=error_responses(400, 409, 413, 422, 429),
)
async def create_search(
    request: Annotated[SearchCreate, Body(openapi_examples=search_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
    http_request: Request,
) -> Any:
    """Queue a plan search; a worker runs it. Follow it at the ``Location`` returned.

    Every reason the search cannot run (a cluster too small for the model, a batch size no
    layout divides, constraints that leave no plan, a zero budget, a cluster or budget over the
    server's limits) is a 422 naming the field. A 429 (with Retry-After) when the API key used up
    its searches per minute or its tenant has the most searches queued or running it may.

    With ``callback_url``, its end (succeeded, failed, cancelled) is POSTed there as a signed
    webhook; ``GET /v1/searches/{id}/deliveries`` shows how sending it went.
    """
    signs = http_request.app.state.settings.webhook_secret is not None
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.create_search(db, request=request, server_signs_webhooks=signs),
        location=lambda record: f"{router.prefix}/{record.id}",
    )


@router.get("", response_model=SearchPage, responses=error_responses(422))
async def list_searches(
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    status_: Annotated[
        SearchStatus | None, Query(alias="status", description="Only searches in this state.")
    ] = None,
) -> Any:
    """Searches, newest first, a page at a time."""
    return await run_in_session(
        service.list_searches, session, status=status_, cursor=cursor, limit=limit
    )


@router.get("/{search_id}", response_model=SearchRecord, responses=error_responses(404))
async def get_search(search_id: SearchIdPath, session: SessionDep) -> Any:
    """Status and progress: trials done of the budget, plans evaluated, best so far, elapsed
    time and ETA."""
    return await run_read_in_session(service.get_search, session, search_id=search_id)


@router.get("/{search_id}/plans", response_model=SearchPlans, responses=error_responses(404))
async def get_search_plans(search_id: SearchIdPath, session: SessionDep) -> Any:
    """The ranked plans with their estimates, best first (empty until the search finishes)."""
    page = await run_read_in_session(service.search_plans_json, session, search_id=search_id)
    return Response(content=page, media_type="application/json")


@router.post(
    "/{search_id}/cancel",
    status_code=status.HTTP_202_ACCEPTED,
    response_model=SearchRecord,
    responses=error_responses(404, 409),
)
async def cancel_search(search_id: SearchIdPath, session: SessionDep) -> Any:
    """Cancel: a queued search at once; a running one at its worker's next heartbeat, keeping
    the plans found so far. 409 when it already succeeded or failed."""
    return await run_in_session(service.cancel_search, session, search_id=search_id)
