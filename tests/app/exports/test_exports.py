"""Launch exports parsed back: every file is read as its tool reads it (json, tomllib, shlex and
an argparse mirror of the flags; the frameworks' own parsers where they are installed:
torchrun's, DeepSpeed's ``DeepSpeedConfig`` and launcher, Megatron-Core's
``TransformerConfig``, torchtitan's ``ConfigManager`` and ``ParallelDims``), and what it says
must agree with the plan: the degrees, the batch identity (global = micro x grad-accum x dp),
the GPU counts and the pipeline split the estimate priced.

The shared parsers and scenarios are ``tests.support.exports``.
"""

import ast
import importlib.util
import json
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from app.exports import ExportError
from costmodel.catalog import load_preset
from costmodel.specs import Plan

# Megatron-Core warns about settings it would tune on a GPU (recompute modules, router dtype).
from tests.support.exports import (
    SCENARIOS,
    Scenario,
    assert_megatron_matches,
    deepspeed_config,
    deepspeed_launcher,
    deepspeed_parser,
    file,
    get,
    launch_words,
    megatron_core_config,
    megatron_section,
    megatron_stage_layers,
    parse_megatron,
    torchrun_args,
    torchtitan_dp,
)

MEGATRON_CASES = [
    "dense-3d",
    "uneven-405b",
    "interleaved",
    "interleaved-slots",
    "interleaved-layout",
    "moe-folding",
    "mla-moe",
    "cp-overlap-offload",
    "heterogeneous",
]


@pytest.mark.parametrize("name", MEGATRON_CASES)
def test_megatron_flags_parse_back_to_the_plan(name: str) -> None:
    case = get(name)
    result = case.export("megatron")
    assert result.framework == "megatron"
    ns, launch = parse_megatron(file(result, "launch_megatron.sh"))
    assert_megatron_matches(ns, launch, case)
    assert result.num_gpus == case.estimate.num_gpus
    assert result.global_batch_size == (
        result.micro_batch_size * result.gradient_accumulation_steps * case.plan.dp
    )


@pytest.mark.parametrize("name", MEGATRON_CASES)
def test_megatron_core_accepts_the_flags(name: str) -> None:
    """Megatron-Core's TransformerConfig (pip megatron-core) validates what the flags build."""
    ns, _ = parse_megatron(file(get(name).export("megatron"), "launch_megatron.sh"))
    config = megatron_core_config(ns)
    assert config.pipeline_model_parallel_size == ns.pipeline_model_parallel_size
    if ns.pipeline_model_parallel_layout:
        layout = config.pipeline_model_parallel_layout  # parsed by Megatron-Core itself
        pp = ns.pipeline_model_parallel_size
        counts = [
            sum(str(layer).endswith("decoder") for chunk in layout.layout[s] for layer in chunk)
            for s in range(pp)
        ]
        assert counts == megatron_stage_layers(ns)


def test_the_pipeline_flags_follow_megatrons_rules() -> None:
    """Uneven ends: first/last counts; embedding/loss slots: the account-for flags; chunks
    neither gives: the layout string; a heterogeneous plan's stages: first/last when the middle
    stages agree."""
    flags = {name: megatron_section(name, "PARALLEL_ARGS") for name in MEGATRON_CASES}
    assert "--decoder-first-pipeline-num-layers" in flags["uneven-405b"]
    assert "--num-layers-per-virtual-pipeline-stage" in flags["interleaved"]
    slots = flags["interleaved-slots"]
    assert "--account-for-embedding-in-pipeline-split" in slots
    assert "--account-for-loss-in-pipeline-split" in slots
    assert "--decoder-first-pipeline-num-layers" not in slots
    assert "--pipeline-model-parallel-layout" in flags["interleaved-layout"]
    heterogeneous = flags["heterogeneous"]
    first = heterogeneous.index("--decoder-first-pipeline-num-layers")
    assert heterogeneous[first + 1 : first + 4] == [
        "32",
        "--decoder-last-pipeline-num-layers",
        "12",
    ]


def test_the_moe_layer_pattern_is_the_cost_models() -> None:
    ns, _ = parse_megatron(file(get("mla-moe").export("megatron"), "launch_megatron.sh"))
    pattern = eval(ns.moe_layer_freq, {"__builtins__": {}})
    assert pattern == [0, 0, 0] + [1] * 58
    assert ns.multi_latent_attention and ns.q_lora_rank == 1536 and ns.qk_pos_emb_head_dim == 64
    assert ns.moe_shared_expert_intermediate_size == 2048


def test_nemo_overrides_set_the_plan() -> None:
    for name in ("uneven-405b", "moe-folding", "interleaved", "heterogeneous"):
        case = get(name)
        result = case.export("nemo")
        (only,) = result.files
        tree = ast.parse(only.content)
        values = {
            ast.unparse(node.targets[0]): ast.literal_eval(node.value)
            for node in tree.body
            if isinstance(node, ast.Assign)
            and ast.unparse(node.targets[0]).startswith("recipe.")
            and isinstance(node.value, ast.Constant)
        }
        strategy = "recipe.trainer.strategy."
        assert values[strategy + "tensor_model_parallel_size"] == case.plan.tp
        assert values[strategy + "pipeline_model_parallel_size"] == case.plan.pp
        assert values.get(strategy + "virtual_pipeline_model_parallel_size", 1) == case.plan.vpp
        nodes, devices = values["recipe.trainer.num_nodes"], values["recipe.trainer.devices"]
        assert nodes * devices == case.estimate.num_gpus
        assert values["recipe.data.global_batch_size"] == case.training.global_batch_size
        assert values["recipe.data.micro_batch_size"] == case.plan.micro_batch_size
        first = values.get(strategy + "num_layers_in_first_pipeline_stage")
        assert first in (None, case.estimate.per_stage[0].num_layers)


# DeepSpeed -------------------------------------------------------------------------------------
DEEPSPEED_CASES = ["uneven-405b", "fsdp", "moe-deepspeed", "fp8"]


@pytest.mark.parametrize("name", DEEPSPEED_CASES)
def test_deepspeed_config_and_launch_parse_back(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    case = get(name)
    result = case.export("deepspeed")
    plan = case.plan
    config = json.loads(file(result, "ds_config.json"))
    micro, accumulation = (
        config["train_micro_batch_size_per_gpu"],
        config["gradient_accumulation_steps"],
    )
    assert config["train_batch_size"] == micro * accumulation * plan.dp
    assert config["train_batch_size"] == case.training.global_batch_size
    assert micro == plan.micro_batch_size
    assert config["zero_optimization"]["stage"] == plan.zero_stage
    assert ("offload_optimizer" in config["zero_optimization"]) == plan.offload_optimizer
    assert config["bf16"]["enabled"] == (case.training.precision in ("bf16", "fp8"))
    assert ("activation_checkpointing" in config) == (plan.recompute == "full")

    script = file(result, "launch_deepspeed.sh")
    argv = launch_words(script)
    assert argv[0] == "deepspeed"
    launch = deepspeed_launcher(argv)
    assert launch.num_nodes * launch.num_gpus == case.estimate.num_gpus
    ns = deepspeed_parser().parse_args(launch.user_args)
    assert launch.user_script.endswith("pretrain_gpt.py")
    assert ns.tensor_model_parallel_size == plan.tp
    assert ns.pipeline_model_parallel_size == plan.pp and ns.no_pipeline_parallel == (plan.pp == 1)
    assert (
        ns.zero_stage == plan.zero_stage
        and ns.deepspeed
        and ns.deepspeed_config == "ds_config.json"
    )
    assert ns.global_batch_size == config["train_batch_size"]
    dp = launch.num_nodes * launch.num_gpus // (ns.tensor_model_parallel_size * plan.pp)
    assert dp == plan.dp
    if case.model.moe is not None:
        assert ns.num_experts == [case.model.moe.num_experts]
        assert ns.moe_expert_parallel_size == plan.ep and dp % plan.ep == 0

    parsed = deepspeed_config(config, dp, monkeypatch)
    assert parsed.train_batch_size == case.training.global_batch_size
    assert parsed.gradient_accumulation_steps == accumulation
    assert parsed.zero_optimization_stage == plan.zero_stage


def test_deepspeed_refuses_a_wrong_batch_identity(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real parser can fail: the same config over the wrong data-parallel size."""
    result = get("fsdp").export("deepspeed")
    config = json.loads(file(result, "ds_config.json"))
    with pytest.raises(AssertionError, match="train_batch_size is not equal"):
        deepspeed_config(config, 32, monkeypatch)


def test_deepspeed_warns_that_it_balances_an_uneven_split_itself() -> None:
    result = get("uneven-405b").export("deepspeed")
    assert any("balances the transformer layers" in warning for warning in result.warnings)
    assert not get("moe-deepspeed").export("deepspeed").warnings


# torchtitan ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def torchtitan_config() -> Any:
    """torchtitan's ConfigManager, imported without torchtitan/__init__.py (which loads every
    model and so triton, a GPU toolchain): the config package needs torch and tyro only."""
    spec = importlib.util.find_spec("torchtitan")
    # A dev extra (pyproject.toml): missing, the test fails rather than hiding behind a skip.
    assert spec is not None and spec.submodule_search_locations is not None, (
        "torchtitan is not installed: pip install -e '.[dev]'"
    )
    if "torchtitan" not in sys.modules:
        package = types.ModuleType("torchtitan")
        package.__path__ = list(spec.submodule_search_locations)
        sys.modules["torchtitan"] = package
    from torchtitan.config import ConfigManager
    from torchtitan.distributed.parallel_dims import ParallelDims

    return ConfigManager, ParallelDims


TORCHTITAN_CASES = ["fsdp", "hsdp", "fsdp-pp", "moe-fsdp", "fp8"]


@pytest.mark.parametrize("name", TORCHTITAN_CASES)
def test_torchtitan_toml_parses_back(name: str) -> None:
    case = get(name)
    result = case.export("torchtitan")
    plan, estimate = case.plan, case.estimate
    config = tomllib.loads(file(result, "torchtitan.toml"))
    parallelism, training = config["parallelism"], config["training"]
    dp = torchtitan_dp(parallelism)
    assert dp == plan.dp
    assert parallelism["tensor_parallel_degree"] == plan.tp
    assert parallelism["pipeline_parallel_degree"] == plan.pp
    assert parallelism["context_parallel_degree"] == plan.cp
    if plan.dp_shard is not None:  # HSDP: the plan's dp_shard counts data x context ranks
        assert parallelism["data_parallel_shard_degree"] * plan.cp == plan.dp_shard
        assert parallelism["data_parallel_replicate_degree"] > 1
    else:
        assert parallelism["data_parallel_replicate_degree"] == 1  # FSDP over every data rank
    # torchtitan's train.py: grad-accum = global / (local x dp); pipelines split local further.
    local, global_batch = training["local_batch_size"], training["global_batch_size"]
    assert global_batch == case.training.global_batch_size and global_batch % (local * dp) == 0
    accumulation = global_batch // (local * dp)
    micro = parallelism.get("pipeline_parallel_microbatch_size", local)
    assert micro == plan.micro_batch_size
    assert global_batch == micro * (local // micro) * accumulation * dp
    assert training["seq_len"] == case.training.seq_length
    assert config["activation_checkpoint"]["mode"] == plan.recompute
    if plan.pp > 1:
        parts = parallelism["module_fqns_per_model_part"]
        assert len(parts) == plan.pp * plan.vpp
        assert parallelism["pipeline_parallel_schedule"] == (
            "Interleaved1F1B" if plan.vpp > 1 else "1F1B"
        )
        # chunk v of rank s is part v * pp + s (torchtitan's loop style)
        per_rank = [
            sum(
                name.startswith("layers.")
                for v in range(plan.vpp)
                for name in parts[v * plan.pp + s]
            )
            for s in range(plan.pp)
        ]
        assert per_rank == [stage.num_layers for stage in estimate.per_stage]
        names = [name for part in parts for name in part]
        assert names[0] == "tok_embeddings" and names[-2:] == ["norm", "output"]
        assert names[1:-2] == [f"layers.{i}" for i in range(case.model.num_layers)]
    if case.model.moe is not None:
        assert parallelism["expert_parallel_degree"] == plan.ep
    if case.training.precision == "fp8":
        assert config["model"]["converters"] == ["quantize.linear.float8"]
        assert "float8" in config["quantize"]["linear"]

    launch = torchrun_args(launch_words(file(result, "launch_torchtitan.sh")))
    assert int(launch.nnodes) * int(launch.nproc_per_node) == estimate.num_gpus
    assert launch.module and launch.training_script == "torchtitan.train"
    assert launch.training_script_args == ["--job.config_file", "torchtitan.toml"]


@pytest.mark.parametrize("name", TORCHTITAN_CASES)
def test_torchtitan_accepts_the_toml(name: str, torchtitan_config: Any, tmp_path: Path) -> None:
    """torchtitan's ConfigManager reads the TOML (unknown fields and wrong types fail), and
    its ParallelDims accepts the degrees over the launch's world size."""
    config_manager, parallel_dims = torchtitan_config
    case = get(name)
    result = case.export("torchtitan")
    path = tmp_path / "torchtitan.toml"
    path.write_text(file(result, "torchtitan.toml"))
    job = config_manager().parse_args(["--job.config_file", str(path)])
    p = job.parallelism
    dims = parallel_dims(
        dp_replicate=p.data_parallel_replicate_degree,
        dp_shard=p.data_parallel_shard_degree,
        cp=p.context_parallel_degree,
        tp=p.tensor_parallel_degree,
        pp=p.pipeline_parallel_degree,
        ep=p.expert_parallel_degree,
        etp=p.expert_tensor_parallel_degree,
        world_size=result.num_gpus,
    )
    assert dims.dp_replicate * dims.dp_shard == case.plan.dp
    assert job.training.global_batch_size == case.training.global_batch_size


def test_torchtitan_rejects_an_unknown_field(torchtitan_config: Any, tmp_path: Path) -> None:
    config_manager, _ = torchtitan_config
    path = tmp_path / "bad.toml"
    path.write_text("[parallelism]\ntensor_parallel_size = 8\n")
    with pytest.raises(ValueError, match="Invalid field names"):
        config_manager().parse_args(["--job.config_file", str(path)])


# The framework rule ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("name", "format", "field", "words"),
    [
        ("fsdp", "megatron", "format", "zero_stage: Megatron shards only the optimizer states"),
        ("dense-3d", "torchtitan", "format", "zero_stage: torchtitan shards with FSDP2"),
        ("interleaved", "deepspeed", "format", "vpp: DeepSpeed has no interleaved"),
        ("heterogeneous", "deepspeed", "format", "recompute: DeepSpeed checkpoints whole layers"),
        ("hsdp", "nemo", "format", "dp_shard: hybrid sharding"),
    ],
)
def test_a_framework_that_cannot_launch_the_plan_is_refused(
    name: str, format: str, field: str, words: str
) -> None:
    case = get(name)
    with pytest.raises(ExportError) as error:
        case.export(format)
    assert error.value.field == field
    assert words in error.value.reason
    framework = {"nemo": "megatron"}.get(format, format)
    assert framework not in case.estimate.launchable_by


def test_exports_are_for_a_framework_in_launchable_by() -> None:
    for name in SCENARIOS:
        case = get(name)
        for format in ("slurm", "kubernetes"):
            try:
                result = case.export(format)
            except ExportError as error:
                assert format == "kubernetes" and name == "heterogeneous", error
                continue
            assert result.framework == case.estimate.launchable_by[0]
            assert result.launchable_by == case.estimate.launchable_by


def test_a_format_names_its_framework() -> None:
    with pytest.raises(ExportError, match="format megatron is for megatron, not torchtitan"):
        get("dense-3d").export("megatron", framework="torchtitan")


def test_a_plan_that_cannot_run_is_not_exported() -> None:
    case = get("dense-3d")
    bad = Scenario(case.model, case.training, case.cluster, case.plan.model_copy(update={"dp": 8}))
    with pytest.raises(ExportError, match="GPUs") as error:
        bad.export("megatron")
    assert error.value.field == "plan"


def test_megatrons_own_limits_beyond_the_table() -> None:
    case = get("cp-overlap-offload")
    odd = Scenario(
        case.model,
        case.training.model_copy(update={"seq_length": 8190, "global_batch_size": 256}),
        case.cluster,
        case.plan.model_copy(update={"tp_comm_overlap": False, "offload_optimizer": False}),
    )
    with pytest.raises(ExportError, match="2 x cp") as error:
        odd.export("megatron")
    assert error.value.field == "plan.cp"


def test_deepspeed_cannot_place_explicit_stage_layers() -> None:
    case = get("heterogeneous")
    full = Scenario(
        case.model, case.training, case.cluster, case.plan.model_copy(update={"recompute": "full"})
    )
    assert "deepspeed" in full.estimate.launchable_by
    with pytest.raises(ExportError, match="not by explicit counts") as error:
        full.export("deepspeed")
    assert error.value.field == "plan.stages"


def test_a_plan_no_framework_can_launch_says_why_for_each() -> None:
    cluster = load_preset("cluster", "mixed-h100-a100-2zone")
    plan = Plan.model_validate(
        {
            "dp": 1,
            "tp": 4,
            "pp": 2,
            "micro_batch_size": 1,
            "zero_stage": 1,
            "stages": [
                {"group": "h100", "num_layers": 16, "tp": 4},
                {"group": "a100-80", "num_layers": 16, "tp": 2},
            ],
        }
    )
    case = Scenario(
        load_preset("model", "llama3-8b"), load_preset("training", "llama3-8k"), cluster, plan
    )
    assert case.estimate.launchable_by == []
    with pytest.raises(ExportError, match="no framework can launch this plan") as error:
        case.export("slurm")
    assert error.value.field == "framework"
    for framework in ("megatron", "deepspeed", "torchtitan"):
        assert f"{framework}: tp: one tensor-parallel size on every stage" in error.value.reason
