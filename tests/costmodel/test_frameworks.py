"""Framework-aware plans: a search for a framework returns only plans its table can launch, and
an estimate for a framework says which settings it cannot express."""

import pytest

from costmodel import estimate
from costmodel.catalog import load_preset
from costmodel.frameworks import FRAMEWORK_NAMES, why_not
from costmodel.homogeneous import plan_arrays
from costmodel.specs import Plan
from search import SearchRequest, run_search

MODEL = load_preset("model", "llama3-8b")
TRAINING = load_preset("training", "llama3-8k").model_copy(update={"global_batch_size": 256})
CLUSTER = load_preset("cluster", "dgx-h100-16n")
MIXTRAL = load_preset("model", "mixtral-8x7b")


@pytest.mark.parametrize("framework", FRAMEWORK_NAMES[1:])
@pytest.mark.parametrize("model", [MODEL, MIXTRAL], ids=["dense", "moe"])
def test_every_plan_a_framework_search_returns_is_launchable_by_it(framework, model):
    training = TRAINING.model_copy(update={"framework": framework})
    request = SearchRequest(model=model, training=training, cluster=CLUSTER, top_k=10)
    result = run_search(request)
    assert result.plans
    for ranked in result.plans:
        assert why_not(framework, plan_arrays(ranked.plan)) == [], ranked.plan
        assert framework in ranked.estimate.launchable_by
        assert ranked.estimate.framework == framework


@pytest.mark.parametrize(
    ("framework", "plan", "setting"),
    [
        ("megatron", {"zero_stage": 3}, "zero_stage"),
        ("torchtitan", {"zero_stage": 1}, "zero_stage"),
        ("deepspeed", {"pp": 2, "zero_stage": 2}, "zero_stage"),
        ("deepspeed", {"pp": 2, "vpp": 2}, "vpp"),
        ("deepspeed", {"cp": 2}, "cp"),
    ],
)
def test_a_plan_the_framework_cannot_launch_names_the_setting(framework, plan, setting):
    base = {"dp": 8, "tp": 2, "pp": 1, "micro_batch_size": 1}
    training = TRAINING.model_copy(update={"framework": framework})
    result = estimate(MODEL, training, CLUSTER, {**base, **plan})
    assert not result.feasible
    (reason,) = [r for r in result.reasons if r.startswith(f"{framework} cannot launch")]
    assert f"{setting}:" in reason
    assert framework not in result.launchable_by


def test_any_launches_what_the_others_cannot():
    plan = Plan(dp=8, tp=2, pp=2, micro_batch_size=1, zero_stage=3)
    result = estimate(MODEL, TRAINING, CLUSTER, plan)
    assert result.feasible
    assert "megatron" not in result.launchable_by and "torchtitan" in result.launchable_by


def test_heterogeneous_plans_with_per_stage_tp_are_not_launchable():
    cluster = load_preset("cluster", "mixed-h100-a100-2zone")
    groups = [group.name for group in cluster.groups]
    plan = {
        "dp": 1, "tp": 4, "pp": 2, "micro_batch_size": 1, "zero_stage": 1,
        "stages": [{"group": groups[0], "num_layers": 16, "tp": 4},
                   {"group": groups[1], "num_layers": 16, "tp": 2}],
    }  # fmt: skip
    result = estimate(MODEL, TRAINING.model_copy(update={"framework": "megatron"}), cluster, plan)
    assert any("one tensor-parallel size on every stage" in r for r in result.reasons)
    assert result.launchable_by == []
