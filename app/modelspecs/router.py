from typing import Annotated, Any

from fastapi import APIRouter, Body, Path, Query, Response, status
from sqlalchemy.orm import Session

from app.common.examples import (
    STORED_MODEL_NAME,
    hf_config_examples,
    key_examples,
    model_examples,
)
from app.common.pagination import CursorQuery, LimitQuery, NameQuery, PresetQuery
from app.db import SessionDep, run_in_session
from app.errors import error_responses
from app.idempotency import IdempotencyDep, create_once
from app.modelspecs import service
from app.modelspecs.schemas import ImportedModelRecord, ModelPage, ModelRecord
from costmodel.specs import ModelSpec

router = APIRouter(prefix="/v1/models", tags=["models"])

KeyPath = Annotated[
    str,
    Path(
        max_length=200,
        description="Id or name (presets included).",
        openapi_examples=key_examples("llama3-8b", STORED_MODEL_NAME),
    ),
]


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    response_model=ModelRecord,
    responses=error_responses(400, 409, 413, 422),
)
async def create_model(
    spec: Annotated[ModelSpec, Body(openapi_examples=model_examples())],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
) -> Any:
    """Store a model spec under its ``name`` (unique, presets included)."""
    return await create_once(
        idempotency,
        session,
        response,
        lambda db: service.create_model(db, spec=spec),
        location=lambda row: f"{router.prefix}/{row.id}",
    )


@router.post(
    "/import-hf",
    status_code=status.HTTP_201_CREATED,
    response_model=ImportedModelRecord,
    responses=error_responses(400, 409, 413, 422),
)
async def import_hf_model(
    config: Annotated[
        dict[str, Any],
        Body(
            description="A Hugging Face config.json document.",
            openapi_examples=hf_config_examples(),
        ),
    ],
    session: SessionDep,
    response: Response,
    idempotency: IdempotencyDep,
    name: Annotated[
        str | None,
        Query(min_length=1, max_length=200, description="Default: from _name_or_path."),
    ] = None,
) -> Any:
    """Convert a Hugging Face ``config.json`` into a model spec and store it; ``warnings`` say
    what of the config the cost model does not price exactly."""

    def create(db: Session) -> ImportedModelRecord:
        row, warnings = service.import_hf_model(db, config=config, name=name)
        record = ModelRecord.model_validate(row, from_attributes=True)
        return ImportedModelRecord(**record.model_dump(), warnings=warnings)

    return await create_once(
        idempotency,
        session,
        response,
        create,
        location=lambda record: f"{router.prefix}/{record.id}",
    )


@router.get("", response_model=ModelPage, responses=error_responses(422))
async def list_models(
    session: SessionDep,
    limit: LimitQuery = 50,
    cursor: CursorQuery = None,
    name: NameQuery = None,
    preset: PresetQuery = None,
) -> Any:
    """Models by name, presets included, a page at a time."""
    rows, next_cursor = await run_in_session(
        service.list_models, session, name=name, preset=preset, cursor=cursor, limit=limit
    )
    return ModelPage(
        items=[ModelRecord.model_validate(row) for row in rows], next_cursor=next_cursor
    )


@router.get("/{key}", response_model=ModelRecord, responses=error_responses(404))
async def get_model(key: KeyPath, session: SessionDep) -> Any:
    return await run_in_session(service.get_model, session, key=key)


@router.delete(
    "/{key}", status_code=status.HTTP_204_NO_CONTENT, responses=error_responses(404, 409)
)
async def delete_model(key: KeyPath, session: SessionDep) -> None:
    """Delete a stored model; presets are read-only (409)."""
    await run_in_session(service.delete_model, session, key=key)
