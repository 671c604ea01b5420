"""Uneven pipeline splits of homogeneous plans, as Megatron-Core expresses them."""

import pytest

from costmodel import estimate, estimate_many
from costmodel.catalog import load_preset
from costmodel.pipeline_split import balanced_split, is_valid, resolve_split
from search import SearchRequest, run_search

LLAMA405 = load_preset("model", "llama3.1-405b")  # 126 layers
# The 405B run's batch at 8K context: 16M tokens = 2,048 sequences (Dubey et al. 2024, Sec. 3.4).
TRAINING = load_preset("training", "llama3-8k").model_copy(update={"global_batch_size": 2048})


def _cluster(nodes: int) -> dict:
    return {"name": f"h100x{8 * nodes}", "groups": [{"name": "h100", "gpu": "H100-80GB",
                                                      "num_nodes": nodes}]}  # fmt: skip


def _layers(result) -> list[int]:
    return [stage.num_layers for stage in result.per_stage]


def test_metas_405b_layout_prices_with_lighter_end_stages():
    """TP8 PP16 DP128 on 16,384 H100: 126 layers do not divide 16 stages; the balanced split is
    Meta's 7 / 8 x 14 / 7 (the last stage also runs the output layer and loss)."""
    plan = {"dp": 128, "tp": 8, "pp": 16, "micro_batch_size": 1, "zero_stage": 1}
    result = estimate(LLAMA405, TRAINING, _cluster(2048), plan)
    assert _layers(result) == [7] + [8] * 14 + [7]
    assert result.feasible, result.reasons


def test_nemos_interleaved_405b_layout_counts_embedding_and_loss_as_layers():
    """NeMo's TP8 PP8 VP8 CP2: 126 + embedding + loss = 128 slots in 64 chunks of 2."""
    plan = {"dp": 8, "tp": 8, "pp": 8, "vpp": 8, "cp": 2, "micro_batch_size": 1, "zero_stage": 1}
    result = estimate(LLAMA405, TRAINING.model_copy(update={"global_batch_size": 256}),
                      _cluster(128), plan)  # fmt: skip
    assert _layers(result) == [15] + [16] * 6 + [15]
    assert result.feasible, result.reasons


def test_an_even_split_stays_even():
    assert resolve_split(80, 4, 1, 0, 0, head=0.5) == (20, 20, 20)
    assert resolve_split(80, 4, 2, 0, 0, head=0.5) == (20, 20, 20)


def test_explicit_first_and_last_stage_layers():
    """Megatron's --decoder-first/last-pipeline-num-layers: the middle stages split the rest."""
    assert resolve_split(80, 4, 1, 18, 20, head=0.5) == (18, 21, 20)
    assert resolve_split(80, 4, 1, 14, 0, head=0.5) == (14, 22, 22)
    assert resolve_split(80, 4, 1, 17, 20, head=0.5)[0] == -1  # 43 layers over 2 middle stages


def test_no_split_is_an_infeasibility_reason_naming_the_rule():
    plan = {"dp": 1, "tp": 8, "pp": 4, "vpp": 7, "micro_batch_size": 1}
    model = load_preset("model", "llama3-70b")  # 80 layers
    result = estimate(model, TRAINING.model_copy(update={"global_batch_size": 8}),
                      _cluster(4), plan)  # fmt: skip
    assert not result.feasible
    assert any("no split of num_layers=80 over pp=4 stages with vpp=7" in r for r in result.reasons)


def _slowest(split: tuple[int, int, int], pp: int, head: float) -> float:
    first, middle, last = split
    return max(first, middle if pp > 2 else 0, last + head)


@pytest.mark.parametrize("layers", [24, 61, 94, 126])
@pytest.mark.parametrize(("pp", "vpp"), [(2, 1), (3, 1), (8, 1), (16, 1), (8, 2), (4, 5)])
def test_the_balanced_split_is_the_best_valid_one(layers: int, pp: int, vpp: int):
    """Against every valid (first, middle, last): none has a faster slowest stage."""
    head = 0.64
    split = balanced_split(layers, pp, vpp, head)
    candidates = [
        (first, middle, last)
        for middle in (range(1, layers) if pp > 2 else [0])
        for first in range(1, layers)
        for last in [layers - first - (pp - 2) * middle]
        if is_valid(layers, pp, vpp, (first, max(middle, first, last) if pp == 2 else middle, last))
    ]
    if not candidates:
        assert split[0] == -1
        return
    assert is_valid(layers, pp, vpp, split)
    assert _slowest(split, pp, head) == min(_slowest(c, pp, head) for c in candidates)


def test_scalar_and_vectorized_faces_agree_on_uneven_splits():
    plans = {"dp": [128, 64, 8], "tp": [8, 8, 8], "pp": [16, 16, 8], "vpp": [1, 2, 8],
             "cp": [1, 2, 2], "micro_batch_size": [1, 1, 1], "zero_stage": [1, 1, 1]}  # fmt: skip
    many = estimate_many(LLAMA405, TRAINING, _cluster(2048), plans)
    for i in range(3):
        one = estimate(LLAMA405, TRAINING, _cluster(2048), {k: v[i] for k, v in plans.items()})
        assert one.step_time_s == pytest.approx(many["step_time_s"][i], rel=1e-12)
        assert one.peak_memory_gib == pytest.approx(many["peak_memory_gib"][i], rel=1e-12)


def test_the_search_finds_the_uneven_405b_layout():
    """Constrained to Meta's degrees, the search returns pp 16 with the 7/8.../7 split rather
    than leaving GPUs idle for a pp that divides 126."""
    request = SearchRequest(
        model=LLAMA405, training=TRAINING, cluster=_cluster(2048),
        constraints={"tp": 8, "pp": 16, "cp": 1, "dp": 128, "micro_batch_size": 1},
        top_k=1,
    )  # fmt: skip
    result = run_search(request)
    (best,) = result.plans
    assert best.plan.pp == 16 and best.estimate.num_gpus == 16_384
    assert _layers(best.estimate) == [7] + [8] * 14 + [7]
