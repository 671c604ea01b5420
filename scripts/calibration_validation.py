"""Demonstration 1: calibrate on half of each source's published runs, predict the other half.

    .venv/bin/python scripts/calibration_validation.py [--folds K] [--data DIR] [--dev-set]
                                                       [--joint]

The rows are those the validation harness (``app.validation``) scores in ``DIR/runs.csv``
(default ``validation/``), each with the plan it priced (recompute resolved where the source is
silent); rows the uncalibrated model predicts infeasible are left out, as calibration can only
fit runs it can price. ``--dev-set`` keeps the 161 rows the previous harness scored. Rows are
sorted by id within each source and dealt alternately into a calibration half and a test half,
so every sweep is split between both. The calibration sees only its half (and cross-validates
within it); the table reports, per source, the test half's MAPE of tokens/s per GPU with the
default parameters (each GPU's shipped defaults) and with the calibrated ones.

By default each (source, GPU type) group is calibrated on its own half, as a user calibrates
their own cluster and software stack; a group whose fit is refused keeps the defaults (and is
listed). ``--joint`` fits one calibration to every group's half at once.
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
from costmodel.params import EfficiencyParams

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


Group = tuple[str, str]
# What a few observed steps of one stack constrain: its compute rate and its fixed step cost.
FEW_RUNS_PARAMS = ("gemm_efficiency_scale", "per_step_overhead_s")


def group_of(case: Case) -> Group:
    return case.source, case.gpu.name


def mape(cases: list[Case], params_of: dict[Group, EfficiencyParams | None]) -> dict[str, float]:
    """Per source (and over all rows): MAPE of tokens/s/GPU, each case priced with its group's
    parameters (None: the GPU's shipped defaults)."""
    errors: dict[str, list[float]] = defaultdict(list)
    for case in cases:
        params = params_of.get(group_of(case))
        result = estimate(case.model, case.training, case.cluster, case.plan, params=params)
        measured = case.measured_tokens_per_s_per_gpu
        errors[case.source].append(abs(result.tokens_per_s_per_gpu / measured - 1))
    table = {source: float(np.mean(values)) for source, values in sorted(errors.items())}
    table["ALL (mean of rows)"] = float(np.mean([e for values in errors.values() for e in values]))
    return table


def calibrate_joint(train: list[Case], folds: int) -> dict[Group, EfficiencyParams | None] | None:
    try:
        result = fit_calibration(observations=[observation(c) for c in train], k_folds=folds)
    except CalibrationError as exc:
        print(f"calibration refused: {exc}")
        return None
    print("parameters:")
    for change in result.changes:
        mark = "*" if change.moved else " "
        print(f" {mark} {change.name:<28}{change.before:>10.4g} -> {change.after:<10.4g}")
    print(
        f"calibration half, {result.k_folds}-fold held-out MAPE (mean over sources): "
        f"{100 * result.held_out_mape_before:.1f}% -> {100 * result.held_out_mape_after:.1f}%"
    )
    return {group_of(case): result.params for case in train}


def calibrate_per_group(train: list[Case], folds: int) -> dict[Group, EfficiencyParams | None]:
    by_group: dict[Group, list[Case]] = defaultdict(list)
    for case in train:
        by_group[group_of(case)].append(case)
    params_of: dict[Group, EfficiencyParams | None] = {}
    for group, cases in sorted(by_group.items()):
        label = f"{group[0]} on {group[1]}"
        observed = [observation(c) for c in cases]
        try:
            result = fit_calibration(observations=observed, k_folds=min(folds, len(cases)))
        except (CalibrationError, ValueError) as first_refusal:
            # A handful of runs cannot pin every parameter: fit the two that any run constrains,
            # as a user with few observations would (`autopar calibrate --param ...`).
            try:
                result = fit_calibration(
                    observations=observed, k_folds=min(folds, len(cases)), params=FEW_RUNS_PARAMS
                )
            except (CalibrationError, ValueError) as exc:
                reason = f"{first_refusal}; with {', '.join(FEW_RUNS_PARAMS)} only: {exc}"
                print(
                    f"  {label:<44} {len(cases):>3} rows: refused, keeps the defaults ({reason})"[
                        :220
                    ]
                )
                continue
        moved = ", ".join(f"{c.name} {c.before:.3g}->{c.after:.3g}" for c in result.moved)
        print(f"  {label:<44} {len(cases):>3} rows: {moved}"[:200])
        params_of[group] = result.params
    return params_of


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--folds", type=int, default=5, help="k-fold inside the calibration half")
    parser.add_argument(
        "--data", type=Path, default=REPO_ROOT / "validation", help="folder holding runs.csv"
    )
    parser.add_argument(
        "--dev-set", action="store_true", help="only the 161 rows the previous harness scored"
    )
    parser.add_argument(
        "--joint", action="store_true", help="one calibration for every (source, GPU) group"
    )
    args = parser.parse_args()
    cases = priceable_cases(args.data, args.dev_set)
    train, test = split(cases)
    started = time.perf_counter()
    print(f"calibrating on {len(train)} rows, testing on {len(test)}")
    calibrated = (
        calibrate_joint(train, args.folds) if args.joint else calibrate_per_group(train, args.folds)
    )
    if calibrated is None:
        return 1
    print(f"({time.perf_counter() - started:.0f} s)")
    before, after = mape(test, {}), mape(test, calibrated)
    print("\ntest half, MAPE of tokens/s per GPU:")
    print(f"{'source':<26}{'rows':>5}{'default':>10}{'calibrated':>12}")
    counts: dict[str, int] = defaultdict(int)
    for case in test:
        counts[case.source] += 1
    counts["ALL (mean of rows)"] = len(test)
    for source in before:
        print(
            f"{source:<26}{counts[source]:>5}{100 * before[source]:>9.1f}%"
            f"{100 * after[source]:>11.1f}%"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
