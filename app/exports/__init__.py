"""Launch-ready exports of a plan: Megatron-LM (and NeMo 2), DeepSpeed, torchtitan, Slurm and
Kubernetes (Kubeflow PyTorchJob / TrainJob).

``build_export(model, training, cluster, plan, format=...)`` returns the files; each export is
for a framework that can launch the plan (``Estimate.launchable_by``, from
``costmodel.frameworks``), and asking for one that cannot is an ``ExportError`` naming the
setting it cannot express. ``app.exports.service`` exports stored plans for the API.
"""

from app.exports.build import build_export
from app.exports.layout import ExportError
from app.exports.schemas import (
    EXPORT_FORMATS,
    LAUNCH_FRAMEWORKS,
    ExportFile,
    ExportFormat,
    ExportResult,
    LaunchFramework,
    PlanExport,
)

__all__ = [
    "EXPORT_FORMATS",
    "LAUNCH_FRAMEWORKS",
    "ExportError",
    "ExportFile",
    "ExportFormat",
    "ExportResult",
    "LaunchFramework",
    "PlanExport",
    "build_export",
]
