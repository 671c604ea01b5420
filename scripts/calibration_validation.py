"""Demonstration 1: calibrate on half of each source's published runs, predict the other half.

    .venv/bin/python scripts/calibration_validation.py [--folds K] [--data DIR] [--dev-set]

The rows are those the validation harness (``app.validation``) scores in ``DIR/runs.csv``
(default ``validation/``), each with the plan it priced (recompute resolved where the source is
silent); rows the uncalibrated model predicts infeasible are left out, as calibration can only
fit runs it can price. ``--dev-set`` keeps the 161 rows the previous harness scored. Rows are
sorted by id within each source and dealt alternately into a calibration half and a test half,
so every sweep is split between both. The calibration sees only its half (and cross-validates
within it); the table reports, per source, the test half's MAPE of tokens/s per GPU with the
default parameters and with the calibrated ones.
"""

import argparse
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

import numpy as np

from app.validation import Case, run
from costmodel.api import estimate
from costmodel.calibration import CalibrationError, fit_calibration
from costmodel.observations import StepObservation
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams

REPO_ROOT = Path(__file__).resolve().parents[1]


def observation(case: Case) -> StepObservation:
    plan = case.plan
    gpus = plan.dp * plan.tp * plan.pp * plan.cp
    return StepObservation(
        name=case.row_id,
        source=case.source,
        model=case.model,
        training=case.training,
        cluster=case.cluster,
        plan=plan,
        tokens_per_s=case.measured_tokens_per_s_per_gpu * gpus,
    )


def priceable_cases(data_dir: Path, dev_set_only: bool) -> list[Case]:
    """The harness's scored rows, each carrying the plan it priced, that the model can run."""
    report = run(data_dir)
    return [
        replace(outcome.case, plan=outcome.plan)
        for outcome in report.outcomes
        if outcome.feasible and (outcome.case.in_dev_set or not dev_set_only)
    ]


def split(cases: list[Case]) -> tuple[list[Case], list[Case]]:
    by_source: dict[str, list[Case]] = defaultdict(list)
    for case in cases:
        by_source[case.source].append(case)
    train, test = [], []
    for group in by_source.values():
        group.sort(key=lambda case: case.row_id)
        train.extend(group[0::2])
        test.extend(group[1::2])
    return train, test


def mape(cases: list[Case], params: EfficiencyParams) -> dict[str, float]:
    errors: dict[str, list[float]] = defaultdict(list)
    for case in cases:
        result = estimate(case.model, case.training, case.cluster, case.plan, params=params)
        measured = case.measured_tokens_per_s_per_gpu
        errors[case.source].append(abs(result.tokens_per_s_per_gpu / measured - 1))
    table = {source: float(np.mean(values)) for source, values in sorted(errors.items())}
    table["ALL (mean of rows)"] = float(np.mean([e for values in errors.values() for e in values]))
    return table


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="k-fold inside the calibration half")
    parser.add_argument(
        "--data", type=Path, default=REPO_ROOT / "validation", help="folder holding runs.csv"
    )
    parser.add_argument(
        "--dev-set", action="store_true", help="only the 161 rows the previous harness scored"
    )
    args = parser.parse_args()
    cases = priceable_cases(args.data, args.dev_set)
    train, test = split(cases)
    started = time.perf_counter()
    try:
        result = fit_calibration(observations=[observation(c) for c in train], k_folds=args.folds)
    except CalibrationError as exc:
        print(f"calibration refused: {exc}")
        return 1
    seconds = time.perf_counter() - started
    print(f"calibrated on {len(train)} rows, tested on {len(test)} ({seconds:.0f} s)")
    print("\nparameters:")
    for change in result.changes:
        mark = "*" if change.moved else " "
        print(f" {mark} {change.name:<28}{change.before:>10.4g} -> {change.after:<10.4g}")
    if result.not_identifiable:
        print(f"   not constrained by these runs: {', '.join(result.not_identifiable)}")
    before, after = mape(test, DEFAULT_PARAMS), mape(test, result.params)
    print("\ntest half, MAPE of tokens/s per GPU:")
    print(f"{'source':<26}{'rows':>5}{'default':>10}{'calibrated':>12}")
    counts = defaultdict(int)
    for case in test:
        counts[case.source] += 1
    counts["ALL (mean of rows)"] = len(test)
    for source in before:
        print(
            f"{source:<26}{counts[source]:>5}{100 * before[source]:>9.1f}%"
            f"{100 * after[source]:>11.1f}%"
        )
    print(
        f"\ncalibration half, {result.k_folds}-fold held-out MAPE (mean over sources): "
        f"{100 * result.held_out_mape_before:.1f}% -> {100 * result.held_out_mape_after:.1f}%"
    )
    for warning in result.warnings:
        print(f"warning: {warning}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
