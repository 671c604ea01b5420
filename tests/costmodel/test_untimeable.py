"""Plans that cannot be timed and hardware figures that are not real: refused with the field and
the reason, never priced into NaN or infinite numbers (issue 13)."""

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from pydantic import ValidationError

from costmodel import estimate
from costmodel.catalog import load_spec
from costmodel.errors import SpecError, format_validation_error
from costmodel.hardware import lookup_gpu, precision_gap, precision_usable
from costmodel.specs import ClusterSpec, GpuSpec, MoESpec, Plan
from search import SearchRequest

PLAN = {"dp": 8, "tp": 1, "pp": 1, "micro_batch_size": 1}
# A hypothetical FP8-only accelerator: its GEMMs have a peak, its (BF16) attention has none.
FP8_ONLY = {"name": "fp8-only", "bf16_tflops": 0, "fp16_tflops": 0, "fp8_tflops": 1000,
            "fp32_tflops": 10, "hbm_gib": 80, "hbm_GBps": 3000}  # fmt: skip


def _cluster(*gpus: str | dict[str, Any]) -> ClusterSpec:
    return ClusterSpec(
        groups=[{"name": f"g{i}", "gpu": gpu, "num_nodes": 1} for i, gpu in enumerate(gpus)]
    )


def test_v100_under_bf16_is_an_error_naming_the_gpu_and_the_way_out() -> None:
    with pytest.raises(ValueError) as caught:
        estimate(
            load_spec("model", "gpt-1.7b"),
            load_spec("training", "gpt3-2k"),
            _cluster("V100-32GB"),
            PLAN,
        )
    assert str(caught.value) == (
        "cluster.groups[0].gpu: V100-32GB has no BF16 tensor throughput; use fp16, tf32 or fp32 "
        "precision"
    )


def test_fp8_needs_bf16_attention_too() -> None:
    gpu = GpuSpec(**FP8_ONLY)
    assert not precision_usable(gpu, "fp8")
    assert (
        precision_gap(gpu, "fp8")
        == "fp8-only has no BF16 tensor throughput; use tf32 or fp32 precision"
    )
    training = {"seq_length": 1024, "global_batch_size": 64, "precision": "fp8"}
    with pytest.raises(ValueError, match=r"^cluster\.groups\[1\]\.gpu: fp8-only has no BF16"):
        estimate(load_spec("model", "gpt-1.7b"), training, _cluster("H100-80GB", FP8_ONLY),
                 {**PLAN, "group": "g1"})  # fmt: skip


def test_a_heterogeneous_plan_names_the_group_that_cannot_time_it() -> None:
    stages = [{"num_layers": 12, "group": "g0"}, {"num_layers": 12, "group": "g1"}]
    plan = {"dp": 1, "tp": 8, "pp": 2, "micro_batch_size": 1, "stages": stages}
    with pytest.raises(ValueError, match=r"^cluster\.groups\[1\]\.gpu: V100-32GB"):
        estimate(load_spec("model", "gpt-1.7b"), load_spec("training", "gpt3-2k"),
                 _cluster("H100-80GB", "V100-32GB"), plan)  # fmt: skip


def test_a_search_leaves_out_a_group_whose_attention_it_could_not_time() -> None:
    # Before, the FP8-only group passed the precision check, its NaN stage times reached the
    # heterogeneous layer balancer, and the search never finished.
    request = SearchRequest(
        model="gpt-1.7b",
        training={"seq_length": 1024, "global_batch_size": 64, "precision": "fp8"},
        cluster=_cluster(FP8_ONLY, "H100-80GB"),
        trials=5,
    )
    assert [group.name for group in request.search_groups] == ["g1"]
    with pytest.raises(ValidationError, match="fp8-only"):
        SearchRequest(
            model="gpt-1.7b",
            training={"seq_length": 1024, "global_batch_size": 64, "precision": "fp8"},
            cluster=_cluster(FP8_ONLY),
            trials=5,
        )


def _gpu_error(**fields: Any) -> str:
    spec = {"name": "x", "bf16_tflops": 100.0, "hbm_gib": 80, "hbm_GBps": 2000, **fields}
    with pytest.raises(ValidationError) as caught:
        GpuSpec.model_validate(spec)
    return format_validation_error(caught.value, prefix="gpu")


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"bf16_tflops": 5e-324}, "gpu.bf16_tflops: a peak is 0 (unsupported) or at least 0.001"),
        ({"fp8_tflops": 1e-9}, "gpu.fp8_tflops: a peak is 0 (unsupported) or at least 0.001"),
        ({"bf16_tflops": 0}, "gpu: every TFLOP/s peak is 0"),
        ({"bf16_tflops": 0, "fp16_tflops": 0, "fp8_tflops": 100}, "gpu: every TFLOP/s peak is 0"),
        ({"hbm_GBps": 1e-300}, "gpu.hbm_GBps: Input should be greater than or equal to 0.001"),
        ({"inter_node_GBps": 0}, "gpu.inter_node_GBps: Input should be greater than or equal"),
        ({"hbm_gib": 1e-30}, "gpu.hbm_gib: Input should be greater than or equal to 0.001"),
        ({"gemm_efficiency": 1e-6}, "gpu.gemm_efficiency: Input should be greater than or equal"),
        ({"bf16_tflops": float("inf")}, "gpu.bf16_tflops: Input should be a finite number"),
        ({"price_per_gpu_hour": False}, "gpu.price_per_gpu_hour: Input should be a number, not a"),
        ({"nvlink_domain_gpus": True}, "gpu.nvlink_domain_gpus: Input should be an integer, not"),
    ],
)
def test_unreal_hardware_figures_are_refused(fields: dict[str, Any], message: str) -> None:
    assert _gpu_error(**fields).startswith(message)


def test_v100s_zero_bf16_is_still_a_gpu() -> None:
    assert lookup_gpu("V100-32GB").bf16_tflops == 0


def test_booleans_are_refused_but_numbers_keep_their_lax_forms(tmp_path: Path) -> None:
    with pytest.raises(ValidationError, match="not a boolean"):
        MoESpec(num_experts=4, top_k=1, expert_ffn_hidden_size=64, first_dense_layers=False)
    # numpy scalars (the search builds plans from arrays) and ints for floats still pass.
    plan = Plan(dp=np.int64(1), tp=1, pp=1, micro_batch_size=1, batch_shares=[1])
    assert plan.dp == 1 and plan.batch_shares == [1.0]
    # YAML 1.1 reads 1e12 (no dot) as a string; the CLI's files keep working.
    path = tmp_path / "t.yaml"
    path.write_text("seq_length: 2048\nglobal_batch_size: 8\ntrain_tokens: 1e12\n")
    assert load_spec("training", str(path)).train_tokens == 1e12
    path.write_text("seq_length: 2048\nglobal_batch_size: true\n")
    with pytest.raises(
        SpecError, match=r"training\.global_batch_size: Input should be an integer, not"
    ):
        load_spec("training", str(path))
