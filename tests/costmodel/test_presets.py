"""Built-in presets: all load, names are tidy, shapes match the validation set, plans fit."""

import csv
import re
import tomllib

import pytest

from costmodel.catalog import (
    SPEC_KINDS,
    SpecError,
    list_cluster_presets,
    list_model_presets,
    list_plan_presets,
    list_presets,
    list_training_presets,
    load_cluster_preset,
    load_model_preset,
    load_plan_preset,
    load_preset,
    load_spec,
    load_training_preset,
)
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec
from tests.support.paths import REPO_ROOT

RUNS_CSV = REPO_ROOT / "validation" / "runs.csv"

# validation/runs.csv model_name -> preset with that architecture.
VALIDATION_MODELS = {
    "GPT-1.7B": "gpt-1.7b",
    "GPT-3.6B": "gpt-3.6b",
    "GPT-7.5B": "gpt-7.5b",
    "GPT-18.4B": "gpt-18.4b",
    "GPT-39.1B": "gpt-39.1b",
    "GPT-76.1B": "gpt-76.1b",
    "GPT-145.6B": "gpt-145.6b",
    "GPT-310.1B": "gpt-310.1b",
    "GPT-529.6B": "gpt-530b",
    "GPT-1008.0B": "gpt-1t",
    "GPT-3 175B": "gpt3-175b",
    "GPT3-175B": "gpt3-175b",
    "GPT-530B (MT-NLG arch)": "gpt-530b",
    "GPT-22B (Korthikanti eval)": "gpt-22b",
    "GPT-175B (Korthikanti eval)": "gpt3-175b",
    "GPT-530B (Korthikanti eval)": "gpt-530b",
    "GPT-530B (Korthikanti eval, DP=8)": "gpt-530b",
    "GPT-1T (Korthikanti eval)": "gpt-1t",
    "GPT-NeoX-20B": "gpt-neox-20b",
    "Llama 2 13B": "llama2-13b",
    "Llama 2 70B": "llama2-70b",
    "LLAMA2-7B": "llama2-7b",
    "LLAMA2-13B": "llama2-13b",
    "LLAMA2-70B": "llama2-70b",
    "Llama 3 8B": "llama3-8b",
    "Llama 3.1 8B": "llama3-8b",
    "LLAMA3-8B": "llama3-8b",
    "Llama 3 70B": "llama3-70b",
    "LLAMA3-70B": "llama3-70b",
    "Llama 3.1 405B": "llama3.1-405b",
    **{f"MPT-{size}": f"mpt-{size}" for size in ("125m", "350m", "760m", "1b", "3b")},
    **{f"MPT-{size}": f"mpt-{size}" for size in ("7b", "13b", "30b", "70b")},
}

# (plan preset, the model, training and cluster presets it was written for)
PLAN_TARGETS = {
    "tp8-pp8-dp16": ("gpt3-175b", "gpt3-2k", "dgx-h100-128n"),
    "tp8-pp4-dp4": ("llama3-70b", "llama3-8k", "dgx-h100-16n"),
    "fsdp-dp64": ("llama3-8b", "llama3-8k", "dgx-a100-8n"),
    "mixed-2zone-pp4": ("llama3-70b", "llama3-8k", "mixed-h100-a100-2zone"),
}


def validation_rows() -> list[dict[str, str]]:
    with RUNS_CSV.open(newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize("kind", SPEC_KINDS)
def test_every_preset_loads_with_a_tidy_name(kind: str) -> None:
    names = list_presets(kind)  # type: ignore[arg-type]
    assert names, f"no {kind} presets"
    for name in names:
        assert re.fullmatch(r"[a-z0-9][a-z0-9.\-]*", name), name
        spec = load_preset(kind, name)  # type: ignore[arg-type]
        if isinstance(spec, ModelSpec | ClusterSpec):
            assert spec.name == name


def test_typed_helpers_return_typed_specs() -> None:
    assert isinstance(load_model_preset(list_model_presets()[0]), ModelSpec)
    assert isinstance(load_cluster_preset(list_cluster_presets()[0]), ClusterSpec)
    assert isinstance(load_training_preset(list_training_presets()[0]), TrainingSpec)
    assert isinstance(load_plan_preset(list_plan_presets()[0]), Plan)


def test_preset_names_are_case_insensitive() -> None:
    assert load_spec("model", "Llama3-70B") == load_model_preset("llama3-70b")


def test_unknown_preset_names_argument_and_lists_choices() -> None:
    with pytest.raises(SpecError) as caught:
        load_model_preset("llama9-1t")
    message = str(caught.value)
    assert message.startswith("unknown model 'llama9-1t'")
    assert "llama3-70b" in message and "gpt3-175b" in message


def test_helpers_take_names_not_paths() -> None:
    with pytest.raises(SpecError, match="not a preset;"):
        load_model_preset(str(RUNS_CSV))


def test_brief_presets_exist() -> None:
    required_models = {
        "gpt3-175b",
        "gpt-neox-20b",
        "llama2-7b",
        "llama2-13b",
        "llama2-70b",
        "llama3-8b",
        "llama3-70b",
        "llama3.1-405b",
        "mixtral-8x7b",
        "deepseek-v3",
        "qwen2-7b",
        *VALIDATION_MODELS.values(),
    }
    assert required_models <= set(list_model_presets())
    assert {"dgx-a100-8n", "dgx-h100-16n", "dgx-h100-128n", "mixed-h100-a100-2zone"} <= set(
        list_cluster_presets()
    )
    assert {"gpt3-2k", "llama3-8k"} <= set(list_training_presets())
    assert set(PLAN_TARGETS) <= set(list_plan_presets())


def test_validation_set_model_names_resolve_to_matching_presets() -> None:
    """Every mapped model of validation/runs.csv exists there and its preset has that shape."""
    rows = validation_rows()
    csv_names = {row["model_name"] for row in rows}
    assert set(VALIDATION_MODELS) <= csv_names, set(VALIDATION_MODELS) - csv_names
    checked = 0
    for row in rows:
        preset = VALIDATION_MODELS.get(row["model_name"])
        if preset is None:
            continue
        model = load_model_preset(preset)
        resolved = {
            "layers": model.num_layers,
            "hidden": model.hidden_size,
            "ffn_hidden": model.ffn_size,
            "heads": model.num_attention_heads,
            "kv_heads": model.kv_heads,
            "vocab": model.vocab_size,
        }
        # NVIDIA's DGX Cloud tables run reduced-depth proxies of a model on few GPUs: the
        # layers column holds the proxy's depth (data set README), the rest is the full model.
        proxy = "reduced-depth proxy" in row["notes"]
        for column, value in resolved.items():
            if row[column] and not (proxy and column == "layers"):
                assert int(row[column]) == value, (row["id"], column, preset)
                checked += 1
    assert checked > 500


def test_deepseek_v3_layout() -> None:
    model = load_model_preset("deepseek-v3")
    assert model.moe is not None
    assert (model.moe.num_experts, model.moe.top_k, model.moe.num_shared_experts) == (256, 8, 1)
    # Multi-head latent attention: query/key heads of 128 + 64 (rope), value heads of 128.
    assert model.mla is not None and model.mla.kv_lora_rank == 512
    assert (model.num_moe_layers, model.head_size, model.ffn_size) == (58, 192, 18432)
    assert model.value_head_size == 128


def test_mixed_cluster_zones_and_prices() -> None:
    cluster = load_cluster_preset("mixed-h100-a100-2zone")
    gpus_by_zone: dict[str, int] = {}
    for group in cluster.groups:
        gpus_by_zone[group.zone] = gpus_by_zone.get(group.zone, 0) + group.num_gpus
        assert group.price_per_gpu_hour is not None and group.price_per_gpu_hour > 0
    assert gpus_by_zone == {"us-east": 64, "us-west": 192}
    (link,) = cluster.zone_links
    assert (link.bandwidth_GBps, link.latency_ms) == (12.5, 30)


@pytest.mark.parametrize(("plan_name", "targets"), PLAN_TARGETS.items())
def test_plans_fit_the_presets_they_were_written_for(
    plan_name: str, targets: tuple[str, str, str]
) -> None:
    plan = load_plan_preset(plan_name)
    model = load_model_preset(targets[0])
    training = load_training_preset(targets[1])
    cluster = load_cluster_preset(targets[2])
    assert model.num_attention_heads % plan.tp == 0 and model.kv_heads % plan.tp == 0
    assert training.global_batch_size % (plan.dp * plan.micro_batch_size) == 0
    if plan.stages is None:
        assert plan.dp * plan.tp * plan.pp * plan.cp == cluster.num_gpus
        assert model.num_layers % (plan.pp * plan.vpp) == 0
        return
    assert sum(stage.num_layers for stage in plan.stages) == model.num_layers
    gpus_used: dict[str, int] = {}
    for stage in plan.stages:
        assert stage.group is not None and stage.tp is not None and stage.dp is not None
        gpus_used[stage.group] = gpus_used.get(stage.group, 0) + stage.tp * stage.dp
    assert gpus_used == {group.name: group.num_gpus for group in cluster.groups}


def test_presets_ship_as_package_data() -> None:
    """The loader reads through importlib.resources, so pyproject must ship every preset file."""
    root = RUNS_CSV.parents[1]
    with (root / "pyproject.toml").open("rb") as handle:
        patterns = tomllib.load(handle)["tool"]["setuptools"]["package-data"]["costmodel"]
    shipped = {path for pattern in patterns for path in (root / "costmodel").glob(pattern)}
    presets = set((root / "costmodel" / "presets").rglob("*.yaml"))
    assert presets and presets <= shipped, presets - shipped
