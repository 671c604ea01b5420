from typing import Annotated

from fastapi import APIRouter, Path

from app.common.examples import MODEL_PRESET, key_examples
from app.errors import error_responses
from app.presets import service
from app.presets.schemas import Preset, PresetIndex, PresetKind

router = APIRouter(prefix="/v1/presets", tags=["presets"])


@router.get("", response_model=PresetIndex)
async def list_presets() -> PresetIndex:
    """Names of the built-in presets of every kind."""
    return service.preset_index()


@router.get("/{kind}/{name}", response_model=Preset, responses=error_responses(404, 422))
async def get_preset(
    kind: Annotated[PresetKind, Path(openapi_examples=key_examples("model"))],
    name: Annotated[str, Path(max_length=200, openapi_examples=key_examples(MODEL_PRESET))],
) -> Preset:
    return service.get_preset(kind=kind, name=name)
