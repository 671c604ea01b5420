from typing import Annotated, Any

from fastapi import APIRouter, Path

from app.common.examples import GPU_NAME, key_examples
from app.common.pagination import CursorQuery, LimitQuery, NameQuery
from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.gpus import service
from app.gpus.schemas import GpuPage, GpuRecord

router = APIRouter(prefix="/v1/gpus", tags=["gpus"])


@router.get("", response_model=GpuPage, responses=error_responses(422))
async def list_gpus(
    session: SessionDep, limit: LimitQuery = 50, cursor: CursorQuery = None, name: NameQuery = None
) -> Any:
    """GPU types a cluster's node groups can name in ``gpu``."""
    rows, next_cursor = await run_in_session(
        service.list_gpus, session, name=name, cursor=cursor, limit=limit
    )
    return GpuPage(items=[GpuRecord.model_validate(row) for row in rows], next_cursor=next_cursor)


@router.get("/{key}", response_model=GpuRecord, responses=error_responses(404))
async def get_gpu(
    key: Annotated[
        str,
        Path(
            max_length=200,
            description="Id or name, e.g. H100-80GB.",
            openapi_examples=key_examples(GPU_NAME),
        ),
    ],
    session: SessionDep,
) -> Any:
    return await run_in_session(service.get_gpu, session, key=key)
