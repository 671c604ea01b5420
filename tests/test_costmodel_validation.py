"""The cost model against published runs (the shipped validation/ data set)."""

import numpy as np

from costmodel.validation import korthikanti_table4, run, spearman, sweeps


def test_validation_report_meets_accuracy_bounds():
    report = run()
    assert len(report.outcomes) >= 150
    errors = [outcome.error for outcome in report.outcomes]
    baseline = [outcome.baseline_error for outcome in report.outcomes]
    # Regression guards on the uncalibrated model (see README for the full report).
    assert np.mean(errors) <= 0.09
    # At least 25% lower MAPE than the constant-MFU baseline fitted to the same rows.
    assert np.mean(errors) <= 0.75 * np.mean(baseline)
    by_source: dict[str, list[float]] = {}
    for outcome in report.outcomes:
        by_source.setdefault(outcome.case.short_source, []).append(outcome.error)
    assert max(np.mean(values) for values in by_source.values()) <= 0.15
    # Every published run actually ran: none may be predicted out of memory.
    assert [o.case.row_id for o in report.outcomes if not o.feasible] == []


def test_ranking_within_sweeps_beats_the_constant_mfu_baseline():
    report = run()
    model_rho, base_rho = [], []
    for group in sweeps(report.outcomes).values():
        measured = [o.case.measured_tokens_per_s_per_gpu for o in group]
        model_rho.append(spearman([o.predicted for o in group], measured))
        base_rho.append(spearman([o.baseline for o in group], measured))
    assert np.mean(model_rho) > np.mean(base_rho)


def test_korthikanti_table_4_recompute_overheads():
    rows = {name: (predicted, measured) for name, predicted, measured in korthikanti_table4()}
    predicted, measured = rows["Baseline with recompute"]
    assert abs(predicted - measured) < 0.08
    predicted, measured = rows["Selective Recompute"]
    assert abs(predicted - measured) < 0.05
