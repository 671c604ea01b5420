"""Slurm: one ``sbatch`` script that writes the framework's files, then starts one task per node
with ``srun``; each task runs ``torchrun`` for its node (static rendezvous on the first node).

A plan over several node groups is one heterogeneous job: a component per run of nodes of one
group, separated by ``#SBATCH hetjob``, launched by one ``srun --het-group=0,...``; Slurm
numbers that step's tasks across the components in order, so ``SLURM_PROCID`` (one task per
node) is the node rank the layout placed them at.
"""

from app.exports.layout import LaunchLayout
from app.exports.schemas import ExportFile
from app.exports.scripts import comment_block, plan_summary

SCRIPT_FILE = "autopar.sbatch"
NODE_SCRIPT = "launch_node.sh"
HEREDOC_END = "AUTOPAR_EOF"


def job_name(layout: LaunchLayout) -> str:
    name = "".join(c if c.isalnum() or c in "-_." else "-" for c in layout.model.name)
    return f"autopar-{name}"[:64]


def directives(layout: LaunchLayout) -> list[str]:
    lines: list[str] = []
    # On a cluster of several node groups each component must land on its group's nodes.
    constrained = len(layout.cluster.groups) > 1
    for index, block in enumerate(layout.blocks):
        if index:
            lines.append("#SBATCH hetjob")
        if index == 0:
            lines.append(f"#SBATCH --job-name={job_name(layout)}")
        lines += [
            f"# node group '{block.group}' ({block.gpu}, zone {block.zone}): node ranks "
            f"{block.first_node_rank}-{block.first_node_rank + block.num_nodes - 1}",
            f"#SBATCH --nodes={block.num_nodes}",
            "#SBATCH --ntasks-per-node=1",
            f"#SBATCH --gpus-per-node={block.procs_per_node}",
            "#SBATCH --exclusive",
        ]
        if constrained:
            lines += [
                "# the feature of this group's nodes (or name its partition instead):",
                f"#SBATCH --constraint={block.group}",
            ]
    return lines


def heredoc(path: str, content: str) -> str:
    return f"cat > {path} <<'{HEREDOC_END}'\n{content.rstrip()}\n{HEREDOC_END}"


def sbatch_script(layout: LaunchLayout, node_script: str, configs: list[ExportFile]) -> str:
    heterogeneous = len(layout.blocks) > 1
    notes = [
        f"autopar export: Slurm batch job, {layout.framework} launcher",
        *plan_summary(layout),
        "",
        "Submit with: sbatch " + SCRIPT_FILE + " <training flags: data, tokenizer, ...>",
    ]
    groups = ",".join(str(index) for index in range(len(layout.blocks)))
    srun = ["srun"]
    if heterogeneous:
        srun.append(f"--het-group={groups}")
    srun += ["--kill-on-bad-exit=1", f'bash "$RUN_DIR/{NODE_SCRIPT}" "$@"']
    nodelist = (
        "${SLURM_JOB_NODELIST_HET_GROUP_0:-$SLURM_JOB_NODELIST}"
        if heterogeneous
        else "$SLURM_JOB_NODELIST"
    )
    parts = [
        "#!/bin/bash",
        *directives(layout),
        comment_block(notes),
        "set -euo pipefail",
        "",
        "# The launch files, written next to the job (one copy per job).",
        "export RUN_DIR=${AUTOPAR_RUN_DIR:-$PWD/autopar-$SLURM_JOB_ID}",
        'mkdir -p "$RUN_DIR"',
        *(heredoc(f'"$RUN_DIR/{config.name}"', config.content) for config in configs),
        heredoc(f'"$RUN_DIR/{NODE_SCRIPT}"', node_script),
        "",
        "# Rendezvous on the job's first node; srun runs one task per node, SLURM_PROCID is its "
        "node rank.",
        # Not `| head -n 1`: under pipefail, scontrol killed by SIGPIPE after head exits (a long
        # node list) would fail the job with status 141.
        f'HOSTS=$(scontrol show hostnames "{nodelist}")',
        "MASTER_ADDR=${HOSTS%%$'\\n'*}",
        "export MASTER_ADDR",
        "export MASTER_PORT=${MASTER_PORT:-29500}",
        " ".join(srun),
    ]
    return "\n".join(parts) + "\n"


def files(layout: LaunchLayout, node_script: str, configs: list[ExportFile]) -> list[ExportFile]:
    return [
        ExportFile(
            name=SCRIPT_FILE,
            media_type="text/x-shellscript",
            content=sbatch_script(layout, node_script, configs),
        )
    ]


def launch_command(layout: LaunchLayout) -> str:
    del layout
    return f"sbatch {SCRIPT_FILE} <training flags>"
