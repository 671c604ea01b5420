"""torchtitan: a job-config TOML (``--job.config_file``) and its torchrun launch.

Field names are those of torchtitan 0.2's ``torchtitan/config/job_config.py`` (``JobConfig``:
``[training] local_batch_size, global_batch_size, seq_len, mixed_precision_param``;
``[parallelism] data_parallel_replicate_degree, data_parallel_shard_degree,
tensor_parallel_degree, enable_async_tensor_parallel, pipeline_parallel_degree,
pipeline_parallel_schedule, pipeline_parallel_microbatch_size, module_fqns_per_model_part,
context_parallel_degree, expert_parallel_degree, expert_tensor_parallel_degree``;
``[activation_checkpoint] mode``; ``[quantize.linear.float8]`` with the
``quantize.linear.float8`` model converter). torchtitan 0.3 replaced the TOML files with Python
config registries; this export is for the 0.2 line.

Batch: torchtitan's ``local_batch_size`` is what one data-parallel rank feeds per forward;
gradient accumulation is ``global_batch_size / (local_batch_size x dp)`` (``train.py``). Under
pipeline parallelism a rank's whole share of the step goes through one schedule, split into
micro-batches of ``pipeline_parallel_microbatch_size``.

Sharding: the plan's ``dp_shard`` counts data x context ranks, and torchtitan always shards over
its ``cp`` ranks too (its FSDP mesh is ``dp_shard x cp``), so ``data_parallel_shard_degree =
dp_shard / cp``; ZeRO-3 without ``dp_shard`` shards over every data rank, ZeRO-0 replicates
(DDP).
"""

import json

from app.exports.layout import ExportError, LaunchLayout
from app.exports.schemas import ExportFile
from app.exports.scripts import (
    TORCHRUN,
    command_lines,
    comment_block,
    node_environment,
    plan_summary,
    word,
)

CONFIG_FILE = "torchtitan.toml"
LAUNCH_FILE = "launch_torchtitan.sh"


def data_parallel_degrees(layout: LaunchLayout) -> tuple[int, int]:
    """(data_parallel_replicate_degree, data_parallel_shard_degree)."""
    plan = layout.plan
    if plan.zero_stage == 0:
        return layout.dp, 1
    if plan.dp_shard is None:
        return 1, layout.dp
    if plan.dp_shard % layout.cp:
        raise ExportError(
            "plan.dp_shard",
            f"torchtitan shards over data_parallel_shard_degree x cp ranks; dp_shard "
            f"{plan.dp_shard} is not a multiple of cp {layout.cp}",
        )
    shard = plan.dp_shard // layout.cp
    return layout.dp // shard, shard


def check(layout: LaunchLayout) -> None:
    precision = layout.training.precision
    if precision == "fp16":
        raise ExportError(
            "training.precision",
            "torchtitan trains in bfloat16 or float32 (training.mixed_precision_param), not fp16",
        )
    if layout.model.moe is not None and layout.ep > 1 and layout.etp not in (1, layout.tp):
        raise ExportError(
            "plan.etp",
            f"torchtitan supports expert_tensor_parallel_degree 1 or = tp ({layout.tp}), "
            f"not {layout.etp}",
        )
    _, shard = data_parallel_degrees(layout)
    if layout.ep > 1:
        # torchtitan's sparse mesh: pp, dp_replicate, efsdp, ep, etp with
        # efsdp = dp_shard * cp * tp / (ep * etp): experts borrow only sharded data ranks.
        borrowable = shard * layout.cp * layout.tp
        if borrowable % (layout.ep * layout.etp):
            raise ExportError(
                "plan.ep",
                f"torchtitan's expert ranks (ep x etp = {layout.ep * layout.etp}) come from "
                f"data_parallel_shard_degree x cp x tp = {borrowable} ranks (replicated data "
                "ranks are not borrowed)",
            )
    if layout.plan.zero_stage == 0 and layout.cp > 1:
        layout.warnings.append(
            "torchtitan shards parameters over its context-parallel ranks (FSDP over dp_shard x "
            "cp) even when the data ranks replicate"
        )
    if layout.model.activation != "swiglu":
        layout.warnings.append(
            f"torchtitan's decoders (llama3, deepseek_v3, ...) use SwiGLU; this model's MLP is "
            f"{layout.model.activation}"
        )
    if layout.tp > 1 and not layout.sequence_parallel:
        layout.warnings.append(
            "torchtitan's tensor parallelism always shards the norms' activations "
            "(sequence parallel); the plan was priced without"
        )
    if precision == "bf16" and shard == 1 and layout.cp == 1 and (layout.tp > 1 or layout.pp > 1):
        layout.warnings.append(
            "torchtitan applies bf16 mixed precision through FSDP (or autocast under plain "
            "DDP); replicated with TP/PP it computes in float32 - set [training] dtype = "
            '"bfloat16" for pure bf16'
        )


def schedule(layout: LaunchLayout) -> str:
    if layout.vpp > 1:
        return "Interleaved1F1B"
    return "GPipe" if layout.plan.schedule == "gpipe" else "1F1B"


def module_fqns(layout: LaunchLayout) -> list[list[str]]:
    """The modules of every model chunk, in virtual-stage order (chunk v of rank s at v * pp +
    s, torchtitan's loop style), with torchtitan's decoder module names."""
    parts = []
    for chunk in layout.chunks:
        names = ["tok_embeddings"] if chunk.embedding else []
        names += [f"layers.{i}" for i in range(chunk.first_layer, chunk.first_layer + chunk.layers)]
        if chunk.loss:
            names += ["norm", "output"]
        parts.append(names)
    return parts


def model_name(layout: LaunchLayout) -> tuple[str, str]:
    """torchtitan's model name and flavor, guessed from the spec: its flavor must have this
    shape (the TOML's header lists it)."""
    model = layout.model
    name = "deepseek_v3" if model.mla is not None else ("llama4" if model.moe else "llama3")
    digits = "".join(c for c in model.name.split("-")[-1] if c.isalnum())
    return name, digits.upper() if digits else "debugmodel"


def job_config(layout: LaunchLayout) -> dict[str, dict[str, object]]:
    plan, training = layout.plan, layout.training
    replicate, shard = data_parallel_degrees(layout)
    name, flavor = model_name(layout)
    pipelined = layout.pp > 1
    local_batch = (
        layout.micro_batch_size * layout.gradient_accumulation_steps
        if pipelined
        else layout.micro_batch_size
    )
    config: dict[str, dict[str, object]] = {
        "job": {"description": f"autopar: {layout.model.name}"},
        "model": {"name": name, "flavor": flavor},
        "training": {
            "local_batch_size": local_batch,
            "global_batch_size": layout.global_batch_size,
            "seq_len": training.seq_length,
            "mixed_precision_param": "float32"
            if training.precision in ("fp32", "tf32")
            else "bfloat16",
        },
        "parallelism": {
            "data_parallel_replicate_degree": replicate,
            "data_parallel_shard_degree": shard,
            "tensor_parallel_degree": layout.tp,
            "enable_async_tensor_parallel": bool(plan.tp_comm_overlap and layout.tp > 1),
            "pipeline_parallel_degree": layout.pp,
            "context_parallel_degree": layout.cp,
        },
        "activation_checkpoint": {"mode": plan.recompute},
    }
    if pipelined:
        config["parallelism"] |= {
            "pipeline_parallel_schedule": schedule(layout),
            "pipeline_parallel_microbatch_size": layout.micro_batch_size,
            "module_fqns_per_model_part": module_fqns(layout),
        }
    if layout.model.moe is not None:
        config["parallelism"] |= {
            "expert_parallel_degree": layout.ep,
            "expert_tensor_parallel_degree": layout.etp if layout.ep > 1 else 1,
        }
    if plan.recompute == "selective":
        config["activation_checkpoint"]["selective_ac_option"] = "op"
    if plan.tp_comm_overlap and layout.tp > 1:
        config["compile"] = {"enable": True, "components": ["model", "loss"]}
    if training.precision == "fp8":
        config["model"]["converters"] = ["quantize.linear.float8"]
        config["quantize.linear.float8"] = {
            "recipe_name": "tensorwise",
            "enable_fsdp_float8_all_gather": shard > 1,
            "precompute_float8_dynamic_scale_for_fsdp": shard > 1,
            "filter_fqns": ["output"],
        }
    return config


def _toml_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a TOML basic string
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML for {value!r}")


def to_toml(config: dict[str, dict[str, object]], header: list[str]) -> str:
    lines = [comment_block(header), ""]
    for table, values in config.items():
        lines.append(f"[{table}]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in values.items()]
        lines.append("")
    return "\n".join(lines)


def config_file(layout: LaunchLayout) -> ExportFile:
    model = layout.model
    header = [
        "autopar export: torchtitan 0.2 job config (--job.config_file)",
        *plan_summary(layout),
        "",
        "[model] name/flavor are a guess from the spec's name: the flavor must have this shape:",
        f"  dim {model.hidden_size}, n_layers {model.num_layers}, n_heads "
        f"{model.num_attention_heads}, n_kv_heads {model.kv_heads}, FFN {model.ffn_size}, "
        f"vocab {model.vocab_size}",
    ]
    return ExportFile(
        name=CONFIG_FILE, media_type="application/toml", content=to_toml(job_config(layout), header)
    )


def program(config_path: str) -> list[str]:
    return ["-m torchtitan.train", f"--job.config_file {word(config_path)}", '"$@"']


def node_script(layout: LaunchLayout, config_path: str, *, title: str) -> str:
    notes = [
        title,
        *plan_summary(layout),
        "",
        "Run once per node (srun, a Kubeflow pod, or by hand with NODE_RANK, MASTER_ADDR set);",
        "more --section.key value overrides can follow as arguments.",
    ]
    parts = [
        "#!/usr/bin/env bash",
        comment_block(notes),
        "set -euo pipefail",
        "",
        node_environment(layout),
        "",
        "exec " + command_lines([*TORCHRUN, *program(config_path)]),
    ]
    return "\n".join(parts) + "\n"


def files(layout: LaunchLayout) -> list[ExportFile]:
    return [
        config_file(layout),
        ExportFile(
            name=LAUNCH_FILE,
            media_type="text/x-shellscript",
            content=node_script(layout, CONFIG_FILE, title="autopar export: torchtitan launch"),
        ),
    ]


def launch_command(layout: LaunchLayout) -> str:
    if layout.num_nodes == 1:
        return f"bash {LAUNCH_FILE}"
    return f"on every node: NODE_RANK=<rank> MASTER_ADDR=<node 0> bash {LAUNCH_FILE}"
