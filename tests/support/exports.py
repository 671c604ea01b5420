"""Launch exports read back as their tools read them: the shared parsers and scenarios of
the export tests (tests/app/exports, tests/app/cli, tests/app/service)."""

import argparse
import importlib.util
import re
import shlex
from dataclasses import dataclass
from typing import Any

import pytest

import costmodel
from app.exports import ExportResult, build_export
from costmodel.catalog import load_preset
from costmodel.specs import ClusterSpec, Estimate, ModelSpec, Plan, TrainingSpec

# Megatron-Core warns about settings it would tune on a GPU (recompute modules, router dtype).
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# Scenarios -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Scenario:
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    plan: Plan

    @property
    def estimate(self) -> Estimate:
        return costmodel.estimate(self.model, self.training, self.cluster, self.plan)

    def export(self, format: str, **options: Any) -> ExportResult:
        return build_export(
            self.model, self.training, self.cluster, self.plan, format=format, **options
        )


def scenario(model: str, training: str | dict[str, Any], cluster: str, **plan: Any) -> Scenario:
    spec = load_preset("training", training) if isinstance(training, str) else training
    return Scenario(
        model=load_preset("model", model),
        training=TrainingSpec.model_validate(spec),
        cluster=load_preset("cluster", cluster),
        plan=load_preset("plan", plan.pop("preset")) if "preset" in plan else Plan(**plan),
    )


BASE = {"micro_batch_size": 1, "zero_stage": 1}
SCENARIOS = {
    # Megatron-style 3D on 128 H100.
    "dense-3d": lambda: scenario(
        "llama3-70b", "llama3-8k", "dgx-h100-16n", dp=4, tp=8, pp=4, recompute="selective", **BASE
    ),
    # Llama 3.1 405B: 126 layers on 16 stages, the balanced 7 / 8 x 14 / 7 split.
    "uneven-405b": lambda: scenario(
        "llama3.1-405b", "llama3-8k", "dgx-h100-128n", dp=8, tp=8, pp=16, recompute="full", **BASE
    ),
    # Interleaved 1F1B, even split (96 layers, pp 8 x vpp 2).
    "interleaved": lambda: scenario(
        "gpt3-175b",
        "gpt3-2k",
        "dgx-h100-128n",
        dp=16,
        tp=8,
        pp=8,
        vpp=2,
        recompute="selective",
        **BASE,
    ),
    # Interleaved with the embedding and loss each in a layer's place (account-for flags).
    "interleaved-slots": lambda: scenario(
        "llama3.1-405b",
        "llama3-8k",
        "dgx-h100-128n",
        dp=8,
        tp=8,
        pp=16,
        vpp=2,
        recompute="full",
        **BASE,
    ),
    # Interleaved chunks only a pipeline layout string gives (80 layers, pp 4 x vpp 3).
    "interleaved-layout": lambda: scenario(
        "llama3-70b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=4,
        tp=8,
        pp=4,
        vpp=3,
        recompute="full",
        **BASE,
    ),
    # MoE with parallel folding: experts over 8 ranks with expert TP 1, attention TP 2.
    "moe-folding": lambda: scenario(
        "mixtral-8x7b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=16,
        tp=2,
        pp=4,
        ep=8,
        etp=1,
        recompute="selective",
        **BASE,
    ),
    # DeepSeek-V3: MLA, 3 dense layers first, shared expert, folding with etp 1.
    "mla-moe": lambda: scenario(
        "deepseek-v3",
        "deepseek-v3-4k",
        "dgx-h100-128n",
        dp=16,
        tp=4,
        pp=16,
        ep=64,
        etp=1,
        recompute="full",
        **BASE,
    ),
    # Context parallel, TP comm overlap, optimizer offload.
    "cp-overlap-offload": lambda: scenario(
        "llama3-70b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=2,
        tp=8,
        pp=4,
        cp=2,
        recompute="selective",
        tp_comm_overlap=True,
        offload_optimizer=True,
        **BASE,
    ),
    # FSDP (ZeRO-3) only: torchtitan's and DeepSpeed's, not Megatron's.
    "fsdp": lambda: scenario(
        "llama3-8b",
        "llama3-8k",
        "dgx-a100-8n",
        dp=64,
        tp=1,
        pp=1,
        micro_batch_size=1,
        zero_stage=3,
        recompute="full",
    ),
    # HSDP: shard over 16 ranks, replicate twice, TP 4.
    "hsdp": lambda: scenario(
        "llama3-70b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=32,
        tp=4,
        pp=1,
        micro_batch_size=1,
        zero_stage=3,
        dp_shard=16,
        recompute="full",
    ),
    # FSDP + TP + interleaved PP for torchtitan.
    "fsdp-pp": lambda: scenario(
        "llama3-70b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=4,
        tp=8,
        pp=4,
        vpp=2,
        micro_batch_size=1,
        zero_stage=3,
        recompute="selective",
    ),
    # MoE under FSDP (torchtitan): ep 8 borrowed from the sharded data ranks.
    "moe-fsdp": lambda: scenario(
        "mixtral-8x7b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=64,
        tp=2,
        pp=1,
        ep=8,
        etp=1,
        micro_batch_size=1,
        zero_stage=3,
        recompute="full",
    ),
    # FP8 with FSDP and TP.
    "fp8": lambda: scenario(
        "llama3-8b",
        {"seq_length": 8192, "global_batch_size": 512, "precision": "fp8"},
        "dgx-h100-16n",
        dp=64,
        tp=2,
        pp=1,
        micro_batch_size=1,
        zero_stage=3,
    ),
    # DeepSpeed-MoE: experts over data ranks, 4 pipeline stages, ZeRO-1.
    "moe-deepspeed": lambda: scenario(
        "mixtral-8x7b",
        "llama3-8k",
        "dgx-h100-16n",
        dp=16,
        tp=2,
        pp=4,
        ep=8,
        recompute="full",
        **BASE,
    ),
    # Two zones, three node groups: H100 stage, two A100-80GB stages, an A100-40GB stage.
    "heterogeneous": lambda: scenario(
        "llama3-70b", "llama3-8k", "mixed-h100-a100-2zone", preset="mixed-2zone-pp4"
    ),
}


def get(name: str) -> Scenario:
    return SCENARIOS[name]()


# Reading the files back ------------------------------------------------------------------------
def file(result: ExportResult, name: str) -> str:
    (match,) = [f.content for f in result.files if f.name == name]
    return match


def bash_arrays(script: str) -> dict[str, list[str]]:
    """``NAME=( ... )`` blocks, split as bash splits them."""
    return {
        name: shlex.split(body)
        for name, body in re.findall(r"^(\w+)=\(\n(.*?)\n\)$", script, re.M | re.S)
    }


def bash_values(script: str) -> dict[str, str]:
    """Plain ``NAME=value`` assignments (the first of each name)."""
    values: dict[str, str] = {}
    for name, value in re.findall(r"^([A-Z_]+)=([^\s(]\S*)", script, re.M):
        values.setdefault(name, value)
    return values


def heredocs(script: str) -> dict[str, str]:
    """``cat > "$RUN_DIR/NAME" <<'AUTOPAR_EOF'`` documents, by file name."""
    found = re.findall(
        r"""cat > "\$RUN_DIR/([^"]+)" <<'AUTOPAR_EOF'\n(.*?)\nAUTOPAR_EOF""", script, re.S
    )
    return {name: body + "\n" for name, body in found}


def nproc_for(script: str, node_rank: int) -> int:
    """NPROC_PER_NODE as the script sets it on ``node_rank``: a plain assignment, or the
    if/elif/else on NODE_RANK of a heterogeneous plan."""
    plain = re.search(r"^NPROC_PER_NODE=(\d+)$", script, re.M)
    if plain:
        return int(plain.group(1))
    for bound, procs in re.findall(
        r"\(\( NODE_RANK < (\d+) \)\); then NPROC_PER_NODE=(\d+)", script
    ):
        if node_rank < int(bound):
            return int(procs)
    (last,) = re.findall(r"^else NPROC_PER_NODE=(\d+)", script, re.M)
    return int(last)


def launch_words(script: str, *, node_rank: int = 0) -> list[str]:
    """The script's ``exec`` command as argv, with its variables and arrays expanded."""
    match = re.search(r"^exec (.*?)(?<!\\)$", script, re.M | re.S)
    assert match, script
    words = shlex.split(match.group(1).replace("\\\n", " "))
    env = {
        **bash_values(script),
        "NODE_RANK": str(node_rank),
        "NPROC_PER_NODE": str(nproc_for(script, node_rank)),
        "MASTER_ADDR": "node0",
        "MASTER_PORT": "29500",
        "RUN_DIR": "/run",
        "MEGATRON_LM": "/opt/megatron-lm",
        "MEGATRON_DEEPSPEED": "/opt/Megatron-DeepSpeed",
        "HOSTFILE": "hostfile",
    }
    arrays = bash_arrays(script)

    def expand(word: str) -> str:
        return re.sub(r"\$(\w+)", lambda m: env[m.group(1)], word)

    argv: list[str] = []
    for word in words:
        array = re.fullmatch(r"\$\{(\w+)\[@\]\}", word)
        if array:
            argv += [expand(item) for item in arrays[array.group(1)]]
        elif word == "$@":
            continue
        else:
            argv.append(expand(word))
    return argv


def torchrun_args(argv: list[str]) -> argparse.Namespace:
    """torchrun's own parser (torch.distributed.run)."""
    assert argv[0] == "torchrun", argv
    run = importlib.import_module("torch.distributed.run")
    return run.get_args_parser().parse_args(argv[1:])


# Megatron-LM -----------------------------------------------------------------------------------
# Every flag the Megatron export may write, as megatron/training/arguments.py (NVIDIA/Megatron-LM
# core_v0.14.0) declares it; an unknown flag fails parse_args.
_MEGATRON_INT = [
    "tensor-model-parallel-size",
    "pipeline-model-parallel-size",
    "num-layers-per-virtual-pipeline-stage",
    "num-virtual-stages-per-pipeline-rank",
    "decoder-first-pipeline-num-layers",
    "decoder-last-pipeline-num-layers",
    "context-parallel-size",
    "expert-model-parallel-size",
    "expert-tensor-parallel-size",
    "micro-batch-size",
    "global-batch-size",
    "recompute-num-layers",
    "num-layers",
    "hidden-size",
    "ffn-hidden-size",
    "num-attention-heads",
    "num-query-groups",
    "kv-channels",
    "seq-length",
    "max-position-embeddings",
    "num-experts",
    "moe-router-topk",
    "moe-ffn-hidden-size",
    "moe-shared-expert-intermediate-size",
    "q-lora-rank",
    "kv-lora-rank",
    "qk-head-dim",
    "qk-pos-emb-head-dim",
    "v-head-dim",
]
_MEGATRON_FLAGS = [
    "account-for-embedding-in-pipeline-split",
    "account-for-loss-in-pipeline-split",
    "sequence-parallel",
    "use-distributed-optimizer",
    "overlap-grad-reduce",
    "overlap-param-gather",
    "tp-comm-overlap",
    "optimizer-cpu-offload",
    "use-precision-aware-optimizer",
    "bf16",
    "fp16",
    "group-query-attention",
    "swiglu",
    "squared-relu",
    "untie-embeddings-and-output-weights",
    "multi-latent-attention",
    "cross-entropy-loss-fusion",
]


def megatron_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    for name in _MEGATRON_INT:
        parser.add_argument(f"--{name}", type=int)
    for name in _MEGATRON_FLAGS:
        parser.add_argument(f"--{name}", action="store_true")
    parser.add_argument("--pipeline-model-parallel-layout", type=str)
    parser.add_argument("--recompute-granularity", choices=["full", "selective"])
    parser.add_argument("--recompute-method", choices=["uniform", "block"])
    parser.add_argument("--fp8-format", choices=["e4m3", "hybrid"], dest="fp8")
    parser.add_argument("--optimizer", choices=["adam", "sgd"])
    parser.add_argument("--moe-layer-freq", type=str)
    parser.add_argument("--moe-token-dispatcher-type", choices=["allgather", "alltoall", "flex"])
    parser.add_argument("--attention-backend", choices=["flash", "fused", "unfused", "auto"])
    parser.add_argument("--attention-dropout", type=float)
    parser.add_argument("--hidden-dropout", type=float)
    parser.add_argument(
        "--position-embedding-type",
        choices=["learned_absolute", "rope", "mrope", "relative", "none"],
        default="learned_absolute",
    )
    parser.add_argument("--normalization", choices=["LayerNorm", "RMSNorm"], default="LayerNorm")
    parser.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    return parser


def layout_stages(layout: str, pp: int) -> list[list[str]]:
    """Megatron-Core's layout grammar (PipelineParallelLayerLayout.parse_str_to_list): the
    virtual stages in order, each as its layer characters."""
    text = layout.replace(",", "")
    text = re.sub(r"\(([^)]+)\)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    text = re.sub(r"(.)\*(\d+)", lambda m: m.group(1) * int(m.group(2)), text)
    stages = [list(stage) for stage in text.split("|")]
    assert len(stages) % pp == 0, layout
    return stages


def megatron_vpp(ns: argparse.Namespace) -> int:
    """virtual_pipeline_model_parallel_size as validate_args derives it."""
    pp = ns.pipeline_model_parallel_size
    if ns.pipeline_model_parallel_layout:
        return len(layout_stages(ns.pipeline_model_parallel_layout, pp)) // pp
    if ns.num_virtual_stages_per_pipeline_rank:
        return ns.num_virtual_stages_per_pipeline_rank
    if ns.num_layers_per_virtual_pipeline_stage:
        assert ns.decoder_first_pipeline_num_layers is None, "Megatron: use --num-virtual-stages"
        layers = ns.num_layers + ns.account_for_embedding_in_pipeline_split
        layers += ns.account_for_loss_in_pipeline_split
        assert layers % pp == 0
        assert (layers // pp) % ns.num_layers_per_virtual_pipeline_stage == 0
        return layers // pp // ns.num_layers_per_virtual_pipeline_stage
    return 1


def megatron_stage_layers(ns: argparse.Namespace) -> list[int]:
    """Decoder layers of each pipeline rank (get_num_layers_to_build summed over chunks)."""
    pp, vpp = ns.pipeline_model_parallel_size, megatron_vpp(ns)
    if ns.pipeline_model_parallel_layout:
        stages = layout_stages(ns.pipeline_model_parallel_layout, pp)
        flat = "".join("".join(stage) for stage in stages)
        assert flat.startswith("E") and flat.endswith("L") and flat.count("E") == 1
        return [sum(stages[v * pp + s].count("t") for v in range(vpp)) for s in range(pp)]
    first, last = ns.decoder_first_pipeline_num_layers, ns.decoder_last_pipeline_num_layers
    if first is not None or last is not None:
        assert not (
            ns.account_for_embedding_in_pipeline_split or ns.account_for_loss_in_pipeline_split
        ), "Megatron-Core refuses account-for flags with uneven first/last stages"
        rest = ns.num_layers - (first or 0) - (last or 0)
        middle_stages = pp - (first is not None) - (last is not None)
        assert middle_stages == 0 or rest % middle_stages == 0
        middle = rest // middle_stages if middle_stages else 0
        layers = [middle] * pp
        layers[0] = first if first is not None else middle
        layers[-1] = last if last is not None else middle
        assert all(count % vpp == 0 for count in layers), (layers, vpp)
        return layers
    embedding = int(ns.account_for_embedding_in_pipeline_split)
    loss = int(ns.account_for_loss_in_pipeline_split)
    total = ns.num_layers + embedding + loss
    assert total % pp == 0, "num_layers should be divisible by pipeline_model_parallel_size"
    share = total // pp
    assert share % vpp == 0
    layers = [share] * pp
    layers[0] -= embedding
    layers[-1] -= loss
    return layers


def parse_megatron(script: str, *, node_rank: int = 0) -> tuple[argparse.Namespace, Any]:
    """(Megatron's args, torchrun's args) of a Megatron launch script, checked as
    validate_args checks them."""
    argv = launch_words(script, node_rank=node_rank)
    launch = torchrun_args(argv)
    assert launch.training_script.endswith("pretrain_gpt.py")
    ns = megatron_parser().parse_args(launch.training_script_args)
    if ns.overlap_param_gather:
        assert ns.use_distributed_optimizer and ns.overlap_grad_reduce
    if ns.tp_comm_overlap:
        assert ns.sequence_parallel
    if ns.optimizer_cpu_offload:
        assert ns.use_precision_aware_optimizer
    if ns.context_parallel_size > 1:
        assert ns.seq_length % (2 * ns.context_parallel_size) == 0
    return ns, launch


def megatron_core_config(ns: argparse.Namespace) -> Any:
    """Megatron-Core's own TransformerConfig from the args, as
    core_transformer_config_from_args builds it: its __post_init__ checks the pipeline split,
    the recompute settings, GQA, MoE and MLA shapes."""
    importlib.import_module("megatron.core")
    import torch
    from megatron.core.transformer.transformer_config import (
        MLATransformerConfig,
        TransformerConfig,
    )
    from torch.nn import functional

    dtype = torch.bfloat16 if ns.bf16 else (torch.float16 if ns.fp16 else torch.float32)
    vpp = megatron_vpp(ns)
    kwargs: dict[str, Any] = {
        "num_layers": ns.num_layers,
        "hidden_size": ns.hidden_size,
        "ffn_hidden_size": ns.ffn_hidden_size,
        "num_attention_heads": ns.num_attention_heads,
        "num_query_groups": ns.num_query_groups if ns.group_query_attention else None,
        "kv_channels": ns.kv_channels,
        "tensor_model_parallel_size": ns.tensor_model_parallel_size,
        "pipeline_model_parallel_size": ns.pipeline_model_parallel_size,
        "virtual_pipeline_model_parallel_size": vpp if vpp > 1 else None,
        "context_parallel_size": ns.context_parallel_size,
        "expert_model_parallel_size": ns.expert_model_parallel_size or 1,
        "expert_tensor_parallel_size": ns.expert_tensor_parallel_size,
        "sequence_parallel": ns.sequence_parallel,
        "num_layers_in_first_pipeline_stage": ns.decoder_first_pipeline_num_layers,
        "num_layers_in_last_pipeline_stage": ns.decoder_last_pipeline_num_layers,
        "account_for_embedding_in_pipeline_split": ns.account_for_embedding_in_pipeline_split,
        "account_for_loss_in_pipeline_split": ns.account_for_loss_in_pipeline_split,
        "pipeline_model_parallel_layout": ns.pipeline_model_parallel_layout,
        "recompute_granularity": ns.recompute_granularity,
        "recompute_method": ns.recompute_method,
        "recompute_num_layers": ns.recompute_num_layers,
        "bf16": ns.bf16,
        "fp16": ns.fp16,
        "params_dtype": dtype,
        "pipeline_dtype": dtype,
        # Megatron-Core checks FP8 against the installed Transformer Engine (a GPU build).
        "fp8": ns.fp8 if importlib.util.find_spec("transformer_engine") else None,
        "attention_dropout": ns.attention_dropout,
        "hidden_dropout": ns.hidden_dropout,
        "tp_comm_overlap": ns.tp_comm_overlap,
        "normalization": ns.normalization,
        "add_bias_linear": ns.add_bias_linear,
    }
    if ns.swiglu:
        kwargs |= {"gated_linear_unit": True, "activation_func": functional.silu}
    if ns.num_experts:
        pattern = ns.moe_layer_freq
        kwargs |= {
            "num_moe_experts": ns.num_experts,
            "moe_router_topk": ns.moe_router_topk,
            "moe_ffn_hidden_size": ns.moe_ffn_hidden_size,
            "moe_shared_expert_intermediate_size": ns.moe_shared_expert_intermediate_size,
            "moe_token_dispatcher_type": ns.moe_token_dispatcher_type,
        }
        if pattern is not None:  # megatron's moe_freq_type: an int, or a list expression
            kwargs["moe_layer_freq"] = (
                eval(pattern, {"__builtins__": {}}) if "[" in pattern else int(pattern)
            )
    config_class = TransformerConfig
    if ns.multi_latent_attention:
        config_class = MLATransformerConfig
        kwargs |= {
            "q_lora_rank": ns.q_lora_rank,
            "kv_lora_rank": ns.kv_lora_rank,
            "qk_head_dim": ns.qk_head_dim,
            "qk_pos_emb_head_dim": ns.qk_pos_emb_head_dim,
            "v_head_dim": ns.v_head_dim,
        }
    return config_class(**{k: v for k, v in kwargs.items() if v is not None})


def assert_megatron_matches(ns: argparse.Namespace, launch: Any, case: Scenario) -> None:
    plan, estimate, model = case.plan, case.estimate, case.model
    tp, pp = ns.tensor_model_parallel_size, ns.pipeline_model_parallel_size
    cp = ns.context_parallel_size
    world = int(launch.nnodes) * int(launch.nproc_per_node)
    assert (tp, pp, cp) == (estimate.per_stage[0].tp, plan.pp, plan.cp)
    assert world == estimate.num_gpus == plan.dp * tp * pp * cp
    assert world % (tp * pp * cp) == 0
    dp = world // (tp * pp * cp)  # Megatron's data_parallel_size
    assert dp == plan.dp
    gbs, micro = ns.global_batch_size, ns.micro_batch_size
    assert gbs == case.training.global_batch_size and micro == plan.micro_batch_size
    assert gbs % (micro * dp) == 0  # Megatron's num_microbatches
    assert megatron_vpp(ns) == plan.vpp
    assert megatron_stage_layers(ns) == [stage.num_layers for stage in estimate.per_stage]
    assert ns.num_layers == model.num_layers and ns.hidden_size == model.hidden_size
    assert ns.sequence_parallel == (plan.sp and tp > 1)
    assert ns.use_distributed_optimizer == (plan.zero_stage == 1)
    assert (ns.recompute_granularity or "none") == plan.recompute
    if model.moe is not None:
        assert ns.num_experts == model.moe.num_experts and ns.moe_router_topk == model.moe.top_k
        assert ns.expert_model_parallel_size == plan.ep
        assert ns.expert_tensor_parallel_size == (plan.etp or plan.tp)


def megatron_section(name: str, section: str) -> list[str]:
    return bash_arrays(file(get(name).export("megatron"), "launch_megatron.sh"))[section]


def deepspeed_parser() -> argparse.ArgumentParser:
    """Megatron-DeepSpeed's flags the export writes (microsoft/Megatron-DeepSpeed
    megatron/arguments.py, and deepspeed.add_config_arguments)."""
    parser = argparse.ArgumentParser(allow_abbrev=False, exit_on_error=False)
    for name in [
        "tensor-model-parallel-size",
        "pipeline-model-parallel-size",
        "moe-expert-parallel-size",
        "num-layers",
        "hidden-size",
        "ffn-hidden-size",
        "num-attention-heads",
        "num-key-value-heads",
        "seq-length",
        "max-position-embeddings",
        "topk",
        "expert-interval",
        "micro-batch-size",
        "global-batch-size",
        "zero-stage",
    ]:
        parser.add_argument(f"--{name}", type=int)
    for name in [
        "no-pipeline-parallel",
        "sequence-parallel",
        "swiglu",
        "untie-embeddings-and-output-weights",
        "use-flash-attn-v2",
        "bf16",
        "fp16",
        "fp8-hybrid",
        "checkpoint-activations",
        "deepspeed-activation-checkpointing",
        "cpu-optimizer",
        "deepspeed",
        "use-rotary-position-embeddings",
    ]:
        parser.add_argument(f"--{name}", action="store_true")
    parser.add_argument(
        "--no-position-embedding", action="store_false", dest="add_position_embedding"
    )
    parser.add_argument("--normalization", choices=["layernorm", "rmsnorm"], default="layernorm")
    parser.add_argument("--disable-bias-linear", action="store_false", dest="add_bias_linear")
    parser.add_argument("--num-experts", type=int, nargs="+")
    parser.add_argument("--attention-dropout", type=float)
    parser.add_argument("--hidden-dropout", type=float)
    parser.add_argument("--deepspeed_config", type=str)
    return parser


def deepspeed_config(config: dict[str, Any], dp: int, monkeypatch: pytest.MonkeyPatch) -> Any:
    """DeepSpeed's own DeepSpeedConfig over ``dp`` data-parallel ranks: it asserts
    train_batch_size = micro x grad-accum x dp and validates the ZeRO section (pydantic)."""
    importlib.import_module("deepspeed")
    import deepspeed.runtime.config as ds_config

    class DataParallel:  # the mpu DeepSpeed asks for the data-parallel size
        def get_data_parallel_world_size(self) -> int:
            return dp

    monkeypatch.setattr(ds_config.dist, "get_rank", lambda: 0)
    return ds_config.DeepSpeedConfig(dict(config), mpu=DataParallel())


def deepspeed_launcher(argv: list[str]) -> Any:
    runner = importlib.import_module("deepspeed.launcher.runner")
    return runner.parse_args(argv[1:])


def torchtitan_dp(parallelism: dict[str, Any]) -> int:
    return parallelism["data_parallel_replicate_degree"] * parallelism["data_parallel_shard_degree"]
