"""``build_export``: a plan as the files its framework's launcher reads."""

from typing import cast

from app.exports import deepspeed, kubernetes, megatron, slurm, torchtitan
from app.exports.layout import ExportError, LaunchLayout, launch_layout
from app.exports.schemas import (
    FORMAT_FRAMEWORK,
    ExportFile,
    ExportFormat,
    ExportResult,
    LaunchFramework,
    NodeBlockRecord,
)
from app.exports.scripts import Shell
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec

_CHECKS = {
    "megatron": megatron.check,
    "deepspeed": deepspeed.check,
    "torchtitan": torchtitan.check,
}


def node_launch(layout: LaunchLayout, *, title: str) -> tuple[str, list[ExportFile]]:
    """The per-node script of the layout's framework for a scheduler (srun, Kubeflow), and the
    config files it reads from ``$RUN_DIR``."""
    if layout.framework == "megatron":
        return megatron.node_script(layout, title=title), []
    if layout.framework == "deepspeed":
        config = deepspeed.config_file(layout)
        path = Shell(f'"$RUN_DIR/{config.name}"')
        return deepspeed.node_script(layout, path, title=title), [config]
    config = torchtitan.config_file(layout)
    path = Shell(f'"$RUN_DIR/{config.name}"')
    return torchtitan.node_script(layout, path, title=title), [config]


def build_export(
    model: ModelSpec,
    training: TrainingSpec,
    cluster: ClusterSpec,
    plan: Plan,
    *,
    format: ExportFormat,
    framework: str | None = None,
    image: str | None = None,
) -> ExportResult:
    """Write ``plan`` for ``format``.

    ``megatron`` (with NeMo 2 overrides), ``nemo``, ``deepspeed`` and ``torchtitan`` are for
    that framework; ``slurm`` and ``kubernetes`` wrap the launcher of ``framework`` (default:
    the first framework in the plan's ``launchable_by``). Raises ``ExportError`` when the
    framework cannot launch the plan (naming the settings it cannot express) or the format
    cannot hold it.
    """
    fixed = FORMAT_FRAMEWORK.get(format)
    if fixed is not None and framework not in (None, fixed):
        raise ExportError("framework", f"format {format} is for {fixed}, not {framework}")
    layout = launch_layout(
        model,
        training,
        cluster,
        plan,
        framework=fixed or framework,
        blame="format" if fixed else "framework",
    )
    _CHECKS[layout.framework](layout)
    title = f"autopar export: {layout.framework} node launch"
    if format == "megatron":
        files, command = megatron.files(layout), megatron.launch_command(layout)
    elif format == "nemo":
        files, command = [megatron.nemo_file(layout)], f"python {megatron.NEMO_FILE}"
    elif format == "deepspeed":
        files, command = deepspeed.files(layout), deepspeed.launch_command(layout)
    elif format == "torchtitan":
        files, command = torchtitan.files(layout), torchtitan.launch_command(layout)
    elif format == "slurm":
        script, configs = node_launch(layout, title=title)
        files, command = slurm.files(layout, script, configs), slurm.launch_command(layout)
    elif format == "kubernetes":
        kubernetes.check(layout)
        script, configs = node_launch(layout, title=title)
        files = kubernetes.files(layout, script, configs, image=image)
        command = kubernetes.launch_command(layout)
    else:  # pragma: no cover - ExportFormat is closed
        raise ExportError("format", f"unknown format {format!r}")
    return ExportResult(
        format=format,
        # One of the estimate's launchable_by: a launch framework.
        framework=cast(LaunchFramework, layout.framework),
        launchable_by=list(layout.launchable_by),
        num_gpus=layout.world_size,
        num_nodes=layout.num_nodes,
        nodes=[
            NodeBlockRecord(
                group=block.group,
                gpu=block.gpu,
                first_node_rank=block.first_node_rank,
                num_nodes=block.num_nodes,
                procs_per_node=block.procs_per_node,
            )
            for block in layout.blocks
        ],
        global_batch_size=layout.global_batch_size,
        micro_batch_size=layout.micro_batch_size,
        gradient_accumulation_steps=layout.gradient_accumulation_steps,
        stage_layers=list(layout.stage_layers),
        command=command,
        files=files,
        warnings=list(dict.fromkeys(layout.warnings)),
    )
