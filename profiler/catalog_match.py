"""Map a driver's device name onto the GPU catalog (no torch needed: nccl-tests imports use it)."""

import re

from costmodel.hardware import CATALOG
from costmodel.specs import GpuSpec


def _tokens(name: str) -> set[str]:
    return set(re.findall(r"[a-z0-9]+", name.lower().replace("-", " ")))


def match_catalog(device_name: str) -> GpuSpec | None:
    """The catalog GPU a driver name denotes, if exactly one fits.

    'NVIDIA H100 80GB HBM3' -> H100-80GB and 'NVIDIA A100-SXM4-40GB' -> A100-40GB (model and
    memory both named); 'NVIDIA H200' -> H200-141GB (the model alone, when it is unambiguous).
    """
    words = _tokens(device_name)
    matches = [spec for key, spec in CATALOG.items() if _tokens(key) <= words]
    if not matches:
        matches = [spec for key, spec in CATALOG.items() if key.split("-")[0].lower() in words]
    return matches[0] if len(matches) == 1 else None
