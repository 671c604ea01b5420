"""Megatron-LM / Megatron-Core launch flags, and the same plan as NeMo 2 recipe overrides.

Flag names are those of ``megatron/training/arguments.py`` (NVIDIA/Megatron-LM, core_v0.14.0:
``_add_distributed_args``, ``_add_training_args``, ``_add_network_size_args``,
``_add_mixed_precision_args``, ``_add_moe_args``, ``_add_mla_args``; the later dataclass-built
parser keeps them), and the pipeline rules those of its ``validate_args`` and Megatron-Core's
``TransformerConfig.__post_init__`` / ``get_num_layers_to_build``:

- an even split needs nothing (interleaved: ``--num-layers-per-virtual-pipeline-stage``);
- first/last stages of their own: ``--decoder-first/last-pipeline-num-layers``, and with
  interleaving ``--num-virtual-stages-per-pipeline-rank`` (Megatron refuses the per-stage layer
  count there), each stage's layers divisible by vpp;
- the embedding / loss counted as a layer (``--account-for-embedding/loss-in-pipeline-split``):
  only on an otherwise even split (Megatron-Core refuses them with explicit first/last counts);
- anything else (a heterogeneous plan's stages, chunks the flags above cannot give):
  ``--pipeline-model-parallel-layout`` (``E``, ``t``, ``L`` per virtual stage, ``|`` between).
"""

from app.exports.layout import Chunk, ExportError, LaunchLayout
from app.exports.schemas import ExportFile
from app.exports.scripts import (
    TORCHRUN,
    Flag,
    bash_array,
    command_lines,
    comment_block,
    exports,
    node_environment,
    plan_summary,
)

TRAIN_SCRIPT = "$MEGATRON_LM/pretrain_gpt.py"
LAUNCH_FILE = "launch_megatron.sh"
NEMO_FILE = "nemo2_recipe.py"


def check(layout: LaunchLayout) -> None:
    """What Megatron's own checks would refuse that the framework table lets through."""
    plan = layout.plan
    if layout.cp > 1 and layout.training.seq_length % (2 * layout.cp):
        raise ExportError(
            "plan.cp",
            f"Megatron's context parallelism splits each sequence into 2 x cp = {2 * layout.cp} "
            f"chunks (load balancing); seq_length {layout.training.seq_length} does not divide",
        )
    if plan.tp_comm_overlap and layout.tp > 1 and not layout.sequence_parallel:
        raise ExportError(
            "plan.tp_comm_overlap",
            "Megatron overlaps TP communication only with sequence parallelism "
            "(--tp-comm-overlap needs --sequence-parallel)",
        )


# Pipeline --------------------------------------------------------------------------------------
def pipeline_flags(layout: LaunchLayout) -> list[Flag]:
    """The flags that give the plan's (virtual) pipeline split; see the module docstring."""
    pp, vpp = layout.pp, layout.vpp
    if pp == 1:
        return []
    layers = layout.stage_layers
    first, last, middles = layers[0], layers[-1], layers[1:-1]
    middle = middles[0] if middles else None
    uniform_middle = len(set(middles)) <= 1
    embedding_slot = layout.chunk(0, 0).slot
    loss_slot = layout.chunk(pp - 1, vpp - 1).slot
    flags: list[Flag]
    if not (embedding_slot or loss_slot):
        if len(set(layers)) == 1:  # even: Megatron's default
            if vpp == 1:
                return []
            return [("--num-layers-per-virtual-pipeline-stage", str(first // vpp))]
        if uniform_middle:
            flags = [
                ("--decoder-first-pipeline-num-layers", str(first)),
                ("--decoder-last-pipeline-num-layers", str(last)),
            ]
            if vpp > 1:
                flags.append(("--num-virtual-stages-per-pipeline-rank", str(vpp)))
            return flags
        return layout_flags(layout)
    # The embedding and/or loss take a layer's place: Megatron splits num_layers + those slots
    # evenly, with no explicit first/last counts.
    share = first + int(embedding_slot)
    if (
        uniform_middle
        and (middle is None or middle == share)
        and last + int(loss_slot) == share
        and share % vpp == 0
    ):
        flags = []
        if embedding_slot:
            flags.append(("--account-for-embedding-in-pipeline-split",))
        if loss_slot:
            flags.append(("--account-for-loss-in-pipeline-split",))
        flags.append(("--num-layers-per-virtual-pipeline-stage", str(share // vpp)))
        return flags
    return layout_flags(layout)


def layout_string(chunks: tuple[Chunk, ...]) -> str:
    """Megatron-Core's ``PipelineParallelLayerLayout`` string: one entry per virtual stage in
    virtual order (chunk v of pipeline rank s at v * pp + s), split by ``|``."""
    entries = []
    for chunk in chunks:
        body = "t" * chunk.layers if chunk.layers < 3 else f"t*{chunk.layers}"
        entries.append(f"{'E' if chunk.embedding else ''}{body}{'L' if chunk.loss else ''}")
    return "|".join(entries)


def layout_flags(layout: LaunchLayout) -> list[Flag]:
    return [("--pipeline-model-parallel-layout", layout_string(layout.chunks))]


# Flags -----------------------------------------------------------------------------------------
def moe_layer_pattern(layout: LaunchLayout) -> str | None:
    """``--moe-layer-freq``: an int N makes layers 0, N, 2N, ... MoE (Megatron-Core's
    ``i % N == 0``), else a Python list expression of 0/1 per layer. The cost model's MoE layers
    are ``first_dense_layers`` dense ones, then every ``layer_interval``-th from there."""
    moe = layout.model.moe
    if moe is None:
        return None
    layers, dense, interval = layout.model.num_layers, moe.first_dense_layers, moe.layer_interval
    if dense == 0:
        return None if interval == 1 else str(interval)
    rest = layers - dense
    if interval == 1:
        return f"([0]*{dense}+[1]*{rest})"
    repeats, remainder = divmod(rest, interval)
    tail = f"+[1]+[0]*{remainder - 1}" if remainder else ""
    return f"([0]*{dense}+([1]+[0]*{interval - 1})*{repeats}{tail})"


def modern_architecture(layout: LaunchLayout) -> bool:
    """Whether the model is of the Llama line (gated or squared-ReLU MLP, or MLA): rotary
    positions, RMSNorm and no linear biases, which the spec does not carry and the cost model
    prices that way (no position-embedding or bias parameters). GeLU models keep Megatron's
    GPT defaults (learned positions, LayerNorm, biases)."""
    model = layout.model
    return model.activation != "gelu" or model.mla is not None


def parallel_flags(layout: LaunchLayout) -> list[Flag]:
    plan = layout.plan
    flags: list[Flag] = [
        ("--tensor-model-parallel-size", str(layout.tp)),
        ("--pipeline-model-parallel-size", str(layout.pp)),
        *pipeline_flags(layout),
        ("--context-parallel-size", str(layout.cp)),
    ]
    if layout.model.moe is not None:
        flags += [
            ("--expert-model-parallel-size", str(layout.ep)),
            ("--expert-tensor-parallel-size", str(layout.etp)),
        ]
    if layout.sequence_parallel:
        flags.append(("--sequence-parallel",))
    if plan.zero_stage == 1:
        flags.append(("--use-distributed-optimizer",))
    if plan.overlap_grad_reduce:
        flags.append(("--overlap-grad-reduce",))
        if plan.zero_stage == 1:
            flags.append(("--overlap-param-gather",))
    if plan.tp_comm_overlap and layout.tp > 1:
        flags.append(("--tp-comm-overlap",))
    return flags


def model_flags(layout: LaunchLayout) -> list[Flag]:
    model, training = layout.model, layout.training
    flags: list[Flag] = [
        ("--num-layers", str(model.num_layers)),
        ("--hidden-size", str(model.hidden_size)),
        ("--ffn-hidden-size", str(model.ffn_size)),
        ("--num-attention-heads", str(model.num_attention_heads)),
    ]
    if model.mla is None and model.kv_heads != model.num_attention_heads:
        flags += [("--group-query-attention",), ("--num-query-groups", str(model.kv_heads))]
    if (
        model.mla is None
        and model.head_dim
        and model.head_dim * model.num_attention_heads != (model.hidden_size)
    ):
        flags.append(("--kv-channels", str(model.head_dim)))
    flags += [
        ("--seq-length", str(training.seq_length)),
        ("--max-position-embeddings", str(model.max_position_embeddings or training.seq_length)),
    ]
    if model.activation == "swiglu":
        flags.append(("--swiglu",))
    elif model.activation == "relu2":
        flags.append(("--squared-relu",))
    if modern_architecture(layout):
        flags += [
            ("--position-embedding-type", "rope"),
            ("--normalization", "RMSNorm"),
            ("--disable-bias-linear",),
        ]
    if not model.tie_embeddings:
        flags.append(("--untie-embeddings-and-output-weights",))
    if model.mla is not None:
        mla = model.mla
        flags.append(("--multi-latent-attention",))
        if mla.q_rank:
            flags.append(("--q-lora-rank", str(mla.q_rank)))
        flags += [
            ("--kv-lora-rank", str(mla.kv_lora_rank)),
            ("--qk-head-dim", str(mla.qk_nope_head_dim)),
            ("--qk-pos-emb-head-dim", str(mla.qk_rope_head_dim)),
            ("--v-head-dim", str(mla.v_head_dim)),
        ]
    if model.moe is not None:
        moe = model.moe
        flags += [
            ("--num-experts", str(moe.num_experts)),
            ("--moe-router-topk", str(moe.top_k)),
            ("--moe-ffn-hidden-size", str(moe.expert_ffn_hidden_size)),
        ]
        if moe.num_shared_experts:
            shared = moe.num_shared_experts * moe.expert_ffn_hidden_size
            flags.append(("--moe-shared-expert-intermediate-size", str(shared)))
        pattern = moe_layer_pattern(layout)
        if pattern is not None:
            flags.append(("--moe-layer-freq", pattern))
        flags.append(("--moe-token-dispatcher-type", "alltoall"))
    if not training.dropout:
        flags += [("--attention-dropout", "0.0"), ("--hidden-dropout", "0.0")]
    if not training.flash_attention:
        flags.append(("--attention-backend", "unfused"))
    if training.fused_cross_entropy:
        flags.append(("--cross-entropy-loss-fusion",))
    return flags


def training_flags(layout: LaunchLayout) -> list[Flag]:
    plan, training = layout.plan, layout.training
    flags: list[Flag] = [
        ("--micro-batch-size", str(layout.micro_batch_size)),
        ("--global-batch-size", str(layout.global_batch_size)),
    ]
    precision = training.precision
    if precision in ("bf16", "fp8"):
        flags.append(("--bf16",))
    elif precision == "fp16":
        flags.append(("--fp16",))
    if precision == "fp8":
        flags.append(("--fp8-format", "hybrid"))
    if plan.recompute == "selective":
        flags.append(("--recompute-granularity", "selective"))
    elif plan.recompute == "full":
        flags += [
            ("--recompute-granularity", "full"),
            ("--recompute-method", "uniform"),
            ("--recompute-num-layers", "1"),
        ]
    flags.append(("--optimizer", "sgd" if training.optimizer == "sgd" else "adam"))
    if plan.offload_optimizer:
        # The hybrid-device optimizer reuses the precision-aware optimizer's code path.
        flags += [("--optimizer-cpu-offload",), ("--use-precision-aware-optimizer",)]
    return flags


def sections(layout: LaunchLayout) -> dict[str, list[Flag]]:
    return {
        "PARALLEL_ARGS": parallel_flags(layout),
        "MODEL_ARGS": model_flags(layout),
        "TRAINING_ARGS": training_flags(layout),
    }


def environment(layout: LaunchLayout) -> dict[str, str]:
    # Megatron wants one CUDA connection when TP/CP communication must be ordered with compute.
    if layout.tp > 1 or layout.cp > 1:
        return {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    return {}


def program(layout: LaunchLayout) -> list[str]:
    """What follows the launcher on the command line (shell text)."""
    return [
        f'"{TRAIN_SCRIPT}"',
        *(f'"${{{name}[@]}}"' for name in sections(layout)),
        '"$@"',
    ]


def node_script(layout: LaunchLayout, *, title: str) -> str:
    """One node's launch: torchrun starts this node's processes of the plan."""
    notes = [
        title,
        *plan_summary(layout),
        "",
        "Run once per node (srun, a Kubeflow pod, or by hand with NODE_RANK, MASTER_ADDR set).",
        "Data, tokenizer, learning rate and checkpoint flags are yours: pass them as arguments.",
    ]
    parts = [
        "#!/usr/bin/env bash",
        comment_block(notes),
        "set -euo pipefail",
        "",
        "MEGATRON_LM=${MEGATRON_LM:-/opt/megatron-lm}  # a Megatron-LM checkout",
        node_environment(layout),
    ]
    env = environment(layout)
    if env:
        parts.append(exports(env))
    parts.append("")
    parts += [bash_array(name, flags) for name, flags in sections(layout).items()]
    parts.append("")
    parts.append("exec " + command_lines([*TORCHRUN, *program(layout)]))
    return "\n".join(parts) + "\n"


def files(layout: LaunchLayout) -> list[ExportFile]:
    title = "autopar export: Megatron-LM (Megatron-Core) launch"
    return [
        ExportFile(
            name=LAUNCH_FILE,
            media_type="text/x-shellscript",
            content=node_script(layout, title=title),
        ),
        nemo_file(layout),
    ]


# NeMo 2 ----------------------------------------------------------------------------------------
def nemo_recipe_name(layout: LaunchLayout) -> str:
    """The NeMo 2 recipe module a model name suggests (llama3.1-405b -> llama31_405b,
    mixtral-8x7b -> mixtral_8x7b); the overrides set the shape either way."""
    return "".join(
        c for c in layout.model.name.lower().replace("-", "_") if c.isalnum() or c == "_"
    )


def nemo_overrides(layout: LaunchLayout) -> list[tuple[str, object]]:
    """(attribute path under ``recipe``, value) pairs: MegatronStrategy, data module, model
    config and optimizer config fields of NeMo 2 (nemo.lightning.MegatronStrategy,
    nemo.collections.llm recipes)."""
    plan, model, training = layout.plan, layout.model, layout.training
    strategy = "trainer.strategy"
    values: list[tuple[str, object]] = [
        ("trainer.num_nodes", layout.num_nodes),
        ("trainer.devices", layout.uniform_procs or max(b.procs_per_node for b in layout.blocks)),
        (f"{strategy}.tensor_model_parallel_size", layout.tp),
        (f"{strategy}.pipeline_model_parallel_size", layout.pp),
        (f"{strategy}.context_parallel_size", layout.cp),
        (f"{strategy}.sequence_parallel", layout.sequence_parallel),
    ]
    if layout.vpp > 1:
        values.append((f"{strategy}.virtual_pipeline_model_parallel_size", layout.vpp))
    for flag in pipeline_flags(layout):
        name = {
            "--decoder-first-pipeline-num-layers": "num_layers_in_first_pipeline_stage",
            "--decoder-last-pipeline-num-layers": "num_layers_in_last_pipeline_stage",
            "--account-for-embedding-in-pipeline-split": "account_for_embedding_in_pipeline_split",
            "--account-for-loss-in-pipeline-split": "account_for_loss_in_pipeline_split",
            "--pipeline-model-parallel-layout": "pipeline_model_parallel_layout",
        }.get(flag[0])
        if name is not None:
            value: object = True if len(flag) == 1 else flag[1]
            if isinstance(value, str) and value.isdigit():
                value = int(value)
            values.append((f"{strategy}.{name}", value))
    if model.moe is not None:
        values += [
            (f"{strategy}.expert_model_parallel_size", layout.ep),
            (f"{strategy}.expert_tensor_parallel_size", layout.etp),
        ]
    values += [
        (f"{strategy}.ddp.overlap_grad_reduce", plan.overlap_grad_reduce),
        (f"{strategy}.ddp.overlap_param_gather", plan.overlap_grad_reduce and plan.zero_stage == 1),
        ("data.micro_batch_size", layout.micro_batch_size),
        ("data.global_batch_size", layout.global_batch_size),
        ("data.seq_length", training.seq_length),
        ("model.config.seq_length", training.seq_length),
        ("model.config.num_layers", model.num_layers),
        ("model.config.hidden_size", model.hidden_size),
        ("model.config.ffn_hidden_size", model.ffn_size),
        ("model.config.num_attention_heads", model.num_attention_heads),
    ]
    if model.mla is None:
        values.append(("model.config.num_query_groups", model.kv_heads))
    if model.moe is not None:
        values += [
            ("model.config.num_moe_experts", model.moe.num_experts),
            ("model.config.moe_router_topk", model.moe.top_k),
            ("model.config.moe_ffn_hidden_size", model.moe.expert_ffn_hidden_size),
        ]
    values.append(
        ("model.config.recompute_granularity", None if plan.recompute == "none" else plan.recompute)
    )
    if plan.recompute == "full":
        values += [
            ("model.config.recompute_method", "uniform"),
            ("model.config.recompute_num_layers", 1),
        ]
    values.append(("optim.config.use_distributed_optimizer", plan.zero_stage == 1))
    if plan.offload_optimizer:
        values += [
            ("optim.config.optimizer_cpu_offload", True),
            ("optim.config.use_precision_aware_optimizer", True),
        ]
    return values


_NEMO_PRECISION = {
    "bf16": "bf16_mixed",
    "fp16": "fp16_mixed",
    "fp8": "bf16_with_fp8_mixed",
}


def nemo_file(layout: LaunchLayout) -> ExportFile:
    recipe = nemo_recipe_name(layout)
    precision = _NEMO_PRECISION.get(layout.training.precision)
    lines = [
        comment_block(
            [
                "autopar export: NeMo 2 recipe overrides (nemo.collections.llm + nemo_run)",
                *plan_summary(layout),
                "",
                f"Start from the NeMo recipe of your model (llm.{recipe}: a guess from its name);",
                "the overrides below set the plan and the model shape either way.",
            ]
        ),
        "import nemo_run as run",
        "from nemo.collections import llm",
    ]
    if precision is not None:
        lines.append(
            f"from nemo.collections.llm.recipes.precision.mixed_precision import {precision}"
        )
    if layout.plan.tp_comm_overlap and layout.tp > 1:
        lines.append(
            "from nemo.lightning.pytorch.callbacks.megatron_comm_overlap import "
            "MegatronCommOverlapCallback"
        )
    lines += [
        "",
        f"recipe = llm.{recipe}.pretrain_recipe(",
        f"    num_nodes={layout.num_nodes}, num_gpus_per_node="
        f"{layout.uniform_procs or max(b.procs_per_node for b in layout.blocks)}",
        ")",
    ]
    lines += [f"recipe.{path} = {value!r}" for path, value in nemo_overrides(layout)]
    if precision is not None:
        lines.append(f"recipe.trainer.plugins = {precision}()")
    if layout.plan.tp_comm_overlap and layout.tp > 1:
        lines.append(
            "recipe.trainer.callbacks.append(run.Config(MegatronCommOverlapCallback, "
            "tp_comm_overlap=True))"
        )
    procs = layout.uniform_procs or max(b.procs_per_node for b in layout.blocks)
    lines += [
        "",
        'if __name__ == "__main__":',
        f"    run.run(recipe, executor=run.LocalExecutor(ntasks_per_node={procs}, "
        'launcher="torchrun"))',
    ]
    return ExportFile(name=NEMO_FILE, media_type="text/x-python", content="\n".join(lines) + "\n")


def launch_command(layout: LaunchLayout) -> str:
    del layout
    return f"NODE_RANK=<this node's rank> MASTER_ADDR=<node 0> bash {LAUNCH_FILE} <data flags>"
