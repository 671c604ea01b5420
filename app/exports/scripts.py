"""Shell pieces every launch script shares: the plan summary header, flag arrays, the per-node
environment (node rank, processes on this node, rendezvous) and the ``torchrun`` line.

A node script runs once per node (``srun`` with one task per node, a PyTorchJob / TrainJob pod,
or by hand with ``NODE_RANK`` set); ``torchrun`` then starts one process per GPU. The
rendezvous is static (``--node-rank``, ``--master-addr``), not c10d: ranks must follow the node
order the layout was placed in, and c10d hands node ranks out first come, first served.
"""

import shlex
from collections.abc import Iterable, Sequence

from app.exports.layout import LaunchLayout

# One flag and its values: ("--tensor-model-parallel-size", "8"), ("--bf16",).
Flag = tuple[str, ...]


class Shell(str):
    """A word that is shell text already (``"$RUN_DIR/ds_config.json"``): written unquoted."""

    __slots__ = ()


def word(part: str) -> str:
    return str(part) if isinstance(part, Shell) else shlex.quote(part)


# Where a node finds its rank and the rendezvous: set by hand, by the Kubeflow operators (PET_*,
# MASTER_ADDR/PORT, RANK: the pod's index) or by srun (SLURM_PROCID: one task per node).
NODE_RANK_DEFAULT = "${NODE_RANK:-${PET_NODE_RANK:-${SLURM_PROCID:-${RANK:-0}}}}"
MASTER_ADDR_DEFAULT = "${MASTER_ADDR:-${PET_MASTER_ADDR:-127.0.0.1}}"
MASTER_PORT_DEFAULT = "${MASTER_PORT:-${PET_MASTER_PORT:-29500}}"


def flatten(flags: Iterable[Flag]) -> list[str]:
    return [part for flag in flags for part in flag]


def bash_array(name: str, flags: Sequence[Flag]) -> str:
    lines = [f"{name}=("]
    lines += [f"    {' '.join(word(part) for part in flag)}" for flag in flags]
    lines.append(")")
    return "\n".join(lines)


def plan_summary(layout: LaunchLayout) -> list[str]:
    """The plan in words, for the comment header of every file."""
    plan = layout.plan
    degrees = f"dp={layout.dp} tp={layout.tp} pp={layout.pp} cp={layout.cp}"
    if layout.model.moe is not None:
        degrees += f" ep={layout.ep} etp={layout.etp}"
    if layout.vpp > 1:
        degrees += f" vpp={layout.vpp}"
    lines = [
        f"model {layout.model.name}: {layout.model.num_layers} layers, hidden "
        f"{layout.model.hidden_size}; seq {layout.training.seq_length}, "
        f"{layout.training.precision}",
        f"plan: {degrees}, zero_stage={plan.zero_stage}, recompute={plan.recompute}, "
        f"sequence_parallel={layout.sequence_parallel}",
        f"batch: global {layout.global_batch_size} = micro {layout.micro_batch_size} x "
        f"grad-accum {layout.gradient_accumulation_steps} x dp {layout.dp}",
        f"GPUs: {layout.world_size} = dp x tp x pp x cp on {layout.num_nodes} nodes",
    ]
    lines += [
        f"  nodes {block.first_node_rank}-{block.first_node_rank + block.num_nodes - 1}: "
        f"group '{block.group}' ({block.gpu}, zone {block.zone}), {block.procs_per_node} "
        "processes each"
        for block in layout.blocks
    ]
    if layout.pp > 1:
        lines.append(f"pipeline stages' layers: {compact(layout.stage_layers)}")
    estimate = layout.estimate
    lines.append(
        f"estimate: {estimate.step_time_s:.3f} s/step, {estimate.tokens_per_s_per_gpu:,.0f} "
        f"tokens/s/GPU, MFU {estimate.mfu:.1%}, peak {estimate.peak_memory_gib:.1f} GiB/GPU"
    )
    lines.append(f"launchable by: {', '.join(layout.launchable_by)}")
    lines += [f"warning: {warning}" for warning in layout.warnings]
    return lines


def compact(values: Sequence[int]) -> str:
    """[7, 8, 8, 8, 7] -> '7, 8 x 3, 7'."""
    parts: list[str] = []
    index = 0
    while index < len(values):
        run = 1
        while index + run < len(values) and values[index + run] == values[index]:
            run += 1
        parts.append(str(values[index]) if run == 1 else f"{values[index]} x {run}")
        index += run
    return ", ".join(parts)


def comment_block(lines: Iterable[str], prefix: str = "# ") -> str:
    return "\n".join(f"{prefix}{line}".rstrip() for line in lines)


def node_environment(layout: LaunchLayout) -> str:
    """Shell lines setting NNODES, NODE_RANK, NPROC_PER_NODE, MASTER_ADDR and MASTER_PORT."""
    lines = [
        f"NNODES={layout.num_nodes}",
        f"NODE_RANK={NODE_RANK_DEFAULT}",
    ]
    uniform = layout.uniform_procs
    if uniform is not None:
        lines.append(f"NPROC_PER_NODE={uniform}")
    else:
        lines.append("# Processes on this node: its node group's share of the plan's ranks.")
        branches = []
        for index, block in enumerate(layout.blocks):
            end = block.first_node_rank + block.num_nodes
            keyword = "if" if index == 0 else "elif"
            if index == len(layout.blocks) - 1:
                branches.append(f"else NPROC_PER_NODE={block.procs_per_node}  # {block.group}")
            else:
                branches.append(
                    f"{keyword} (( NODE_RANK < {end} )); then "
                    f"NPROC_PER_NODE={block.procs_per_node}  # {block.group}"
                )
        lines += [*branches, "fi"]
    lines += [f"MASTER_ADDR={MASTER_ADDR_DEFAULT}", f"MASTER_PORT={MASTER_PORT_DEFAULT}"]
    return "\n".join(lines)


TORCHRUN = [
    "torchrun",
    '--nnodes "$NNODES"',
    '--nproc-per-node "$NPROC_PER_NODE"',
    '--node-rank "$NODE_RANK"',
    '--master-addr "$MASTER_ADDR"',
    '--master-port "$MASTER_PORT"',
]


def command_lines(words: Sequence[str], indent: str = "    ") -> str:
    """A command over several lines with backslash continuations; ``words`` are shell text
    (quote literals with shlex.quote first)."""
    return (" \\\n" + indent).join(words)


def exports(env: dict[str, str]) -> str:
    return "\n".join(f"export {name}={shlex.quote(value)}" for name, value in env.items())
