"""``autopar search`` as users run it: JSON on stdout, a table for people, one-line errors."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

import costmodel
from app.cli.calibration_store import save_calibration
from app.cli.search_cmd import layout, parse_constraints
from costmodel.calibration import fit_calibration
from costmodel.catalog import load_spec
from costmodel.params import DEFAULT_PARAMS
from costmodel.specs import Plan
from tests.support.calibration_data import measured, unmeasured_profile
from tests.support.paths import REPO_ROOT

SMALL = ["--model", "llama3-8b", "--training", "llama3-8k", "--cluster", "dgx-a100-1n"]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", "search", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_json_output_lists_ranked_plans_and_how_the_search_went() -> None:
    result = run_cli(*SMALL, "--top", "3", "--json", "--max-memory-fraction", "0.9")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert {"plans", "evaluated", "feasible", "elapsed_s", "sampler", "objective"} <= set(document)
    assert document["sampler"] == "exhaustive" and document["objective"] == "throughput"
    assert [plan["rank"] for plan in document["plans"]] == [1, 2, 3]
    for entry in document["plans"]:
        assert {"rank", "plan", "estimate"} <= set(entry)
        assert entry["estimate"]["feasible"]
        assert entry["estimate"]["peak_memory_gib"] <= 0.9 * 80
    speeds = [entry["estimate"]["tokens_per_s"] for entry in document["plans"]]
    assert speeds == sorted(speeds, reverse=True)
    assert document["feasible"] <= document["evaluated"] == document["space_size"]


def test_table_output_and_optuna_sampler() -> None:
    result = run_cli(*SMALL, "--sampler", "tpe", "--trials", "20", "--seed", "1", "-C", "tp=1..4")
    assert result.returncode == 0, result.stderr
    assert "Best plans" in result.stdout
    assert "tpe: evaluated" in result.stdout and "20 trials" in result.stdout


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--trials", "0"], "error: trials: Input should be greater than or equal to 1"),
        (["-C", "tp=5"], "error: constraints.tp: no allowed value is valid"),
        (["-C", "tp"], "error: --constraint 'tp': expected DIM=VALUE"),
        (["--objective", "speed"], "error: objective: Input should be"),
        (["--model", "nope"], "error: unknown model 'nope'"),
    ],
)
def test_bad_input_is_one_line_on_stderr_with_status_2(args: list[str], expected: str) -> None:
    result = run_cli(*SMALL, *args)
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), result.stderr


def test_constraint_syntax() -> None:
    assert parse_constraints(
        ["tp=8", "pp=2..8", "dp=..16", "recompute=selective,full", "offload_optimizer=false"]
    ) == {
        "tp": 8,
        "pp": {"min": 2, "max": 8},
        "dp": {"min": None, "max": 16},
        "recompute": ["selective", "full"],
        "offload_optimizer": False,
    }


def test_layout_text_names_stages_and_groups() -> None:
    plan = load_spec("plan", "mixed-2zone-pp4")
    assert layout(plan) == (
        "dp8 h100:32L tp8 → a100-80:18L tp8 → a100-80:18L tp8 → a100-40:12L tp8"
    )
    assert layout(load_spec("plan", "tp8-pp8-dp16")) == "dp16 tp8 pp8 vpp3"


def test_a_calibration_prices_the_search(tmp_path: Path) -> None:
    """Plans ranked with a stored calibration carry its prices: GEMMs at half the efficiency
    make every plan slower than the uncalibrated search says."""
    slow = DEFAULT_PARAMS.model_copy(update={"gemm_efficiency_scale": 0.5})
    profiles, _ = measured([unmeasured_profile()], [], slow)
    result = fit_calibration(profiles, [], params=["gemm_efficiency_scale"])
    calibration, _ = save_calibration(tmp_path, "half-gemm", result, inputs={})
    args = [*SMALL, "--top", "1", "--json"]
    plain = json.loads(run_cli(*args).stdout)["plans"][0]
    calibrated_run = run_cli(*args, "--calibration", str(tmp_path / "half-gemm" / "v1.json"))
    assert calibrated_run.returncode == 0, calibrated_run.stderr
    calibrated = json.loads(calibrated_run.stdout)["plans"][0]
    expected = costmodel.estimate(
        load_spec("model", "llama3-8b"),
        load_spec("training", "llama3-8k"),
        load_spec("cluster", "dgx-a100-1n"),
        Plan.model_validate(calibrated["plan"]),
        params=calibration.params,
    )
    assert calibrated["estimate"]["step_time_s"] == pytest.approx(expected.step_time_s)
    assert calibrated["estimate"]["step_time_s"] > 1.2 * plain["estimate"]["step_time_s"]
    missing = run_cli(*args, "--calibration", "no-such-calibration@1")
    assert missing.returncode == 2 and missing.stderr.startswith("error: --calibration: ")


def test_a_search_where_nothing_fits_exits_3() -> None:
    """Llama 3 70B on one 8-GPU A100 node without tensor or pipeline parallelism and without
    offload: even fully sharded (18 B/param / 8 = 158 GB per GPU) nothing fits, and an empty
    ranking is a non-zero exit."""
    result = run_cli(
        "-m", "llama3-70b", "-t", "llama3-8k", "-c", "dgx-a100-1n",
        "-C", "tp=1", "-C", "pp=1", "-C", "offload_optimizer=false", "--json",
    )  # fmt: skip
    assert result.returncode == 3, result.stderr
    assert json.loads(result.stdout)["plans"] == []
    assert result.stderr.strip().splitlines()[-1].startswith("error: no plan fits: ")
