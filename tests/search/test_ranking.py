"""The ranking: one plan written two ways is one plan, one entry per layout with its near-ties
folded in, ``top_k`` counting entries, and exhaustive enumeration keeping what that needs."""

import numpy as np
import pytest

from costmodel import estimate
from costmodel.catalog import load_spec
from costmodel.specs import Plan
from search import SearchRequest, run_search
from search import exhaustive as exhaustive_module
from search.exhaustive import enumerate_plans
from search.objectives import OBJECTIVE_METRICS, TOKENS_PER_S, Evaluation
from search.pricing import price_group
from search.ranking import (
    NEAR_TIE_TOLERANCE,
    canonical_plan,
    entries,
    layout_key,
    ordered,
    top_entries,
)
from search.result import plan_hash
from search.space import homogeneous_spaces

LLAMA_70B = load_spec("model", "llama3-70b")  # 80 layers
MIXED = load_spec("cluster", "mixed-h100-a100-2zone")
TRAINING = load_spec("training", "llama3-8k")
BASE = {"micro_batch_size": 1, "zero_stage": 1, "recompute": "selective"}


def stages_plan(layers: list[int], groups: list[str], tp: int = 8, dp: int = 2) -> Plan:
    return Plan(
        dp=dp,
        tp=tp,
        pp=len(layers),
        sequence_parallel=True,
        stages=[
            {"num_layers": n, "group": g, "tp": tp, "dp": dp}
            for n, g in zip(layers, groups, strict=True)
        ],
        **BASE,
    )


# Canonical plans ---------------------------------------------------------------------------------
def test_stages_on_one_group_with_the_even_split_are_the_homogeneous_plan() -> None:
    explicit = stages_plan([20] * 4, ["a100-80"] * 4)
    homogeneous = Plan(dp=2, tp=8, pp=4, group="a100-80", sequence_parallel=True, **BASE)
    assert canonical_plan(explicit, LLAMA_70B, seq_length=8192) == homogeneous
    # Same GPUs, same layers per stage: the cost model prices them alike.
    one = estimate(LLAMA_70B, TRAINING, MIXED, explicit)
    other = estimate(LLAMA_70B, TRAINING, MIXED, homogeneous)
    assert one.tokens_per_s == pytest.approx(other.tokens_per_s, rel=1e-9)


def test_replica_pipelines_on_one_group_are_the_homogeneous_plan() -> None:
    replicas = [{"group": "h100", "tp": 4}] * 3
    explicit = Plan(dp=3, tp=4, pp=2, stages=[{"num_layers": 40, "replicas": replicas}] * 2, **BASE)
    assert canonical_plan(explicit, LLAMA_70B, seq_length=8192) == Plan(
        dp=3, tp=4, pp=2, group="h100", sequence_parallel=True, **BASE
    )


def test_a_megatron_first_last_split_becomes_explicit_stage_layers() -> None:
    explicit = stages_plan([18, 22, 22, 18], ["h100"] * 4)
    canonical = canonical_plan(explicit, LLAMA_70B, seq_length=8192)
    assert canonical.stages is None and canonical.group == "h100"
    assert (canonical.first_stage_layers, canonical.last_stage_layers) == (18, 18)


@pytest.mark.parametrize(
    "plan",
    [
        stages_plan([20] * 4, ["h100", "h100", "a100-80", "a100-80"]),  # two groups
        stages_plan([10, 30, 20, 20], ["h100"] * 4),  # middle stages differ
    ],
)
def test_plans_no_homogeneous_plan_writes_stay_as_they_are(plan: Plan) -> None:
    assert canonical_plan(plan, LLAMA_70B, seq_length=8192) == plan


def test_a_search_ranks_a_plan_once_whichever_way_it_was_found() -> None:
    """The runner folds a baseline and the same plan found as one-group stages into one."""
    from search.runner import SearchRun

    request = SearchRequest(model=LLAMA_70B, training=TRAINING, cluster=MIXED, trials=1, top_k=5)
    homogeneous = Plan(dp=2, tp=8, pp=4, group="a100-80", sequence_parallel=True, **BASE)
    explicit = stages_plan([20] * 4, ["a100-80"] * 4)
    found = [
        (None, _evaluation(homogeneous, 100.0)),
        (7, _evaluation(explicit, 100.0)),
        (8, _evaluation(stages_plan([20] * 4, ["h100"] * 4), 90.0)),
    ]
    run = SearchRun(request, OBJECTIVE_METRICS["throughput"], None, None, None, None, None)
    distinct = run.distinct(found)
    hashes = [plan_hash(e.plan, e.global_batch_size) for _, e in distinct]
    assert len(distinct) == 2 and len(set(hashes)) == 2
    assert distinct[0] == found[0]  # the baseline's own form wins
    # The stages-only plan is ranked in its canonical (homogeneous) form, priced as such.
    number, repriced = distinct[1]
    assert number == 8 and repriced.plan.stages is None and repriced.plan.group == "h100"
    scalar = estimate(LLAMA_70B, TRAINING, MIXED, repriced.plan)
    assert repriced.metrics["tokens_per_s"] == scalar.tokens_per_s


# Entries -----------------------------------------------------------------------------------------
def _evaluation(plan: Plan, tokens_per_s: float, batch: int = 512) -> Evaluation:
    metrics = dict.fromkeys(
        ("usd_per_million_tokens", "time_to_train_s", "step_time_s", "mfu"), 1.0
    )
    return Evaluation(
        plan=plan,
        global_batch_size=batch,
        metrics={**metrics, "tokens_per_s": tokens_per_s, "peak_memory_gib": 1.0},
        memory_ratio=0.5,
    )


def homogeneous(**fields: object) -> Plan:
    values: dict[str, object] = {
        "dp": 32,
        "tp": 4,
        "pp": 4,
        "vpp": 5,
        "micro_batch_size": 1,
        "zero_stage": 1,
        "sequence_parallel": True,
    }
    values.update(fields)
    return Plan(**values)  # type: ignore[arg-type]


def test_near_ties_of_one_layout_fold_into_one_entry_with_equivalents() -> None:
    best = homogeneous()
    zero2 = homogeneous(zero_stage=2)  # same layout, 0.1% slower: an equivalent
    offload = homogeneous(offload_optimizer=True)  # same layout, 2% slower: a worse knob
    cp_trade = homogeneous(dp=16, cp=2, micro_batch_size=2)  # same tokens per GPU, 0.2%
    cp_other = homogeneous(dp=16, cp=2, micro_batch_size=1)  # half the tokens per GPU
    tp8 = homogeneous(tp=8, dp=16)  # another layout, as fast as a near-tie
    found = [
        (None, _evaluation(plan, value))
        for plan, value in [
            (offload, 98.0),
            (zero2, 99.9),
            (cp_other, 99.85),
            (best, 100.0),
            (cp_trade, 99.8),
            (tp8, 99.95),
        ]
    ]
    folded = entries(found, (TOKENS_PER_S,))
    assert [entry.evaluation.plan for entry in folded] == [best, tp8, cp_other]
    first = folded[0]
    assert [e.plan for _, e in first.equivalents] == [zero2, cp_trade]  # closest first
    assert all(entry.equivalents == [] for entry in folded[1:])
    # The 2% offload twin is dropped: its layout is listed already, with better knobs.
    listed = [e.plan for entry in folded for _, e in (entry.best, *entry.equivalents)]
    assert offload not in listed


def test_the_tolerance_is_relative_and_documented() -> None:
    best = homogeneous()
    edge = 100.0 * (1 - NEAR_TIE_TOLERANCE)
    found = [
        (None, _evaluation(best, 100.0)),
        (None, _evaluation(homogeneous(zero_stage=2), edge + 1e-6)),
        (None, _evaluation(homogeneous(dp=16, cp=2, micro_batch_size=2), edge - 1e-3)),
    ]
    folded = entries(found, (TOKENS_PER_S,))
    assert len(folded) == 2 and len(folded[0].equivalents) == 1


def test_top_k_counts_distinct_entries() -> None:
    # Ten layouts with three near-tie variants each: the top 4 are four layouts.
    found = []
    for index in range(10):
        for variant, zero in enumerate((1, 2, 3)):
            plan = homogeneous(
                vpp=[1, 2, 4, 5, 10][index % 5],
                dp=32 if index < 5 else 16,
                tp=4 if index < 5 else 8,
                zero_stage=zero,
            )
            found.append((None, _evaluation(plan, 100.0 - index - variant * 0.01)))
    chosen, front = top_entries(found, (TOKENS_PER_S,), 4)
    assert front is None and len(chosen) == 4
    layouts = {layout_key(e.evaluation.plan, 512) for e in chosen}
    assert len(layouts) == 4 and all(len(e.equivalents) == 2 for e in chosen)


def test_a_search_returns_top_k_distinct_layouts_with_their_near_ties() -> None:
    request = SearchRequest(
        model="llama3-8b",
        training="llama3-8k",
        cluster="dgx-a100-8n",
        sampler="exhaustive",
        top_k=5,
    )
    result = run_search(request)
    assert len(result.plans) == 5
    keys = [layout_key(p.plan, p.global_batch_size) for p in result.plans]
    assert len(set(keys)) == 5
    best = result.plans[0].objective_values[0]
    assert any(plan.equivalents for plan in result.plans)
    for ranked in result.plans:
        for equivalent in ranked.equivalents:
            value = equivalent.objective_values[0]
            assert abs(value - ranked.objective_values[0]) <= NEAR_TIE_TOLERANCE * best
            assert equivalent.differs and equivalent.plan_hash != ranked.plan_hash
    # Without folding, the raw top 5 of the same space repeats layouts.
    spaces = homogeneous_spaces(request)
    raw = []
    for space in spaces:
        for columns in space.chunks(1 << 20):
            arrays = price_group(request, space, columns)
            fits = np.flatnonzero(arrays["memory_ratio"] <= 1)
            top = fits[np.argsort(-arrays["tokens_per_s"][fits], kind="stable")[:5]]
            raw = [space.plan({d: columns[d][i] for d in columns}) for i in top]
    assert len({layout_key(plan, 512) for plan in raw}) < 5


def test_exhaustive_keeps_what_the_whole_space_ranking_needs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Chunk by chunk (small chunks: many merges) the pool yields the same entries as ranking
    every plan of the space at once."""
    request = SearchRequest(model="llama3-8b", training="llama3-8k", cluster="dgx-a100-8n", top_k=3)
    metrics = OBJECTIVE_METRICS["throughput"]
    spaces = homogeneous_spaces(request)
    monkeypatch.setattr(exhaustive_module, "CHUNK_PLANS", 500)
    pooled = enumerate_plans(request, spaces, metrics, keep=3).candidates
    every = []
    for space in spaces:
        for columns in space.chunks(1 << 20):
            arrays = price_group(request, space, columns)
            for i in np.flatnonzero(arrays["memory_ratio"] <= 1):
                plan = space.plan({d: columns[d][i] for d in columns})
                every.append((None, _evaluation(plan, float(arrays["tokens_per_s"][i]))))
    expected = entries(ordered(every, metrics), metrics)[:3]
    got = entries([(None, e) for e in pooled], metrics)[:3]
    assert [e.evaluation.plan for e in got] == [e.evaluation.plan for e in expected]
    assert [[p.plan for _, p in e.equivalents] for e in got] == [
        [p.plan for _, p in e.equivalents] for e in expected
    ]
