from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Response, status

from app.clusters import service
from app.clusters.schemas import ClusterPage, ClusterRecord
from app.common.examples import STORED_CLUSTER_NAME, cluster_examples, key_examples
from app.common.pagination import CursorQuery, LimitQuery, NameQuery, PresetQuery
from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.idempotency import IdempotencyDep, create_once
from costmodel.specs import ClusterSpec

router = APIRouter(prefix="/v1/clusters", tags=["clusters"])

KeyPath = Annotated[
    str,
    Path(
        max_length=200,
        description="Id or name (presets included).",
        openapi_examples=key_examples("dgx-a100-8n", STORED_CLUSTER_NAME),
    ),
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ClusterRecord,
    responses=error_responses(400, 409, 413, 422),
)
async def create_cluster(
    spec: Annotated[ClusterSpec, Body(openapi_examples=cluster_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
) -> Any:
    """Store a cluster spec under its ``name``; GPU types must be in the catalog (GET /v1/gpus)
    or given inline."""
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.create_cluster(db, spec=spec),
        location=lambda row: f"{router.prefix}/{row.id}",
    )


@router.get("", response_model=ClusterPage, responses=error_responses(422))
async def list_clusters(
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    name: NameQuery = None,
    preset: PresetQuery = None,
) -> Any:
    """Clusters by name, presets included, a page at a time."""
    rows, next_cursor = await run_in_session(
        service.list_clusters, session, name=name, preset=preset, cursor=cursor, limit=limit
    )
    return ClusterPage(
        items=[ClusterRecord.model_validate(row) for row in rows], next_cursor=next_cursor
    )


@router.get("/{key}", response_model=ClusterRecord, responses=error_responses(404))
async def get_cluster(key: KeyPath, session: SessionDep) -> Any:
    return await run_in_session(service.get_cluster, session, key=key)


@router.delete(
    "/{key}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404, 409)
)
async def delete_cluster(key: KeyPath, session: SessionDep) -> None:
    """Delete a stored cluster; presets are read-only (409)."""
    await run_in_session(service.delete_cluster, session, key=key)
