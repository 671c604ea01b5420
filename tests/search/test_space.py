"""The enumerated plan space: valid by construction, complete, canonical, and constrainable."""

import itertools

import numpy as np
import pytest

from costmodel import estimate_many
from costmodel.feasibility import Violation
from search import SearchRequest
from search.space import OPTION_DIMS, STRUCT_DIMS, homogeneous_spaces
from tests.support.search_specs import SMALL_MODEL

MODEL = SMALL_MODEL
MOE = {
    **MODEL,
    "name": "small-moe",
    "moe": {"num_experts": 4, "top_k": 2, "expert_ffn_hidden_size": 7168},
}
TRAINING = {"seq_length": 4096, "global_batch_size": 64, "train_tokens": 1e10}
CLUSTER = {
    "name": "a100x16",
    "groups": [{"name": "a100", "gpu": "A100-40GB", "num_nodes": 2, "price_per_gpu_hour": 2.0}],
}


def request(**fields: object) -> SearchRequest:
    return SearchRequest(
        **{"model": MODEL, "training": TRAINING, "cluster": CLUSTER, **fields}  # type: ignore[arg-type]
    )


def all_plans(req: SearchRequest) -> dict[str, np.ndarray]:
    (space,) = homogeneous_spaces(req)
    return space.expand(0, space.num_rows)


def price(req: SearchRequest, plans: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return estimate_many(req.model, req.training, req.cluster, plans)


# Candidate values per dimension for the brute force: valid ones and invalid ones mixed (the
# brute force knows no divisibility rule, only the cost model's verdict).
PROBE = {
    "tp": [1, 2, 3, 4, 5, 6, 7, 8, 16],
    "pp": [1, 2, 3, 4, 5, 8, 12, 24],
    "cp": [1, 2, 3, 4, 8],
    "dp": [1, 2, 3, 4, 5, 6, 8, 12, 16],
    "micro_batch_size": [1, 2, 3, 4, 5, 8, 64],
    "vpp": [1, 2, 3, 4, 5, 6, 24],
}


def brute_force_valid(req: SearchRequest) -> set[tuple[int, ...]]:
    """Every PROBE combination the cost model calls structurally valid, in the space's
    canonical form (sequence parallel iff tp > 1; one ZeRO stage on one data-parallel rank;
    offloading only with ZeRO >= 1)."""
    # etp: 0 = the attention's tp, 1 = experts unsharded (the space's two canonical choices);
    # dense models only the former.
    ranges = {
        **PROBE,
        "ep": [1, 2, 3, 4] if req.model.moe else [1],
        "etp": [0, 1] if req.model.moe else [0],
    }
    grid = np.array(list(itertools.product(*ranges.values())), dtype=np.int64)
    columns = {dim: grid[:, i] for i, dim in enumerate(ranges)}
    columns["vpp"] = np.where(columns["pp"] == 1, 1, columns["vpp"])
    arrays = price(req, columns)
    columns["etp"] = np.where(columns["etp"] == 0, columns["tp"], columns["etp"])
    valid = (arrays["violations"] & ~int(Violation.MEMORY)) == 0
    rows = {tuple(int(columns[d][i]) for d in STRUCT_DIMS) for i in np.flatnonzero(valid)}
    plans = set()
    for row in rows:
        values = dict(zip(STRUCT_DIMS, row, strict=True))
        single_rank = values["dp"] * values["cp"] == 1
        for offload, recompute in itertools.product((0, 1), (0, 1, 2)):
            zeros = [z for z in range(4) if z >= 1 or not offload]
            for zero in zeros[:1] if single_rank else zeros:
                plans.add((*row, zero, offload, recompute, int(values["tp"] > 1)))
    return plans


@pytest.mark.parametrize("model", [MODEL, MOE], ids=["dense", "moe"])
def test_space_is_exactly_the_valid_canonical_plans(model: dict) -> None:
    req = request(model=model)
    plans = all_plans(req)
    enumerated = [
        tuple(int(plans[d][i]) for d in (*STRUCT_DIMS, *OPTION_DIMS))
        for i in range(len(plans["tp"]))
    ]
    assert len(set(enumerated)) == len(enumerated), "the space lists a plan twice"
    probed = {
        plan
        for plan in enumerated
        if all(
            value in PROBE.get(dim, [value])
            for dim, value in zip(STRUCT_DIMS, plan[: len(STRUCT_DIMS)], strict=True)
        )
    }
    assert probed == brute_force_valid(req)


def test_every_plan_passes_the_structural_rules_and_fewer_gpus_are_allowed() -> None:
    req = request()
    plans = all_plans(req)
    arrays = price(req, plans)
    assert not np.any(arrays["violations"] & ~int(Violation.MEMORY))
    used = set(arrays["num_gpus"].tolist())
    assert 16 in used and 1 in used and 8 in used


def test_canonical_forms_lose_nothing() -> None:
    """What the space leaves out is never better in the cost model: sequence parallelism off
    (tp > 1) and ZeRO stages other than the first on a single data-parallel rank."""
    req = request(constraints={"sequence_parallel": [True, False]})
    plans = all_plans(req)
    arrays = price(req, plans)
    key = [d for d in (*STRUCT_DIMS, *OPTION_DIMS) if d != "sequence_parallel"]
    index = {
        tuple(int(plans[d][i]) for d in key): i
        for i in range(len(plans["tp"]))
        if plans["sequence_parallel"][i]
    }
    pairs = [
        (i, index[k])
        for i in range(len(plans["tp"]))
        if not plans["sequence_parallel"][i]
        and plans["tp"][i] > 1
        and (k := tuple(int(plans[d][i]) for d in key)) in index
    ]
    assert pairs
    without, with_sp = np.array(pairs).T
    assert np.all(arrays["step_time_s"][with_sp] <= arrays["step_time_s"][without] * (1 + 1e-12))
    assert np.all(arrays["peak_memory_gib"][with_sp] <= arrays["peak_memory_gib"][without] + 1e-9)

    one_rank = {"dp": [1] * 4, "cp": [1] * 4, "tp": [2] * 4, "pp": [1] * 4}
    zeros = estimate_many(
        req.model,
        req.training,
        req.cluster,
        {**one_rank, "micro_batch_size": [1] * 4, "zero_stage": [0, 1, 2, 3]},
    )
    assert np.ptp(zeros["step_time_s"]) == pytest.approx(0.0)
    assert np.all(zeros["peak_memory_gib"][1:] >= zeros["peak_memory_gib"][0] - 1e-9)


def test_constraints_shape_the_space() -> None:
    req = request(
        constraints={
            "tp": [1, 2],
            "pp": {"min": 2, "max": 4},
            "recompute": "selective",
            "offload_optimizer": False,
            "num_gpus": {"min": 8},
        }
    )
    plans = all_plans(req)
    assert set(plans["tp"].tolist()) == {1, 2}
    assert set(plans["pp"].tolist()) <= {2, 3, 4}
    assert set(plans["recompute"].tolist()) == {1}
    assert not plans["offload_optimizer"].any()
    assert np.all(plans["dp"] * plans["tp"] * plans["pp"] * plans["cp"] >= 8)


def test_space_size_counts_every_plan_once() -> None:
    (space,) = homogeneous_spaces(request())
    chunks = list(space.chunks(1000))
    assert (
        sum(len(chunk["tp"]) for chunk in chunks) == space.size == len(all_plans(request())["tp"])
    )


def test_several_batch_sizes_give_one_space_each() -> None:
    spaces = homogeneous_spaces(request(global_batch_sizes=[32, 64, 64]))
    assert [space.global_batch_size for space in spaces] == [32, 64]
    for space in spaces:
        plans = space.expand(0, space.num_rows)
        assert np.all(space.global_batch_size % (plans["dp"] * plans["micro_batch_size"]) == 0)
