"""What an export is: the files a launch needs, the command that starts it, and its caveats."""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

ExportFormat = Literal["megatron", "nemo", "deepspeed", "torchtitan", "slurm", "kubernetes"]
EXPORT_FORMATS: tuple[ExportFormat, ...] = (
    "megatron",
    "nemo",
    "deepspeed",
    "torchtitan",
    "slurm",
    "kubernetes",
)
LaunchFramework = Literal["megatron", "deepspeed", "torchtitan"]
LAUNCH_FRAMEWORKS: tuple[LaunchFramework, ...] = ("megatron", "deepspeed", "torchtitan")

# The framework each framework format is for; slurm and kubernetes wrap a chosen one's launcher.
FORMAT_FRAMEWORK: dict[str, LaunchFramework] = {
    "megatron": "megatron",
    "nemo": "megatron",
    "deepspeed": "deepspeed",
    "torchtitan": "torchtitan",
}


class ExportFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="File name, relative to the directory the export is written to.")
    media_type: str = Field(description="text/x-shellscript, application/json, application/toml, …")
    content: str


class NodeBlockRecord(BaseModel):
    """Consecutive nodes of one node group, in launch (node rank) order."""

    model_config = ConfigDict(extra="forbid")

    group: str
    gpu: str
    first_node_rank: int
    num_nodes: int
    procs_per_node: int = Field(description="Processes (GPUs used) on each of these nodes.")


class ExportResult(BaseModel):
    """A plan written for a framework's launcher: parse the files back and they give the plan's
    degrees, batch and GPU counts."""

    model_config = ConfigDict(extra="forbid")

    format: ExportFormat
    framework: LaunchFramework = Field(description="The framework whose launcher runs the files.")
    launchable_by: list[str] = Field(description="Every framework that can launch this plan.")
    num_gpus: int = Field(description="Processes launched: dp x tp x pp x cp.")
    num_nodes: int
    nodes: list[NodeBlockRecord] = Field(
        description="Node groups in node-rank order; more than one for a heterogeneous plan."
    )
    global_batch_size: int
    micro_batch_size: int
    gradient_accumulation_steps: int = Field(
        description="Micro-batches per data-parallel rank per step: global / (micro x dp)."
    )
    stage_layers: list[int] = Field(description="Transformer layers of each pipeline stage.")
    command: str = Field(description="How to start it, from the directory the files are in.")
    files: list[ExportFile]
    warnings: list[str] = Field(
        default_factory=list,
        description="What the launch does differently from the plan as priced, or should check.",
    )


class PlanExport(ExportResult):
    """``GET /v1/plans/{id}/export``: a stored plan's export."""

    plan_id: str
