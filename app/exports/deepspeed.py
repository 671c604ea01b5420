"""DeepSpeed: a ``ds_config.json`` and the launch of Megatron-DeepSpeed's ``pretrain_gpt.py``.

Config keys are DeepSpeed's (``deepspeed/runtime/config.py``: ``train_batch_size`` must equal
``train_micro_batch_size_per_gpu x gradient_accumulation_steps x`` data-parallel size;
``zero_optimization`` as ``DeepSpeedZeroConfig``, ``offload_optimizer.device``;
``bf16``/``fp16``; ``activation_checkpointing``). Launcher flags are those of
``deepspeed/launcher/runner.py`` (``--num_nodes``, ``--num_gpus``, ``--hostfile``,
``--master_addr``, ``--master_port``); model-parallel flags those of Megatron-DeepSpeed's
``megatron/arguments.py`` (``--tensor-model-parallel-size``, ``--pipeline-model-parallel-size``
or ``--no-pipeline-parallel``, ``--zero-stage``, ``--deepspeed-activation-checkpointing``,
``--cpu-optimizer``, DeepSpeed-MoE's ``--num-experts``/``--topk``/
``--moe-expert-parallel-size``, ``--fp8-hybrid``).

Megatron-DeepSpeed builds its pipeline with ``PipelineModule(partition_method=
'type:transformer')``: DeepSpeed balances the transformer layers over the stages itself, which
is the plan's split when it is even.
"""

import json
import shlex

from app.exports.layout import ExportError, LaunchLayout
from app.exports.schemas import ExportFile
from app.exports.scripts import (
    TORCHRUN,
    Flag,
    bash_array,
    command_lines,
    comment_block,
    compact,
    exports,
    node_environment,
    plan_summary,
)

CONFIG_FILE = "ds_config.json"
LAUNCH_FILE = "launch_deepspeed.sh"
TRAIN_SCRIPT = "$MEGATRON_DEEPSPEED/pretrain_gpt.py"


def check(layout: LaunchLayout) -> None:
    model = layout.model
    if model.mla is not None or model.activation == "relu2":
        what = "multi-head latent attention" if model.mla is not None else "squared-ReLU MLPs"
        raise ExportError("model", f"Megatron-DeepSpeed's GPT model has no {what}")
    moe = model.moe
    if moe is not None and (moe.first_dense_layers or moe.layer_interval != 1):
        raise ExportError(
            "model.moe",
            "Megatron-DeepSpeed makes layers k, 2k, ... (counted from 1) MoE with "
            f"--expert-interval k; this model's MoE layers start after "
            f"{moe.first_dense_layers} dense layers, every {moe.layer_interval}",
        )
    if layout.is_heterogeneous and len(set(layout.stage_layers)) > 1:
        raise ExportError(
            "plan.stages",
            "DeepSpeed partitions layers uniformly or by parameters, not by explicit counts "
            f"(this plan's stages hold {compact(layout.stage_layers)} layers)",
        )
    if layout.uniform_procs is None:
        raise ExportError(
            "plan.stages",
            "the deepspeed launcher runs --num_gpus processes on every node; this plan runs "
            + ", ".join(f"{b.procs_per_node} on group '{b.group}'" for b in layout.blocks),
        )
    if layout.pp > 1 and len(set(layout.stage_layers)) > 1:
        layout.warnings.append(
            "DeepSpeed's PipelineModule balances the transformer layers over the stages itself "
            f"(partition_method 'type:transformer'), not the plan's {compact(layout.stage_layers)}"
        )


def ds_config(layout: LaunchLayout) -> dict[str, object]:
    plan, precision = layout.plan, layout.training.precision
    zero: dict[str, object] = {
        "stage": plan.zero_stage,
        "overlap_comm": plan.overlap_grad_reduce,
        "contiguous_gradients": True,
    }
    if plan.zero_stage in (1, 2):
        zero["reduce_scatter"] = True
    if plan.offload_optimizer:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": True}
    config: dict[str, object] = {
        "train_batch_size": layout.global_batch_size,
        "train_micro_batch_size_per_gpu": layout.micro_batch_size,
        "gradient_accumulation_steps": layout.gradient_accumulation_steps,
        "zero_optimization": zero,
        "bf16": {"enabled": precision in ("bf16", "fp8")},
        "fp16": {"enabled": precision == "fp16"},
        "gradient_clipping": 1.0,
        "steps_per_print": 10,
        "wall_clock_breakdown": False,
    }
    if precision == "fp16":
        config["fp16"] = {"enabled": True, "loss_scale": 0, "initial_scale_power": 16}
    if plan.recompute == "full":
        config["activation_checkpointing"] = {
            "partition_activations": False,
            "contiguous_memory_optimization": False,
            "cpu_checkpointing": False,
        }
    return config


def sections(layout: LaunchLayout, config_path: str) -> dict[str, list[Flag]]:
    plan, model, training = layout.plan, layout.model, layout.training
    parallel: list[Flag] = [("--tensor-model-parallel-size", str(layout.tp))]
    if layout.pp > 1:
        parallel.append(("--pipeline-model-parallel-size", str(layout.pp)))
    else:
        parallel += [("--pipeline-model-parallel-size", "1"), ("--no-pipeline-parallel",)]
    if layout.sequence_parallel:
        parallel.append(("--sequence-parallel",))
    if model.moe is not None:
        parallel.append(("--moe-expert-parallel-size", str(layout.ep)))
    shape: list[Flag] = [
        ("--num-layers", str(model.num_layers)),
        ("--hidden-size", str(model.hidden_size)),
        ("--ffn-hidden-size", str(model.ffn_size)),
        ("--num-attention-heads", str(model.num_attention_heads)),
    ]
    if model.kv_heads != model.num_attention_heads:
        shape.append(("--num-key-value-heads", str(model.kv_heads)))
    shape += [
        ("--seq-length", str(training.seq_length)),
        ("--max-position-embeddings", str(model.max_position_embeddings or training.seq_length)),
    ]
    if model.activation == "swiglu":
        shape += [
            ("--swiglu",),
            ("--use-rotary-position-embeddings",),
            ("--no-position-embedding",),
            ("--normalization", "rmsnorm"),
            ("--disable-bias-linear",),
        ]
    if not model.tie_embeddings:
        shape.append(("--untie-embeddings-and-output-weights",))
    if model.moe is not None:
        shape += [
            ("--num-experts", str(model.moe.num_experts)),
            ("--topk", str(model.moe.top_k)),
            ("--expert-interval", "1"),
        ]
    if not training.dropout:
        shape += [("--attention-dropout", "0.0"), ("--hidden-dropout", "0.0")]
    if training.flash_attention:
        shape.append(("--use-flash-attn-v2",))
    run: list[Flag] = [
        ("--micro-batch-size", str(layout.micro_batch_size)),
        ("--global-batch-size", str(layout.global_batch_size)),
    ]
    if training.precision in ("bf16", "fp8"):
        run.append(("--bf16",))
    elif training.precision == "fp16":
        run.append(("--fp16",))
    if training.precision == "fp8":
        run.append(("--fp8-hybrid",))
    if plan.recompute == "full":
        run += [("--checkpoint-activations",), ("--deepspeed-activation-checkpointing",)]
    if plan.offload_optimizer:
        run.append(("--cpu-optimizer",))
    run += [
        ("--zero-stage", str(plan.zero_stage)),
        ("--deepspeed",),
        ("--deepspeed_config", config_path),
    ]
    return {"PARALLEL_ARGS": parallel, "MODEL_ARGS": shape, "TRAINING_ARGS": run}


def program(layout: LaunchLayout, config_path: str) -> list[str]:
    return [
        f'"{TRAIN_SCRIPT}"',
        *(f'"${{{name}[@]}}"' for name in sections(layout, config_path)),
        '"$@"',
    ]


def _script(
    layout: LaunchLayout, config_path: str, *, launcher: list[str], notes: list[str]
) -> str:
    parts = [
        "#!/usr/bin/env bash",
        comment_block(notes),
        "set -euo pipefail",
        "",
        "MEGATRON_DEEPSPEED=${MEGATRON_DEEPSPEED:-/opt/Megatron-DeepSpeed}  # a checkout",
        node_environment(layout),
    ]
    if layout.tp > 1:
        parts.append(exports({"CUDA_DEVICE_MAX_CONNECTIONS": "1"}))
    parts.append("")
    parts += [bash_array(name, flags) for name, flags in sections(layout, config_path).items()]
    parts += ["", "exec " + command_lines([*launcher, *program(layout, config_path)])]
    return "\n".join(parts) + "\n"


def deepspeed_launcher(layout: LaunchLayout) -> list[str]:
    words = ["deepspeed", '--num_nodes "$NNODES"', '--num_gpus "$NPROC_PER_NODE"']
    if layout.num_nodes > 1:
        words.append('--hostfile "$HOSTFILE"')
    # No --master_addr: the launcher takes the hostfile's first host (node 0).
    return [*words, '--master_port "$MASTER_PORT"']


def launcher_script(layout: LaunchLayout, config_path: str) -> str:
    """The ``deepspeed`` launcher, run once on the first node: it starts every node's
    processes over ssh (pdsh) from the hostfile."""
    notes = [
        "autopar export: DeepSpeed (Megatron-DeepSpeed) launch",
        *plan_summary(layout),
        "",
        "Run once, on the first node. HOSTFILE lists the nodes, one 'host slots=N' line each",
        f"(N = {layout.uniform_procs}); data and tokenizer flags are yours: pass them as "
        "arguments.",
    ]
    script = _script(layout, config_path, launcher=deepspeed_launcher(layout), notes=notes)
    if layout.num_nodes > 1:
        script = script.replace("MASTER_ADDR=", "HOSTFILE=${HOSTFILE:-hostfile}\nMASTER_ADDR=", 1)
    return script


def node_script(layout: LaunchLayout, config_path: str, *, title: str) -> str:
    """One node's launch under a scheduler (srun, Kubeflow): torchrun starts the node's
    processes; DeepSpeed reads the ranks torchrun sets."""
    notes = [title, *plan_summary(layout), "", "Run once per node; pass data flags as arguments."]
    return _script(layout, config_path, launcher=TORCHRUN, notes=notes)


def config_file(layout: LaunchLayout) -> ExportFile:
    return ExportFile(
        name=CONFIG_FILE,
        media_type="application/json",
        content=json.dumps(ds_config(layout), indent=2) + "\n",
    )


def files(layout: LaunchLayout) -> list[ExportFile]:
    return [
        config_file(layout),
        ExportFile(
            name=LAUNCH_FILE,
            media_type="text/x-shellscript",
            content=launcher_script(layout, CONFIG_FILE),
        ),
    ]


def launch_command(layout: LaunchLayout) -> str:
    hostfile = "HOSTFILE=hostfile " if layout.num_nodes > 1 else ""
    return f"{hostfile}bash {shlex.quote(LAUNCH_FILE)} <data flags>"
