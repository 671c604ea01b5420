"""One rule table: the homogeneous estimate, the heterogeneous estimate and the search space
apply the same structural rules (``costmodel.rules``)."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from costmodel import estimate, estimate_many
from costmodel.catalog import load_preset
from costmodel.feasibility import Violation
from search import SearchRequest
from search.space import STRUCT_DIMS, homogeneous_spaces

MODEL = load_preset("model", "mixtral-8x7b")  # 32 layers, 8 experts: every rule applies
TRAINING = load_preset("training", "llama2-4k").model_copy(update={"global_batch_size": 64})
CLUSTER = {"name": "h100x32", "groups": [{"name": "h100", "gpu": "H100-80GB", "num_nodes": 4}]}
STRUCTURAL = ~int(Violation.MEMORY)

plans = st.fixed_dictionaries(
    {
        "dp": st.sampled_from([1, 2, 3, 4, 8]),
        "tp": st.sampled_from([1, 2, 3, 4, 8]),
        "pp": st.sampled_from([1, 2, 3, 5, 8, 40]),
        "cp": st.sampled_from([1, 2, 3]),
        "ep": st.sampled_from([1, 2, 3, 8]),
        "etp": st.sampled_from([0, 1]),
        "vpp": st.sampled_from([1, 2, 3]),
        "micro_batch_size": st.sampled_from([1, 2, 3]),
    }
)


@settings(max_examples=60, deadline=None)
@given(plan=plans)
def test_both_estimates_agree_with_the_rule_table(plan):
    """A homogeneous plan and the same plan written as explicit stages on one group break the
    same per-stage rules (heads, KV heads, FFN width, experts, cp, precision)."""
    if plan["pp"] == 1:
        plan["vpp"] = 1
    many = estimate_many(MODEL, TRAINING, CLUSTER, {k: [v] for k, v in plan.items()})
    spec = {k: v for k, v in plan.items() if not (k == "etp" and v == 0)}
    homogeneous = estimate(MODEL, TRAINING, CLUSTER, spec)
    assert homogeneous.feasible == bool(many["feasible"][0])
    per_stage = (
        Violation.HEADS_TP | Violation.KV_HEADS_TP | Violation.FFN_TP | Violation.EXPERTS_EP
        | Violation.SEQ_CP
    )  # fmt: skip
    broken_here = int(many["violations"][0]) & int(per_stage)
    layers = MODEL.num_layers // plan["pp"] if MODEL.num_layers % plan["pp"] == 0 else None
    if layers is None or plan["etp"] or plan["ep"] > 1:
        return  # explicit stages split evenly and have no expert folding to compare
    stages = [{"group": "h100", "num_layers": layers, "tp": plan["tp"]}] * plan["pp"]
    explicit = estimate(
        MODEL, TRAINING, CLUSTER,
        {**{k: v for k, v in plan.items() if k != "etp"}, "stages": stages},
    )  # fmt: skip
    worded = any(reason.startswith("stage ") for reason in explicit.reasons)
    assert worded == bool(broken_here), (plan, explicit.reasons, many["violations"][0])


def test_the_search_space_is_what_the_rule_table_allows():
    """Every row the space lists passes every structural rule."""
    request = SearchRequest(model=MODEL, training=TRAINING, cluster=CLUSTER)
    for space in homogeneous_spaces(request):
        columns = space.expand(0, space.num_rows)
        arrays = estimate_many(MODEL, TRAINING, CLUSTER, columns)
        assert not np.any(arrays["violations"] & STRUCTURAL)
        assert set(STRUCT_DIMS) <= set(columns)
