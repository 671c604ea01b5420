"""The validation harness (app/validation): row parsing, the recompute fallback, the report, the
CLI, and the uncalibrated model's accuracy on the shipped data set (validation/)."""

from tests.support.paths import REPO_ROOT
import ast
import csv
import json
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from app.validation import Case, DataSetError, Exclusion, Report, run, scoring
from app.validation.devset import DEV_SET_IDS
from app.validation.report import format_markdown, format_text, to_dict
from app.validation.rows import build_case, read_rows
from app.validation.scoring import Outcome, predict, sweep_figures
from costmodel.params import EfficiencyParams
from costmodel.specs import (
    ClusterSpec,
    Estimate,
    MemoryBreakdown,
    ModelSpec,
    Plan,
    TimeBreakdown,
    TrainingSpec,
)

DATA_DIR = REPO_ROOT / "validation"


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return {row["id"]: row for row in read_rows(DATA_DIR)}


@pytest.fixture(scope="module")
def report() -> Report:
    return run(DATA_DIR)


def case_of(rows: dict[str, dict[str, str]], row_id: str) -> Case:
    built = build_case(rows[row_id])
    assert isinstance(built, Case), built
    return built


def run_cli(*args: str, cwd: Path = REPO_ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", "from app.cli import main; main()", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


# Rows -> cases ----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "row_id",
    [
        "torchtitan_asynctp_03",
        "torchtitan_h200_trainy_1",
        "nemo2407_05",
        "dgxc2411_llama31_8b_fp8_8",
    ],
)
def test_fp8_rows_price_fp8_gemms(rows: dict[str, dict[str, str]], row_id: str) -> None:
    case = case_of(rows, row_id)
    assert case.training.precision == "fp8"
    assert case.precision_class == "FP8"


def test_sixteen_bit_rows_keep_their_precision(rows: dict[str, dict[str, str]]) -> None:
    assert case_of(rows, "korth_22B_full").training.precision == "fp16"
    assert case_of(rows, "dgxc2411_llama31_8b_bf16_8").training.precision == "bf16"


def test_dgxc_row_states_layout_but_not_recompute(rows: dict[str, dict[str, str]]) -> None:
    case = case_of(rows, "dgxc2411_llama31_70b_bf16_64")
    assert not case.recompute_stated
    assert case.gpu.name == "H100-80GB"
    assert case.generation == "H100-class"
    # TP=4, PP=4, CP=2, VP=5, MBS=1 from the table title; dp = 64 / (4*4*2).
    plan = case.plan
    assert (plan.tp, plan.pp, plan.cp, plan.vpp, plan.dp, plan.micro_batch_size) == (
        4,
        4,
        2,
        5,
        2,
        1,
    )
    assert plan.zero_stage == 1  # NeMo's distributed optimizer, not stated by the source
    assert plan.sequence_parallel is None  # unstated: Megatron's default (on when tp > 1)
    assert "recompute not stated: least that fits" in case.assumptions


def test_grok_row_is_an_moe_model_with_ep_folded_into_dp(rows: dict[str, dict[str, str]]) -> None:
    row = rows["dgxc2411_grok1_bf16_2048"]
    case = case_of(rows, "dgxc2411_grok1_bf16_2048")
    moe = case.model.moe
    assert moe is not None and case.architecture == "MoE"
    assert (moe.num_experts, moe.top_k, moe.expert_ffn_hidden_size) == (8, 2, 32768)
    assert case.model.activation == "swiglu"  # GeGLU experts: three matrices
    plan = case.plan
    assert plan.ep == 8
    # The source lists DP=4 (replicas of the EP group); the cost model counts all data ranks.
    assert row["dp"] == "4"
    assert plan.dp == 2048 // (plan.tp * plan.pp * plan.cp) == 32
    assert (plan.dp * plan.cp) % plan.ep == 0


def test_jax_fsdp_dp_rows_are_hybrid_sharded(rows: dict[str, dict[str, str]]) -> None:
    """MaxText's FSDP+DP: states sharded over the stated FSDP group, replicated across it."""
    case = case_of(rows, "dgxc2411_maxtext_70b_bf16_512")
    assert case.plan.zero_stage == 3
    assert case.plan.dp == 512
    assert "FSDP size 128" in rows["dgxc2411_maxtext_70b_bf16_512"]["zero_stage_or_fsdp"]
    assert case.plan.dp_shard == 128


def test_gpt3_rows_without_vocab_take_the_gpt2_bpe(rows: dict[str, dict[str, str]]) -> None:
    assert rows["dgxc2411_paxml_175b_fp8_128"]["vocab"] == ""
    assert case_of(rows, "dgxc2411_paxml_175b_fp8_128").model.vocab_size == 50257


@pytest.mark.parametrize(
    ("row_id", "reason"),
    [
        ("palm_540b", "GPU 'TPU v4' is not a catalog GPU"),
        ("meg21_t2_07", "not stated: tp, pp"),
        ("meg21_t1_01", "not stated: micro_batch"),
        ("gptneox_20b", "not stated: vocab"),
    ],
)
def test_inexpressible_rows_name_their_reason(
    rows: dict[str, dict[str, str]], row_id: str, reason: str
) -> None:
    assert build_case(rows[row_id]) == Exclusion(row_id, reason)


def test_layout_that_does_not_add_up_is_excluded(rows: dict[str, dict[str, str]]) -> None:
    row = {**rows["dgxc2411_llama31_70b_bf16_64"], "dp": "3"}
    assert build_case(row) == Exclusion(row["id"], "dp*tp*pp*cp does not match num_gpus")


def test_plan_the_cost_model_rejects_is_excluded_with_its_reason(
    rows: dict[str, dict[str, str]],
) -> None:
    # 80 layers have no split over 4 stages of 7 chunks each (not even counting the embedding
    # and loss as layers): that cannot be the run the source made.
    row = {**rows["dgxc2411_llama31_70b_bf16_64"], "vpp": "7"}
    case = build_case(row)
    assert isinstance(case, Case)
    result = predict(case)
    assert isinstance(result, Exclusion)
    assert "cannot have run" in result.reason and "num_layers=80" in result.reason


# The recompute fallback -------------------------------------------------------------------------
def _fake_estimate(fits: set[str], tried: list[str]) -> Callable[..., Estimate]:
    """An ``estimate`` stand-in: feasible only for the recompute modes in ``fits``."""

    def fake(
        model: ModelSpec,
        training: TrainingSpec,
        cluster: ClusterSpec,
        plan: Plan,
        *,
        params: EfficiencyParams | None = None,
    ) -> Estimate:
        tried.append(plan.recompute)
        feasible = plan.recompute in fits
        return Estimate(
            feasible=feasible,
            reasons=[] if feasible else ["out of memory: stage 0 needs 99 GiB"],
            num_gpus=1,
            step_time_s=1.0,
            tokens_per_s=1.0,
            tokens_per_s_per_gpu={"none": 3.0, "selective": 2.0, "full": 1.0}[plan.recompute],
            model_tflops_per_gpu=1.0,
            mfu=0.5,
            hfu=0.5,
            peak_memory_gib=99.0 if not feasible else 50.0,
            memory_gib=MemoryBreakdown(),
            per_stage=[],
            time_breakdown_s=TimeBreakdown(),
        )

    return fake


@pytest.mark.parametrize(
    ("fits", "chosen", "tried"),
    [
        ({"none", "selective", "full"}, "none", ["none"]),
        ({"selective", "full"}, "selective", ["none", "selective"]),
        ({"full"}, "full", ["none", "selective", "full"]),
    ],
)
def test_unstated_recompute_takes_the_least_that_fits(
    rows: dict[str, dict[str, str]],
    monkeypatch: pytest.MonkeyPatch,
    fits: set[str],
    chosen: str,
    tried: list[str],
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(scoring, "estimate", _fake_estimate(fits, calls))
    outcome = predict(case_of(rows, "dgxc2411_llama31_70b_bf16_64"))
    assert isinstance(outcome, Outcome)
    assert (outcome.plan.recompute, outcome.recompute_chosen, outcome.feasible) == (
        chosen,
        chosen,
        True,
    )
    assert calls == tried


def test_when_nothing_fits_the_row_stays_as_a_predicted_oom(
    rows: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scoring, "estimate", _fake_estimate(set(), []))
    outcome = predict(case_of(rows, "dgxc2411_llama31_70b_bf16_64"))
    assert isinstance(outcome, Outcome)
    assert not outcome.feasible and outcome.plan.recompute == "full"


def test_stated_recompute_is_priced_as_stated(
    rows: dict[str, dict[str, str]], monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    monkeypatch.setattr(scoring, "estimate", _fake_estimate({"none"}, calls))
    outcome = predict(case_of(rows, "korth_22B_full"))
    assert isinstance(outcome, Outcome)
    assert calls == ["full"] and outcome.recompute_chosen is None and not outcome.feasible


def test_real_fallback_choices_are_the_first_feasible_rung(report: Report) -> None:
    ladder = list(scoring.RECOMPUTE_LADDER)
    chosen = [o for o in report.outcomes if o.recompute_chosen is not None and o.feasible]
    assert len(chosen) >= 100  # every dgxc row, among others
    for outcome in chosen[::10]:
        for mode in ladder[: ladder.index(outcome.plan.recompute)]:
            stated = replace(
                outcome.case,
                recompute_stated=True,
                plan=outcome.plan.model_copy(update={"recompute": mode}),
            )
            tried = predict(stated)
            assert isinstance(tried, Outcome) and not tried.feasible, (outcome.case.row_id, mode)


# The report -------------------------------------------------------------------------------------
def test_every_row_is_scored_or_excluded_once(report: Report) -> None:
    with (DATA_DIR / "runs.csv").open(newline="", encoding="utf-8") as handle:
        ids = [row["id"] for row in csv.DictReader(handle)]
    seen = [o.case.row_id for o in report.outcomes] + [e.row_id for e in report.excluded]
    assert sorted(seen) == sorted(ids)
    assert report.total_rows == len(ids)


def test_report_slices_partition_the_scored_rows(report: Report) -> None:
    assert set(report.slices) == {"source", "gpu", "precision", "architecture"}
    for slices in report.slices.values():
        assert sum(f.rows for f in slices.values()) == report.overall.rows
    assert {"16-bit", "FP8"} <= set(report.slices["precision"])
    assert {"dense", "MoE"} <= set(report.slices["architecture"])
    assert {"A100", "H100-class"} <= set(report.slices["gpu"])
    assert report.baseline.mfu_16bit is not None and report.baseline.mfu_fp8 is not None


def test_dev_set_is_the_previous_harness_rows(report: Report) -> None:
    assert len(DEV_SET_IDS) == 161
    assert report.dev_set is not None and report.dev_set.rows == 161


def test_no_dev_set_row_is_predicted_infeasible(report: Report) -> None:
    # Every published run actually ran: none may be predicted out of memory.
    assert [o.case.row_id for o in report.outcomes if o.case.in_dev_set and not o.feasible] == []


def test_dev_set_accuracy_bounds(report: Report) -> None:
    """Regression guards on the uncalibrated model over the previous harness's rows."""
    dev = [o for o in report.outcomes if o.case.in_dev_set]
    assert report.dev_set is not None
    assert report.dev_set.model_mape <= 0.09
    assert report.dev_set.model_mape <= 0.75 * report.dev_set.baseline_mape
    by_source: dict[str, list[float]] = {}
    for outcome in dev:
        by_source.setdefault(outcome.case.source, []).append(outcome.error)
    assert max(np.mean(values) for values in by_source.values()) <= 0.15
    dev_sweeps = sweep_figures(dev)
    assert np.mean([s.model_rho for s in dev_sweeps]) > np.mean(
        [s.baseline_rho for s in dev_sweeps]
    )


def test_korthikanti_table_4_recompute_overheads(report: Report) -> None:
    rows = {row.config: row for row in report.table4}
    assert len(rows) == 5
    assert (
        abs(rows["Baseline with recompute"].predicted - rows["Baseline with recompute"].measured)
        < 0.08
    )
    assert abs(rows["Selective Recompute"].predicted - rows["Selective Recompute"].measured) < 0.05


def test_text_and_markdown_name_every_slice(report: Report) -> None:
    text, markdown = format_text(report), format_markdown(report)
    for dimension in report.slices.values():
        for name in dimension:
            assert name in text and name in markdown
    assert "Excluded rows" in text and "Korthikanti" in text and "Memory" in text
    assert "| **all scored rows** |" in markdown


def test_json_dict_round_trips(report: Report) -> None:
    data = json.loads(json.dumps(to_dict(report), allow_nan=False))
    assert data["rows"]["scored"] == len(report.outcomes)


def test_missing_data_dir_raises(tmp_path: Path) -> None:
    with pytest.raises(DataSetError, match=r"no runs\.csv in"):
        run(tmp_path)


# The CLI ----------------------------------------------------------------------------------------
def test_cli_missing_data_dir_is_one_line_exit_2(tmp_path: Path) -> None:
    result = run_cli("validate", cwd=tmp_path)  # default ./validation does not exist there
    assert result.returncode == 2, result.stderr
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: no runs.csv in 'validation'"), lines


def test_cli_json_has_per_slice_figures() -> None:
    result = run_cli("validate", "--data", str(DATA_DIR), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    for dimension in ("source", "gpu", "precision", "architecture"):
        for figures in data["slices"][dimension].values():
            assert {"rows", "model_mape", "baseline_mape", "ratio", "bias", "infeasible"} <= set(
                figures
            )
    assert data["dev_set"]["rows"] == 161
    assert data["slices"]["precision"]["FP8"]["rows"] > 0
    assert data["slices"]["architecture"]["MoE"]["rows"] > 0


# Layering ---------------------------------------------------------------------------------------
def test_costmodel_does_not_import_the_app() -> None:
    offenders = []
    for path in (REPO_ROOT / "costmodel").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{path.name}: {n}" for n in names if n == "app" or n.startswith("app.")]
    assert offenders == []
