"""Spec validation: errors name the field, shape rules hold, specs survive JSON/YAML round trips."""

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import ValidationError

from costmodel.catalog import SPEC_KINDS, list_presets, load_preset, load_spec
from costmodel.errors import format_validation_error
from costmodel.specs import ClusterSpec, ModelSpec, MoESpec, Plan, StageSpec, TrainingSpec

LLAMA_LIKE: dict[str, Any] = {
    "num_layers": 32,
    "hidden_size": 4096,
    "num_attention_heads": 32,
    "num_kv_heads": 8,
    "ffn_hidden_size": 14336,
    "vocab_size": 128256,
    "activation": "swiglu",
}
PLAN: dict[str, Any] = {"dp": 4, "tp": 2, "pp": 2, "micro_batch_size": 1}


def error_line(spec_type: type, prefix: str, **fields: Any) -> str:
    with pytest.raises(ValidationError) as caught:
        spec_type.model_validate(fields)
    return format_validation_error(caught.value, prefix=prefix)


# Error messages -------------------------------------------------------------------------------
def test_bound_violation_names_field_path_and_reason() -> None:
    line = error_line(ModelSpec, "model", **{**LLAMA_LIKE, "num_layers": 0})
    assert line == "model.num_layers: Input should be greater than or equal to 1"


def test_typo_in_field_name_is_reported_not_ignored() -> None:
    fields = {**LLAMA_LIKE, "num_layer": 32}
    assert error_line(ModelSpec, "model", **fields) == (
        "model.num_layer: Extra inputs are not permitted"
    )


def test_missing_field_and_nested_list_paths() -> None:
    line = error_line(ClusterSpec, "cluster", groups=[{"name": "a", "gpu": "A100-80GB"}])
    assert line == "cluster.groups[0].num_nodes: Field required"


def test_inline_gpu_error_hides_union_branch_names() -> None:
    gpu = {"name": "x", "bf16_tflops": -1, "hbm_gib": 80, "hbm_GBps": 2000}
    line = error_line(ClusterSpec, "cluster", groups=[{"name": "a", "gpu": gpu, "num_nodes": 1}])
    assert line == ("cluster.groups[0].gpu.bf16_tflops: Input should be greater than or equal to 0")


def test_model_level_rule_is_reported_under_the_prefix_without_pydantic_noise() -> None:
    line = error_line(ModelSpec, "model", **{**LLAMA_LIKE, "num_kv_heads": 6})
    assert line == "model: num_attention_heads (32) must be a multiple of num_kv_heads (6)"


def test_many_errors_stay_on_one_line() -> None:
    line = error_line(ModelSpec, "model", a=1, b=2, c=3, d=4, e=5, f=6, g=7)
    assert "\n" not in line
    assert line.endswith("more")


# ModelSpec ------------------------------------------------------------------------------------
def test_defaults_resolve_gpt_conventions() -> None:
    model = ModelSpec(num_layers=2, hidden_size=768, num_attention_heads=12, vocab_size=50257)
    assert (model.kv_heads, model.ffn_size, model.head_size) == (12, 3072, 64)
    assert model.num_moe_layers == 0


def test_gqa_view() -> None:
    model = ModelSpec(**LLAMA_LIKE)
    assert (model.kv_heads, model.ffn_size, model.head_size) == (8, 14336, 128)


def test_hidden_must_split_over_heads_unless_head_dim_given() -> None:
    fields = {**LLAMA_LIKE, "hidden_size": 7168, "num_attention_heads": 96, "num_kv_heads": None}
    with pytest.raises(ValidationError, match="divisible by num_attention_heads"):
        ModelSpec(**fields)
    assert ModelSpec(**fields, head_dim=128).head_size == 128


def test_moe_top_k_cannot_exceed_experts() -> None:
    moe = {"num_experts": 2, "top_k": 3, "expert_ffn_hidden_size": 1024}
    line = error_line(ModelSpec, "model", **LLAMA_LIKE, moe=moe)
    assert line == "model.moe: top_k (3) exceeds num_experts (2)"


def test_moe_layer_count_after_dense_prefix_and_interval() -> None:
    moe = MoESpec(num_experts=8, top_k=2, expert_ffn_hidden_size=1024, first_dense_layers=3)
    assert ModelSpec(**LLAMA_LIKE, moe=moe).num_moe_layers == 29
    every_other = moe.model_copy(update={"first_dense_layers": 0, "layer_interval": 2})
    assert ModelSpec(**LLAMA_LIKE, moe=every_other).num_moe_layers == 16


def test_moe_dense_prefix_cannot_exceed_layers() -> None:
    moe = {"num_experts": 8, "top_k": 2, "expert_ffn_hidden_size": 64, "first_dense_layers": 33}
    with pytest.raises(ValidationError, match="first_dense_layers exceeds num_layers"):
        ModelSpec(**LLAMA_LIKE, moe=moe)


def test_specs_are_immutable() -> None:
    model = ModelSpec(**LLAMA_LIKE)
    with pytest.raises(ValidationError, match="frozen"):
        model.num_layers = 1  # type: ignore[misc]


# Plan -----------------------------------------------------------------------------------------
def test_sequence_parallel_defaults_to_tp() -> None:
    assert Plan(**PLAN).sp
    assert not Plan(**{**PLAN, "tp": 1}).sp
    assert not Plan(**PLAN, sequence_parallel=False).sp


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"pp": 1, "vpp": 2}, "vpp > 1 needs pp > 1"),
        ({"vpp": 2, "schedule": "gpipe"}, "set schedule '1f1b'"),
        ({"tp": 1, "sequence_parallel": True}, "sequence_parallel needs tp > 1"),
        ({"batch_shares": [0.5, 0.5]}, "one entry per data-parallel pipeline"),
        ({"batch_shares": [0.5, 0.5, 0.5, -0.5]}, "batch_shares must be positive"),
        ({"batch_shares": [0.5, 0.5, 0.5, 0.5]}, "batch_shares must sum to 1"),
        ({"zero_stage": 4}, "less than or equal to 3"),
        ({"recompute": "some"}, "'none', 'selective' or 'full'"),
    ],
)
def test_plan_rules(overrides: dict[str, Any], reason: str) -> None:
    assert reason in error_line(Plan, "plan", **{**PLAN, **overrides})


def test_batch_shares_accept_rounded_fractions() -> None:
    plan = Plan(**{**PLAN, "dp": 3}, batch_shares=[0.33, 0.33, 0.34])
    assert plan.batch_shares == [0.33, 0.33, 0.34]


def test_stage_gives_group_or_replicas_not_both() -> None:
    with pytest.raises(ValidationError, match="exactly one of 'group' or 'replicas'"):
        StageSpec(num_layers=4)
    with pytest.raises(ValidationError, match="exactly one of 'group' or 'replicas'"):
        StageSpec(num_layers=4, group="a", replicas=[{"group": "a"}])
    with pytest.raises(ValidationError, match="sets tp per replica and no dp"):
        StageSpec(num_layers=4, replicas=[{"group": "a"}], dp=2)


def test_stages_must_match_pp() -> None:
    stages = [{"num_layers": 16, "group": "a"}]
    line = error_line(Plan, "plan", **PLAN, stages=stages)
    assert line == "plan: stages lists 1 stages but pp is 2"


def test_replica_counts_must_agree_with_each_other_and_dp() -> None:
    two = [{"group": "a", "tp": 2}, {"group": "b", "tp": 4}]
    three = [*two, {"group": "b"}]
    uneven = [{"num_layers": 16, "replicas": two}, {"num_layers": 16, "replicas": three}]
    assert "same number of replicas" in error_line(Plan, "plan", **PLAN, stages=uneven)
    even = [{"num_layers": 16, "replicas": two}, {"num_layers": 16, "replicas": two}]
    assert "stages list 2 replicas but dp is 4" in error_line(Plan, "plan", **PLAN, stages=even)
    plan = Plan(**{**PLAN, "dp": 2}, stages=even)
    assert plan.is_heterogeneous


# ClusterSpec ----------------------------------------------------------------------------------
def group(name: str, zone: str = "default", **extra: Any) -> dict[str, Any]:
    return {"name": name, "gpu": "H100-80GB", "num_nodes": 2, "zone": zone, **extra}


def test_cluster_counts_gpus_and_finds_groups() -> None:
    cluster = ClusterSpec(groups=[group("a"), group("b", gpus_per_node=4)])
    assert cluster.num_gpus == 24
    assert cluster.group("b").num_gpus == 8
    with pytest.raises(KeyError):
        cluster.group("c")


def link(*zones: str) -> dict[str, Any]:
    return {"zones": list(zones), "bandwidth_GBps": 12.5}


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"groups": [group("a"), group("a")]}, "group names must be unique; repeated: a"),
        (
            {"groups": [group("a", "east")], "zone_links": [link("east", "west")]},
            "unknown zone(s): west",
        ),
        (
            {"groups": [group("a", "east")], "zone_links": [link("east", "east")]},
            "joins zone 'east' to itself",
        ),
        ({"groups": [group("a", num_nodes=0)]}, "groups[0].num_nodes: Input should be greater"),
    ],
)
def test_cluster_rules(fields: dict[str, Any], reason: str) -> None:
    assert reason in error_line(ClusterSpec, "cluster", **fields)


def test_training_defaults() -> None:
    training = TrainingSpec(seq_length=4096, global_batch_size=1024)
    assert (training.precision, training.optimizer, training.flash_attention) == (
        "bf16",
        "adamw",
        True,
    )


# Round trips ----------------------------------------------------------------------------------
ALL_PRESETS = [(kind, name) for kind in SPEC_KINDS for name in list_presets(kind)]


@pytest.mark.parametrize(("kind", "name"), ALL_PRESETS)
def test_json_round_trip(kind: str, name: str, tmp_path: Path) -> None:
    spec = load_preset(kind, name)  # type: ignore[arg-type]
    path = tmp_path / "spec.json"
    path.write_text(spec.model_dump_json(indent=2))
    assert load_spec(kind, path) == spec
    assert type(spec).model_validate_json(path.read_text()) == spec


@pytest.mark.parametrize(("kind", "name"), ALL_PRESETS)
def test_yaml_round_trip(kind: str, name: str, tmp_path: Path) -> None:
    spec = load_preset(kind, name)  # type: ignore[arg-type]
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(spec.model_dump(mode="json", exclude_none=True)))
    assert load_spec(kind, str(path)) == spec


def test_mapping_and_spec_sources_agree() -> None:
    model = ModelSpec(**LLAMA_LIKE)
    assert load_spec("model", model) is model
    assert load_spec("model", json.loads(model.model_dump_json())) == model
