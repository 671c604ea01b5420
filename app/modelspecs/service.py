"""Stored model specs. Presets live here too (``is_preset``), loaded from the catalog."""

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy.orm import Session

from app.common import record_service
from app.common.text import require_storable
from app.errors import InvalidInputError
from app.modelspecs.repository import models
from app.orm import ModelSpecRow
from costmodel.hf_import import import_hf_config
from costmodel.specs import ModelSpec

KIND = "model"


def create_model(session: Session, *, spec: ModelSpec) -> ModelSpecRow:
    return record_service.create_record(
        session, repository=models, spec=spec, kind=KIND, source="api"
    )


def import_hf_model(
    session: Session, *, config: Mapping[str, Any], name: str | None
) -> tuple[ModelSpecRow, list[str]]:
    """The stored row and the conversion's warnings."""
    require_storable(config)
    try:
        converted = import_hf_config(config, name=name)
    except ValueError as exc:  # missing key, unsupported model_type, invalid shape
        raise InvalidInputError.at(None, str(exc), code="unsupported_config") from None
    except (TypeError, ArithmeticError) as exc:
        # A value of the wrong type or a zero width (a string where a width belongs) can reach
        # arithmetic in the converter before validation sees it; that is still the client's input.
        raise InvalidInputError.at(
            None, f"config.json cannot be converted: {exc}", code="unsupported_config"
        ) from None
    architectures = config.get("architectures")
    architecture = architectures[0] if isinstance(architectures, list) and architectures else None
    row = record_service.create_record(
        session,
        repository=models,
        spec=converted.spec,
        kind=KIND,
        source="hf",
        description=f"Imported from a Hugging Face config ({architecture or config['model_type']})",
    )
    return row, list(converted.warnings)


def get_model(session: Session, *, key: str) -> ModelSpecRow:
    return record_service.get_record(session, repository=models, key=key, kind=KIND)


def list_models(
    session: Session, *, name: str | None, preset: bool | None, cursor: str | None, limit: int
) -> tuple[Sequence[ModelSpecRow], str | None]:
    return record_service.list_records(
        session, repository=models, name=name, preset=preset, cursor=cursor, limit=limit
    )


def delete_model(session: Session, *, key: str) -> None:
    record_service.delete_record(session, repository=models, key=key, kind=KIND)
