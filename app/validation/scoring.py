"""Predict each Case, price the constant-MFU baseline, and summarize the errors.

Errors are relative errors of tokens/s per GPU, ``predicted / measured - 1``: MAPE is the mean
of their magnitudes, bias their signed mean (positive = the model over-predicts).
"""

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace

import numpy as np

from app.validation.rows import Case, Exclusion
from costmodel.api import estimate
from costmodel.feasibility import why_it_cannot_have_run
from costmodel.flops import model_flops_per_token
from costmodel.hardware import peak_tflops
from costmodel.params import EfficiencyParams
from costmodel.specs import Plan
from costmodel.specs.plan import Recompute

# What a practitioner tries when a run does not fit: the least recompute first.
RECOMPUTE_LADDER: tuple[Recompute, ...] = ("none", "selective", "full")
# A sweep needs enough rows for a rank correlation to mean something.
MIN_SWEEP_ROWS = 3


@dataclass(frozen=True)
class Outcome:
    """One scored row: the plan priced (recompute resolved), the prediction and the baseline."""

    case: Case
    plan: Plan
    predicted: float
    predicted_memory_gib: float
    feasible: bool
    reasons: tuple[str, ...]
    baseline: float = math.nan

    @property
    def measured(self) -> float:
        return self.case.measured_tokens_per_s_per_gpu

    @property
    def signed_error(self) -> float:
        return self.predicted / self.measured - 1.0

    @property
    def error(self) -> float:
        return abs(self.signed_error)

    @property
    def baseline_error(self) -> float:
        return abs(self.baseline / self.measured - 1.0)

    @property
    def recompute_chosen(self) -> Recompute | None:
        """The mode picked by the fallback, or None when the source stated it."""
        return None if self.case.recompute_stated else self.plan.recompute


# Prediction -------------------------------------------------------------------------------------
def _price(case: Case, plan: Plan, params: EfficiencyParams | None) -> Outcome:
    result = estimate(case.model, case.training, case.cluster, plan, params=params)
    return Outcome(
        case=case,
        plan=plan,
        predicted=result.tokens_per_s_per_gpu,
        predicted_memory_gib=result.peak_memory_gib,
        feasible=result.feasible,
        reasons=tuple(result.reasons),
    )


def predict(case: Case, params: EfficiencyParams | None = None) -> Outcome | Exclusion:
    """Price the row's plan; with unstated recompute, the first of none/selective/full that fits.

    A plan the cost model rejects for a reason other than memory (divisibility, GPU count,
    batch) cannot be the run the source made: the row is excluded with that reason. A plan that
    only runs out of memory is kept and counted infeasible (the run did happen, so the memory
    model is wrong).
    """
    modes = [case.plan.recompute] if case.recompute_stated else list(RECOMPUTE_LADDER)
    outcome: Outcome | None = None
    for mode in modes:
        try:
            outcome = _price(case, case.plan.model_copy(update={"recompute": mode}), params)
        except ValueError as exc:  # pydantic's ValidationError included
            return Exclusion(case.row_id, f"cost model rejected the specs: {exc}")
        impossible = why_it_cannot_have_run(list(outcome.reasons))
        if impossible is not None:
            return Exclusion(case.row_id, impossible)
        if outcome.feasible:
            return outcome
    assert outcome is not None
    return outcome


# Baseline ---------------------------------------------------------------------------------------
def baseline_flops_per_token(case: Case) -> float:
    """6N + attention (PaLM App. B), N = active matmul parameters incl. the output layer."""
    return model_flops_per_token(case.model, case.training.seq_length)


def bf16_peak_flops(case: Case) -> float:
    """The BF16 (16-bit) dense peak, FLOP/s: the MFU denominator of every baseline here.

    FP8 rows use it too, as NVIDIA's DGX Cloud tables and torchtitan report FP8 MFU against
    the BF16 peak; an FP8 MFU against the FP8 peak would just be half as large.
    """
    precision = "fp16" if case.training.precision == "fp16" else "bf16"
    return peak_tflops(case.gpu, precision) * 1e12


def _utilization(case: Case) -> float:
    """The MFU the measured run achieved, by the baseline's FLOP count and BF16 peak."""
    return (
        case.measured_tokens_per_s_per_gpu * baseline_flops_per_token(case) / bf16_peak_flops(case)
    )


def fit_constant_mfu(cases: Iterable[Case]) -> float | None:
    """The one MFU minimizing MAPE of tokens/s/GPU over ``cases`` (a 1-D scan); None if empty."""
    ratios = np.array([_utilization(case) for case in cases])
    if ratios.size == 0:
        return None
    grid = np.linspace(0.05, 1.0, 1901)  # 0.0005 steps: far finer than any MFU is known
    errors = np.abs(grid[:, None] - ratios[None, :]) / ratios[None, :]
    return float(grid[np.argmin(errors.mean(axis=1))])


@dataclass(frozen=True)
class Baseline:
    """Constant-MFU baselines: one fitted over the 16-bit rows, one over the FP8 rows."""

    mfu_16bit: float | None
    mfu_fp8: float | None

    @classmethod
    def fit(cls, cases: list[Case]) -> "Baseline":
        return cls(
            mfu_16bit=fit_constant_mfu(c for c in cases if c.precision_class == "16-bit"),
            mfu_fp8=fit_constant_mfu(c for c in cases if c.precision_class == "FP8"),
        )

    def tokens_per_s_per_gpu(self, case: Case) -> float:
        mfu = self.mfu_fp8 if case.precision_class == "FP8" else self.mfu_16bit
        assert mfu is not None  # fitted over a set that includes this case
        return mfu * bf16_peak_flops(case) / baseline_flops_per_token(case)


def with_baselines(outcomes: list[Outcome], baseline: Baseline) -> list[Outcome]:
    return [replace(o, baseline=baseline.tokens_per_s_per_gpu(o.case)) for o in outcomes]


# Statistics -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SliceFigures:
    """Accuracy over a set of rows; MAPE and bias are fractions (0.076 = 7.6%)."""

    rows: int
    model_mape: float
    baseline_mape: float
    bias: float
    infeasible: int

    @property
    def ratio(self) -> float:
        """Model MAPE over baseline MAPE: below 1 the model beats a constant MFU."""
        return self.model_mape / self.baseline_mape if self.baseline_mape else math.nan


def _mean(values: list[float]) -> float:
    return float(np.mean(values)) if values else math.nan


def slice_figures(outcomes: list[Outcome]) -> SliceFigures:
    return SliceFigures(
        rows=len(outcomes),
        model_mape=_mean([o.error for o in outcomes]),
        baseline_mape=_mean([o.baseline_error for o in outcomes]),
        bias=_mean([o.signed_error for o in outcomes]),
        infeasible=sum(not o.feasible for o in outcomes),
    )


def slices_by(
    outcomes: list[Outcome], key: Callable[[Outcome], str], order: tuple[str, ...] = ()
) -> dict[str, SliceFigures]:
    """Figures per value of ``key``, in ``order`` first and then alphabetically; empty omitted."""
    grouped: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        grouped[key(outcome)].append(outcome)
    names = [n for n in order if n in grouped] + sorted(set(grouped) - set(order))
    return {name: slice_figures(grouped[name]) for name in names}


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman rank correlation with average ranks for ties; 0 when either side is constant."""

    def ranks(values: list[float]) -> np.ndarray:
        order = np.argsort(values, kind="mergesort")
        result = np.empty(len(values))
        sorted_values = np.asarray(values)[order]
        i = 0
        while i < len(values):
            j = i
            while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
                j += 1
            result[order[i : j + 1]] = (i + j) / 2.0
            i = j + 1
        return result

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


@dataclass(frozen=True)
class SweepFigures:
    """Rank agreement with the measurements inside one sweep."""

    source: str
    model: str
    gpu: str
    precision: str
    rows: int
    model_rho: float
    baseline_rho: float


def sweep_figures(outcomes: list[Outcome]) -> list[SweepFigures]:
    grouped: dict[tuple[str, str, str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        grouped[outcome.case.sweep_key].append(outcome)
    figures = []
    for key, group in sorted(grouped.items()):
        if len(group) < MIN_SWEEP_ROWS:
            continue
        measured = [o.measured for o in group]
        figures.append(
            SweepFigures(
                *key,
                rows=len(group),
                model_rho=spearman([o.predicted for o in group], measured),
                baseline_rho=spearman([o.baseline for o in group], measured),
            )
        )
    return figures


@dataclass(frozen=True)
class MemoryRow:
    """Peak memory per GPU, GiB: measured by the source vs. predicted for the plan priced."""

    row_id: str
    measured_gib: float
    predicted_gib: float

    @property
    def signed_error(self) -> float:
        return self.predicted_gib / self.measured_gib - 1.0


def memory_rows(outcomes: list[Outcome]) -> list[MemoryRow]:
    return [
        MemoryRow(o.case.row_id, o.case.measured_memory_gib, o.predicted_memory_gib)
        for o in outcomes
        if o.case.measured_memory_gib is not None
    ]
