"""Searches keep memory headroom by default (the memory estimate is good to about 15%), and the
search table shows one row per layout with its near-ties and the plans' warnings."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from costmodel import estimate
from costmodel.catalog import load_spec
from costmodel.hardware import resolve_gpu
from search.objectives import DEFAULT_MAX_MEMORY_FRACTION
from tests.support.paths import REPO_ROOT

PLAN = {
    "dp": 1,
    "tp": 8,
    "pp": 1,
    "cp": 1,
    "vpp": 1,
    "micro_batch_size": 1,
    "zero_stage": 0,
    "recompute": "none",
    "sequence_parallel": True,
    "offload_optimizer": False,
}


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "search", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},  # a wide terminal: table rows stay on one line
    )


@pytest.fixture
def tight_cluster(tmp_path: Path) -> Path:
    """One node whose GPUs hold PLAN at 95% of their memory."""
    model, training = load_spec("model", "llama3-8b"), load_spec("training", "llama3-8k")
    gpu = resolve_gpu("A100-80GB").model_copy(update={"name": "A100-tight", "hbm_gib": 1000.0})
    spec = {
        "name": "tight",
        "groups": [{"name": "g", "gpu": gpu.model_dump(), "num_nodes": 1, "gpus_per_node": 8}],
    }
    peak = estimate(model, training, spec, PLAN).peak_memory_gib
    spec["groups"][0]["gpu"]["hbm_gib"] = peak / 0.95
    assert estimate(model, training, spec, PLAN).feasible  # it fits, at 95%
    path = tmp_path / "tight.yaml"
    path.write_text(yaml.safe_dump(spec))
    return path


def only_plan() -> list[str]:
    return [arg for dim, value in PLAN.items() for arg in ("-C", f"{dim}={str(value).lower()}")]


def test_the_default_headroom_is_ten_percent() -> None:
    assert DEFAULT_MAX_MEMORY_FRACTION == 0.9


def test_a_plan_at_95_percent_of_memory_is_not_returned_by_default(tight_cluster: Path) -> None:
    specs = ["-m", "llama3-8b", "-t", "llama3-8k", "-c", str(tight_cluster), *only_plan()]
    default = run_cli(*specs, "--json")
    assert default.returncode == 3, default.stderr
    assert "no plan fits" in default.stderr
    assert json.loads(default.stdout)["plans"] == []
    assert any("max_memory_fraction=0.9" in note for note in json.loads(default.stdout)["notes"])
    # Headroom is overridable: with all the memory allowed, the same search returns the plan.
    everything = run_cli(*specs, "--json", "--max-memory-fraction", "1")
    assert everything.returncode == 0, everything.stderr
    (ranked,) = json.loads(everything.stdout)["plans"]
    estimate_ = ranked["estimate"]
    assert estimate_["peak_memory_gib"] / estimate_["per_stage"][0]["capacity_gib"] == (
        pytest.approx(0.95)
    )


def test_the_table_has_one_row_per_layout_with_its_near_ties() -> None:
    result = run_cli("-m", "llama3-8b", "-t", "llama3-8k", "-c", "dgx-a100-8n", "--top", "5")
    assert result.returncode == 0, result.stderr
    assert "one row per layout" in result.stdout
    rows = [line for line in result.stdout.splitlines() if line.startswith("│ ")]
    ranks = [row.split("│")[1].strip().rstrip("!") for row in rows]
    assert [rank for rank in ranks if rank] == ["1", "2", "3", "4", "5"]
    noted = [row for row in rows if "equivalent" in row]  # "+N equivalent" under the layout
    assert noted
    # and what each near-tie differs in, under the table: "#1 ≈ dp16 cp4 mbs2 (220,946)".
    assert len([line for line in result.stdout.splitlines() if " ≈ " in line]) == len(noted)


def test_the_table_lists_the_plans_warnings(tmp_path: Path) -> None:
    spec = {
        "name": "c",
        "groups": [{"name": "g7", "gpu": "H100-80GB", "num_nodes": 4, "gpus_per_node": 7}],
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(spec))
    result = run_cli(
        "-m",
        "llama3-70b",
        "-t",
        "llama3-8k",
        "-c",
        str(tmp_path / "c.yaml"),
        "-C",
        "tp=8",
        "--top",
        "2",
    )
    assert result.returncode == 0, result.stderr
    text = " ".join(result.stdout.split())
    assert "#1: tp 8 is wider than a node of 'g7' (7 GPUs)" in text
