"""Property tests of the cost model (hypothesis): for any valid spec an estimate is finite and
non-negative or says why the plan cannot run, and it moves the way the physics does.

Deterministic: the profile derandomizes (examples follow from the test's source), so CI sees the
same examples every run; the budgets keep the module to well under a minute on 2 cores.
"""

import math
import re
import warnings
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from costmodel import estimate
from costmodel.hardware import precision_usable
from costmodel.specs import ClusterSpec, Estimate, GpuSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.cluster import MIN_GBPS, MIN_TFLOPS
from search import SearchRequest, run_search

settings.register_profile(
    "costmodel-properties",
    derandomize=True,
    deadline=None,
    max_examples=60,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
PROFILE = settings.get_profile("costmodel-properties")

# The one ValueError a valid spec may raise: a GPU without the training precision has no time.
UNTIMEABLE = re.compile(r"^cluster\.groups\[\d+\]\.gpu: .+ has no .+ tensor throughput")


# Strategies -----------------------------------------------------------------------------------
@st.composite
def models(draw: st.DrawFn) -> ModelSpec:
    heads = draw(st.sampled_from([1, 2, 4, 8, 16]))
    head_dim = draw(st.sampled_from([8, 16, 64, 128]))
    kv = draw(st.sampled_from([h for h in (1, 2, 4, 8, 16) if heads % h == 0]))
    num_layers = draw(st.integers(1, 12))
    moe = None
    if draw(st.booleans()):
        experts = draw(st.sampled_from([2, 4, 8]))
        moe = {
            "num_experts": experts,
            "top_k": draw(st.integers(1, experts)),
            "expert_ffn_hidden_size": draw(st.sampled_from([64, 256, 1024])),
            "first_dense_layers": draw(st.integers(0, min(2, num_layers - 1))),
        }
    return ModelSpec.model_validate(
        {
            "name": "prop",
            "num_layers": num_layers,
            "hidden_size": heads * head_dim,
            "num_attention_heads": heads,
            "num_kv_heads": kv,
            "ffn_hidden_size": draw(st.sampled_from([None, 4 * heads * head_dim, 1000])),
            "vocab_size": draw(st.sampled_from([1000, 32_000, 50_257])),
            "activation": draw(st.sampled_from(["gelu", "swiglu", "relu2"])),
            "tie_embeddings": draw(st.booleans()),
            "moe": moe,
        }
    )


def peaks() -> st.SearchStrategy[float]:
    """A TFLOP/s peak: 0 (unsupported) or anything from the minimum up."""
    return st.one_of(st.just(0.0), st.floats(MIN_TFLOPS, 5000.0))


@st.composite
def gpus(draw: st.DrawFn) -> GpuSpec:
    bf16 = draw(peaks())
    fp32 = draw(st.one_of(st.none(), st.floats(MIN_TFLOPS, 200.0)))
    assume(bf16 > 0 or fp32)  # a GPU with no positive peak is refused by the spec
    return GpuSpec(
        name="prop-gpu",
        bf16_tflops=bf16,
        fp16_tflops=draw(st.one_of(st.none(), peaks())),
        fp8_tflops=draw(st.one_of(st.none(), peaks())),
        fp32_tflops=fp32,
        hbm_gib=draw(st.floats(1.0, 512.0)),
        hbm_GBps=draw(st.floats(MIN_GBPS, 10_000.0)),
        intra_node_GBps=draw(st.floats(MIN_GBPS, 2_000.0)),
        inter_node_GBps=draw(st.floats(MIN_GBPS, 200.0)),
        gemm_efficiency=draw(st.one_of(st.none(), st.floats(0.01, 1.0))),
        price_per_gpu_hour=draw(st.one_of(st.none(), st.floats(0.0, 20.0))),
    )


@dataclass(frozen=True)
class Case:
    model: ModelSpec
    training: TrainingSpec
    gpu: GpuSpec
    num_nodes: int
    gpus_per_node: int
    plan: Plan

    def cluster(self, **changes: Any) -> ClusterSpec:
        group = {
            "name": "g",
            "gpu": changes.pop("gpu", self.gpu),
            "num_nodes": changes.pop("num_nodes", self.num_nodes),
            "gpus_per_node": self.gpus_per_node,
        }
        return ClusterSpec(groups=[group])

    def price(self, **changes: Any) -> Estimate:
        model = changes.pop("model", self.model)
        return estimate(model, self.training, self.cluster(**changes), self.plan)


@st.composite
def cases(
    draw: st.DrawFn, *, precisions: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")
) -> Case:
    model = draw(models())
    gpus_per_node = draw(st.sampled_from([1, 2, 4, 8]))
    num_nodes = draw(st.integers(1, 4))
    dp, tp, pp, cp = (draw(st.sampled_from([1, 2, 4])) for _ in range(4))
    zero = draw(st.integers(0, 3))
    plan = Plan.model_validate(
        {
            "dp": dp,
            "tp": tp,
            "pp": pp,
            "cp": cp,
            "ep": draw(st.sampled_from([1, 2])) if model.moe else 1,
            "micro_batch_size": draw(st.sampled_from([1, 2, 4])),
            "zero_stage": zero,
            "recompute": draw(st.sampled_from(["none", "selective", "full"])),
            "offload_optimizer": draw(st.booleans()) if zero else False,
            "schedule": draw(st.sampled_from(["1f1b", "gpipe"])),
        }
    )
    training = TrainingSpec(
        seq_length=draw(st.sampled_from([128, 512, 2048])),
        global_batch_size=draw(st.sampled_from([8, 16, 64, 96])),
        precision=draw(st.sampled_from(precisions)),
        train_tokens=draw(st.one_of(st.none(), st.floats(1e6, 1e13))),
        flash_attention=draw(st.booleans()),
    )
    return Case(model, training, draw(gpus()), num_nodes, gpus_per_node, plan)


def numbers(result: Estimate) -> dict[str, float]:
    """Every number of an estimate, by path."""
    values: dict[str, float] = {}

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                walk(f"{prefix}.{key}", item)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                walk(f"{prefix}[{index}]", item)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            values[prefix] = float(value)

    walk("estimate", result.model_dump())
    return values


def timeable(case: Case, gpu: GpuSpec | None = None) -> bool:
    return precision_usable(gpu or case.gpu, case.training.precision)


@pytest.fixture(autouse=True)
def _quiet_numpy() -> Any:
    # Overflowing intermediate figures are what the properties look for, not noise to print.
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        yield


# Properties -----------------------------------------------------------------------------------
@PROFILE
@given(cases())
def test_any_valid_spec_is_priced_finite_or_refused_with_a_reason(case: Case) -> None:
    try:
        result = case.price()
    except ValueError as exc:
        # The only refusal a valid spec gets: a GPU lacking the precision, named by field.
        assert not timeable(case), str(exc)
        assert UNTIMEABLE.match(str(exc)), str(exc)
        return
    assert timeable(case)
    for path, value in numbers(result).items():
        assert math.isfinite(value), f"{path} = {value}"
        assert value >= 0, f"{path} = {value}"
    if not result.feasible:
        assert result.reasons, "an infeasible plan says why"
    else:
        assert result.step_time_s > 0 and result.tokens_per_s > 0


@PROFILE
@given(
    cases(),
    st.floats(1.0, 100.0),
    st.sampled_from(["hbm_GBps", "intra_node_GBps", "inter_node_GBps", "all"]),
)
def test_more_bandwidth_is_never_slower(case: Case, factor: float, which: str) -> None:
    assume(timeable(case))
    fields = ["hbm_GBps", "intra_node_GBps", "inter_node_GBps"] if which == "all" else [which]
    faster = case.gpu.model_copy(
        update={name: min(getattr(case.gpu, name) * factor, 1e6) for name in fields}
    )
    before, after = case.price(), case.price(gpu=faster)
    assert after.step_time_s <= before.step_time_s * (1 + 1e-9), (
        before.time_breakdown_s,
        after.time_breakdown_s,
    )


@PROFILE
@given(cases(), st.floats(1.0, 64.0))
def test_more_hbm_is_never_less_feasible(case: Case, factor: float) -> None:
    assume(timeable(case))
    bigger = case.gpu.model_copy(update={"hbm_gib": min(case.gpu.hbm_gib * factor, 1e5)})
    before, after = case.price(), case.price(gpu=bigger)
    if before.feasible:
        assert after.feasible, after.reasons
    assert after.peak_memory_gib == pytest.approx(before.peak_memory_gib)


@PROFILE
@given(cases(), st.integers(1, 11))
def test_fewer_layers_never_need_more_memory(case: Case, fewer: int) -> None:
    assume(timeable(case))
    # Whole layers off every stage: the same layout, lighter. (With a layer count pp does not
    # divide, the default split is time-balanced, and dropping one layer can move another onto
    # the first stage, which holds the most micro-batches in flight: a different layout, which
    # may need more memory -- 2.0013 vs 2.0011 GiB for 5 vs 6 layers on pp=4.)
    step = case.plan.pp
    assume(case.model.num_layers % step == 0)
    layers = case.model.num_layers - fewer * step
    assume(layers >= step)
    if case.model.moe is not None:
        assume(layers > case.model.moe.first_dense_layers)
    smaller = case.model.model_copy(update={"num_layers": layers})
    before, after = case.price(), case.price(model=smaller)
    assert after.peak_memory_gib <= before.peak_memory_gib * (1 + 1e-9), (
        before.per_stage,
        after.per_stage,
    )


@settings(PROFILE, max_examples=12)
@given(
    cases(precisions=("bf16",)),
    st.integers(1, 2),
)
def test_more_gpus_of_one_kind_never_lower_the_best_throughput(case: Case, more: int) -> None:
    assume(timeable(case))
    small = case.model.model_copy(update={"num_layers": min(case.model.num_layers, 4)})
    gpu = case.gpu.model_copy(update={"hbm_gib": max(case.gpu.hbm_gib, 16.0)})

    def best(num_nodes: int) -> float:
        request = SearchRequest(
            model=small,
            training=case.training,
            cluster=case.cluster(gpu=gpu, num_nodes=num_nodes),
            objective="throughput",
            sampler="exhaustive",
            top_k=1,
            max_memory_fraction=1.0,
        )
        result = run_search(request)
        return result.plans[0].estimate.tokens_per_s if result.plans else 0.0

    nodes = min(case.num_nodes, 2)
    assert best(nodes + more) >= best(nodes) * (1 - 1e-9)
