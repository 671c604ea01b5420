"""Every Estimate says how big the model is and what its layout hides: parameter counts, a
warning when tensor- or expert-parallel groups leave a node, and heterogeneous plans in words
(which group runs which stages, why a group is unused, where cross-zone traffic goes)."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from costmodel import estimate
from costmodel.catalog import load_spec
from costmodel.flops import total_params
from costmodel.hardware import resolve_gpu
from tests.support.paths import REPO_ROOT

TRAINING = load_spec("training", "llama3-8k")
MIXED = load_spec("cluster", "mixed-h100-a100-2zone")
DGX_16N = load_spec("cluster", "dgx-h100-16n")
FULL = {"micro_batch_size": 1, "recompute": "full", "zero_stage": 1}


def cluster(gpus_per_node: int, nodes: int = 8, gpu: object = "H100-80GB") -> dict:
    group = {"name": "g", "gpu": gpu, "num_nodes": nodes, "gpus_per_node": gpus_per_node}
    return {"name": "c", "groups": [group]}


def test_a_moe_estimate_counts_total_and_active_parameters() -> None:
    model = load_spec("model", "mixtral-8x7b")
    result = estimate(model, TRAINING, DGX_16N, {"dp": 16, "tp": 2, "pp": 4, "ep": 4, **FULL})
    assert result.total_params == pytest.approx(46.7e9, rel=0.005)  # Mistral: 46.7B
    # Mistral quotes 12.9B active with the input embedding; the lookup table (0.13B) is no
    # matmul, so costmodel.flops.active_params leaves it out (DeepSeek's convention).
    assert result.active_params == pytest.approx(12.9e9, rel=0.02)
    assert result.active_params < result.total_params / 3


def test_a_dense_estimate_counts_every_weight() -> None:
    model = load_spec("model", "llama3-70b")
    result = estimate(model, TRAINING, DGX_16N, {"dp": 4, "tp": 8, "pp": 4, **FULL})
    assert result.total_params == total_params(model) == pytest.approx(70.6e9, rel=0.01)
    assert result.active_params == result.total_params - model.vocab_size * model.hidden_size


@pytest.mark.parametrize(
    ("gpus_per_node", "tp", "expected"),
    [
        (7, 8, "spans 2 nodes"),  # feasible, but TP then crosses the network
        (6, 4, "straddle two nodes"),
        (8, 8, None),
        (8, 4, None),
    ],
)
def test_tensor_parallel_groups_that_leave_a_node_are_warned_about(
    gpus_per_node: int, tp: int, expected: str | None
) -> None:
    model = load_spec("model", "llama3-8b")
    plan = {"dp": 1, "tp": tp, "pp": 1, **FULL}
    result = estimate(model, TRAINING, cluster(gpus_per_node), plan)
    tp_warnings = [w for w in result.warnings if w.startswith(f"tp {tp}")]
    if expected is None:
        assert tp_warnings == []
    else:
        assert len(tp_warnings) == 1 and expected in tp_warnings[0]


def test_an_nvlink_domain_wider_than_a_node_keeps_tp_inside() -> None:
    nvl72 = resolve_gpu("H100-80GB").model_copy(update={"name": "nvl", "nvlink_domain_gpus": 72})
    model = load_spec("model", "llama3-70b")
    plan = {"dp": 1, "tp": 8, "pp": 1, **FULL}
    assert estimate(model, TRAINING, cluster(4, nodes=18, gpu=nvl72), plan).warnings == []
    assert "spans 2 nodes" in estimate(model, TRAINING, cluster(4, nodes=18), plan).warnings[0]


def test_expert_parallel_groups_that_leave_a_node_are_warned_about() -> None:
    model = load_spec("model", "mixtral-8x7b")
    # tp 2: expert ranks 2 apart, so 4 of an ep 8 group share a node of 8 GPUs.
    wide = estimate(model, TRAINING, cluster(8, 16), {"dp": 32, "tp": 2, "pp": 2, "ep": 8, **FULL})
    assert any("every expert-parallel group spans 2 nodes" in w for w in wide.warnings)
    narrow = estimate(
        model, TRAINING, cluster(8, 16), {"dp": 32, "tp": 2, "pp": 2, "ep": 4, **FULL}
    )
    assert narrow.warnings == []


def test_a_heterogeneous_plan_says_who_runs_what_and_where_traffic_crosses_zones() -> None:
    model = load_spec("model", "llama3-70b")
    stages = [
        {"num_layers": 24, "group": "h100", "tp": 8, "dp": 2},
        *({"num_layers": n, "group": "a100-80", "tp": 8, "dp": 2} for n in (16, 20, 20)),
    ]
    plan = {"dp": 2, "tp": 8, "pp": 4, "stages": stages, **FULL}
    result = estimate(model, TRAINING, MIXED, plan)
    assert result.notes[:2] == [
        "stage 0 (layers 1-24) runs on 'h100' (H100-80GB, zone us-east) with tp 8 and dp 2: "
        "16 GPUs",
        "stages 1-3 (layers 25-80) run on 'a100-80' (A100-80GB, zone us-west) with tp 8 and "
        "dp 2: 48 GPUs",
    ]
    assert "'h100' uses 16 of its 64 GPUs" in result.notes
    unused = [note for note in result.notes if note.startswith("'a100-40'")]
    assert len(unused) == 1 and "is unused" in unused[0]
    assert "slower" in unused[0] and "less memory per GPU (40 vs 80 GiB)" in unused[0]
    crossing = [w for w in result.warnings if "zone link" in w]
    assert len(crossing) == 1
    assert crossing[0].startswith(
        "pipeline traffic between stages 0 and 1 crosses the us-east-us-west zone link: "
        "12.5 GB/s shared by 16 sends at once, 30 ms"
    )


def test_a_group_in_another_zone_is_unused_for_that_reason() -> None:
    model = load_spec("model", "llama3-70b")
    stages = [{"num_layers": 40, "group": "a100-80", "tp": 8, "dp": 2}] * 2
    stages = [stages[0], {**stages[1], "group": "a100-40"}]
    result = estimate(model, TRAINING, MIXED, {"dp": 2, "tp": 8, "pp": 2, "stages": stages, **FULL})
    (h100,) = [note for note in result.notes if note.startswith("'h100'")]
    assert "sits in zone us-east, away from the stages in us-west" in h100
    assert "12.5 GB/s, 30 ms zone link" in h100
    assert not [w for w in result.warnings if "zone link" in w]  # both stages in us-west


def estimate_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "estimate", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_autopar_estimate_shows_parameters_and_warnings(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(yaml.safe_dump(cluster(7)))
    (tmp_path / "plan.yaml").write_text(yaml.safe_dump({"dp": 7, "tp": 8, "pp": 1, **FULL}))
    specs = ["-m", "mixtral-8x7b", "-t", "llama3-8k", "-c", str(tmp_path / "cluster.yaml")]
    specs += ["-p", str(tmp_path / "plan.yaml")]
    text = estimate_cli(*specs)
    output = " ".join(text.stdout.split())  # rich wraps long lines
    assert "46.70 B total" in output and "12.75 B" in output
    assert "warning: tp 8 is wider than a node of 'g' (7 GPUs)" in output
    document = json.loads(estimate_cli(*specs, "--json").stdout)
    assert document["total_params"] == pytest.approx(46.7e9, rel=0.005)
    assert any("spans 2 nodes" in w for w in document["warnings"])
