"""Per-GPU default efficiency parameters, fitted from published hardware micro-benchmarks.

``default_params(gpu)`` is ``DEFAULT_PARAMS`` updated with the fields shipped for that catalog
GPU in ``costmodel/defaults/params/<GPU>.json``: what ``fit_calibration`` fitted to the GPU's
profile of published micro-benchmarks (``costmodel/defaults/profiles/<GPU>.json``, every sample
citing its row of ``validation/microbench.csv``), and only the fields that data moved. Rebuild
both with ``scripts/build_default_profiles.py``; ``costmodel.calibration.defaults`` documents
the procedure.

Every estimate made without a calibration (``params=None``) prices each node group with its
own GPU's defaults. A GPU without a shipped file, and an inline custom ``GpuSpec`` (one that is
not the catalog entry of its name), gets ``DEFAULT_PARAMS``. An explicit ``EfficiencyParams``
(a calibration) overrides all of this, for every group.

See README.md, 'Defaults from hardware measurements'.
"""

import json
from functools import lru_cache
from importlib import resources
from typing import Any

from costmodel.hardware import CATALOG, lookup_gpu
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import GpuSpec

PARAMS_FOLDER = ("defaults", "params")
PROFILES_FOLDER = ("defaults", "profiles")


def _folder(parts: tuple[str, ...]) -> Any:
    folder = resources.files("costmodel")
    for part in parts:
        folder = folder.joinpath(part)
    return folder


def shipped_gpus() -> list[str]:
    """Catalog GPUs with shipped defaults, sorted."""
    folder = _folder(PARAMS_FOLDER)
    if not folder.is_dir():
        return []
    return sorted(
        entry.name.removesuffix(".json")
        for entry in folder.iterdir()
        if entry.is_file() and entry.name.endswith(".json")
    )


@lru_cache(maxsize=64)
def shipped_document(name: str) -> dict[str, Any] | None:
    """The params document shipped for catalog GPU ``name`` (exact catalog spelling), or None."""
    entry = _folder(PARAMS_FOLDER).joinpath(f"{name}.json")
    if not entry.is_file():
        return None
    document: dict[str, Any] = json.loads(entry.read_text(encoding="utf-8"))
    return document


def shipped_fields(name: str) -> dict[str, float]:
    """The fitted fields shipped for catalog GPU ``name`` ({} when none are)."""
    document = shipped_document(name)
    return dict(document["params"]) if document else {}


@lru_cache(maxsize=64)
def _catalog_defaults(name: str) -> EfficiencyParams:
    fields = shipped_fields(name)
    if not fields:
        return DEFAULT_PARAMS
    return EfficiencyParams.model_validate({**DEFAULT_PARAMS.model_dump(), **fields})


@lru_cache(maxsize=256)
def default_params(gpu: str | GpuSpec) -> EfficiencyParams:
    """``DEFAULT_PARAMS`` with catalog GPU ``gpu``'s shipped fitted fields (the same object on
    every call, so the model's caches keyed on parameters keep working). Raises
    ``UnknownGpuError`` for a name the catalog lacks."""
    if isinstance(gpu, str):
        return _catalog_defaults(lookup_gpu(gpu).name)
    catalog = CATALOG.get(gpu.name)
    if catalog is None or catalog != gpu:
        return DEFAULT_PARAMS  # an inline custom GPU: no measurement describes it
    return _catalog_defaults(gpu.name)
