"""Fit ``EfficiencyParams`` to profiles and observed steps; refuse what would not help.

The fit minimizes a robust (soft-L1) loss of log(predicted / measured) over every point, each
source (GEMMs of one dtype, one collective, one group of observed runs...) weighted to count
once, plus a weak prior toward the base parameters (``solver``). Before fitting, the data is
checked (``guards``) and the parameters no point depends on are left alone. After fitting:

- a parameter the data pushes beyond a physical bound (an efficiency above 100% of peak) refuses
  the calibration, naming it;
- k-fold cross-validation predicts every point from a fit that did not see it; if these held-out
  errors are worse than the base parameters' errors on the same points, the calibration is
  refused: it never silently degrades the model.
"""

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from costmodel.calibration import guards, solver
from costmodel.calibration.guards import CalibrationError
from costmodel.calibration.points import PointSet
from costmodel.calibration.result import CalibrationResult, ParamChange, SourceError
from costmodel.calibration.space import (
    BOUND_TOLERANCE,
    DEFAULT_FIT,
    PARAMETERS,
    ParamSpec,
    check_names,
    start_value,
)
from costmodel.gpu_defaults import default_params
from costmodel.hardware import DEFAULT_GEMM_EFFICIENCY, resolve_gpu
from costmodel.observations import Profile, StepObservation
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams

# Forward-difference step in solver units (0.1% for log parameters).
_FD_STEP = 1e-3
# Held-out mean |log error| may not rise by more than this (about 0.1%).
_DEGRADATION_TOLERANCE = 1e-3
# A bound is pressed on only when crossing it would remove this share of the loss.
BOUND_MIN_GAIN = 0.1
# A parameter "moved" when it changed by more than this in solver units (1% for ratios).
_MOVED = 0.01
# A Jacobian column (normalized) with less than this left once the earlier parameters' columns
# are projected out is degenerate with them: forward differences of _FD_STEP are accurate to
# about _FD_STEP relative, so anything below that is noise, not information.
_DEGENERATE = 1e-3
_ORDER = {name: index for index, name in enumerate(PARAMETERS)}


@dataclass
class _Problem:
    points: PointSet
    specs: list[ParamSpec]
    base: EfficiencyParams
    lower: np.ndarray
    upper: np.ndarray
    start: np.ndarray

    @classmethod
    def build(
        cls, points: PointSet, specs: list[ParamSpec], base: EfficiencyParams, gemm_cap: float
    ) -> "_Problem":
        lower = np.array([spec.solver_bounds()[0] for spec in specs])
        upper = np.array([spec.solver_bounds()[1] for spec in specs])
        for j, spec in enumerate(specs):
            if spec.name == "gemm_efficiency_scale":
                upper[j] = min(upper[j], spec.to_solver(gemm_cap))
        start = np.array([spec.to_solver(start_value(spec, base)) for spec in specs])
        return cls(points, specs, base, lower, upper, np.clip(start, lower, upper))

    def params_at(self, x: np.ndarray) -> EfficiencyParams:
        update = {
            spec.name: min(max(spec.from_solver(value), spec.lower), spec.upper)
            for spec, value in zip(self.specs, x, strict=True)
        }
        # Every value is inside the field's range (space.PARAMETERS bounds lie within them), so
        # the copy skips pydantic validation on the solver's hot path.
        return self.base.model_copy(update=update)

    def residuals(self, x: np.ndarray, subset: np.ndarray) -> np.ndarray:
        predicted = self.points.predict(self.params_at(x), subset)
        return np.log(predicted / self.points.measured[subset])

    def weights(self, subset: np.ndarray) -> np.ndarray:
        """Each source counts once within its group, and the two groups -- micro-benchmarks and
        observed training runs -- count alike: a profile's many kernel families must not
        outvote the runs that calibration is ultimately meant to predict."""
        sources = self.points.sources[subset]
        runs = self.points.observed_runs[subset]
        _, inverse, counts = np.unique(sources, return_inverse=True, return_counts=True)
        weights = 1.0 / counts[inverse]
        for group in (runs, ~runs):
            if group.any():
                weights[group] /= len(set(sources[group]))
        return weights

    def solve(
        self,
        subset: np.ndarray,
        *,
        loss_scale: float,
        prior_weight: float,
        max_iterations: int,
        start: np.ndarray | None = None,
    ) -> solver.Solution:
        sigma = np.array([spec.sigma for spec in self.specs])
        return solver.solve(
            lambda x: self.residuals(x, subset),
            self.start,
            self.lower,
            self.upper,
            weights=self.weights(subset),
            prior_scale=sigma / prior_weight,
            loss_scale=loss_scale,
            steps=np.full(self.start.size, _FD_STEP),
            start=start,
            max_iterations=max_iterations,
        )


def _gemm_cap(profiles: Sequence[Profile], observations: Sequence[StepObservation]) -> float:
    """Largest gemm_efficiency_scale that keeps every involved GPU at or below its peak."""
    gpus = [profile.gpu for profile in profiles] + [
        resolve_gpu(group.gpu) for obs in observations for group in obs.cluster.groups
    ]
    efficiencies = [gpu.gemm_efficiency or DEFAULT_GEMM_EFFICIENCY for gpu in gpus]
    return 1.0 / max(efficiencies) if efficiencies else PARAMETERS["gemm_efficiency_scale"].upper


def default_base(
    profiles: Sequence[Profile], observations: Sequence[StepObservation]
) -> EfficiencyParams:
    """Where a fit without ``base`` starts (and what its "before" errors are of): the defaults
    of the one GPU all the data ran on (``gpu_defaults.default_params``, fitted from published
    micro-benchmarks); ``DEFAULT_PARAMS`` when the data spans several GPUs or an inline one."""
    gpus = {profile.gpu for profile in profiles} | {
        resolve_gpu(group.gpu) for obs in observations for group in obs.cluster.groups
    }
    return default_params(gpus.pop()) if len(gpus) == 1 else DEFAULT_PARAMS


def _identifiable(problem: _Problem, everything: np.ndarray) -> np.ndarray:
    """Which parameters the data can tell apart: some point depends on it (a nonzero Jacobian
    column at the start), and not only in a way another parameter already explains.

    Columns are taken in ``PARAMETERS`` order and each is orthogonalized against the ones kept
    before it (Gram-Schmidt on the weighted Jacobian); one with (almost) nothing left moves the
    predictions exactly as a combination of earlier parameters does. Profiles measuring only
    all-gather, say, cannot tell ``inter_node_efficiency`` from ``all_gather_bandwidth_scale``:
    the link parameter, listed first, is fitted and the per-op scale reported as not
    identifiable, rather than the two splitting the change by their priors."""
    r0 = problem.residuals(problem.start, everything)
    jac = solver.forward_jacobian(
        lambda x: problem.residuals(x, everything),
        problem.start,
        r0,
        np.full(problem.start.size, _FD_STEP),
        problem.lower,
        problem.upper,
    )
    weighted = np.sqrt(problem.weights(everything))[:, None] * jac
    norms = np.linalg.norm(weighted, axis=0)
    identifiable = norms > 1e-9
    order = sorted(range(len(problem.specs)), key=lambda j: _ORDER[problem.specs[j].name])
    basis: list[np.ndarray] = []
    for j in order:
        if not identifiable[j]:
            continue
        column = weighted[:, j] / norms[j]
        for _ in range(2):  # twice: classical Gram-Schmidt loses orthogonality once
            for direction in basis:
                column = column - (direction @ column) * direction
        remaining = float(np.linalg.norm(column))
        if remaining < _DEGENERATE:
            identifiable[j] = False
        else:
            basis.append(column / remaining)
    return identifiable


def _check_bounds(problem: _Problem, solution: solver.Solution) -> None:
    """Refuse when the data wants a parameter beyond a physical (non-resting) bound.

    For a parameter pinned at such a bound, the Gauss-Newton step with it and every parameter
    not at a bound free says where the data would put it (other parameters may compensate, a
    smaller GEMM roll-off for a capped efficiency, so a per-coordinate step would understate the
    overshoot) and how much of the loss that would remove. Only a step both beyond the tolerance
    and worth ``BOUND_MIN_GAIN`` of the loss is the data speaking; a long step along a flat
    direction of an under-determined fit is not."""
    x, lower, upper = solution.x, problem.lower, problem.upper
    inside = (x > lower + 1e-9) & (x < upper - 1e-9)
    for j, spec in enumerate(problem.specs):
        at_lower = x[j] <= lower[j] + 1e-9 and not spec.resting_lower
        at_upper = x[j] >= upper[j] - 1e-9 and not spec.resting_upper
        if not (at_lower or at_upper):
            continue
        free = inside.copy()
        free[j] = True
        step = np.linalg.solve(solution.hessian[np.ix_(free, free)], -solution.gradient[free])
        wanted = float(step[int(np.sum(free[:j]))])
        gain = -0.5 * float(solution.gradient[free] @ step)
        if gain < BOUND_MIN_GAIN * solution.cost:
            continue
        if at_lower and -wanted > BOUND_TOLERANCE:
            bound, side = lower[j], "below"
        elif at_upper and wanted > BOUND_TOLERANCE:
            bound, side = upper[j], "above"
        else:
            continue
        implied = spec.from_solver(x[j] + wanted)
        raise CalibrationError(
            f"the data needs {spec.name} ({spec.label}) {side} its physical bound "
            f"{spec.from_solver(bound):.4g} (about {implied:.4g}): the device description "
            "(peaks, link bandwidths, topology) does not fit these measurements"
        )


def _by_source(
    points: PointSet,
    subset: np.ndarray,
    before: np.ndarray,
    after: np.ndarray,
) -> list[SourceError]:
    """Per source, errors of the ``before`` and ``after`` predictions of ``subset``'s points."""
    sources = points.sources[subset]
    measured = points.measured[subset]
    inverse = np.array([points.points[i].inverse for i in subset], dtype=bool)
    runs = points.observed_runs[subset]

    def percentage(predicted: np.ndarray) -> np.ndarray:
        ratio = predicted / measured
        return np.abs(np.where(inverse, 1.0 / ratio, ratio) - 1.0)

    def logarithmic(predicted: np.ndarray) -> np.ndarray:
        return np.abs(np.log(predicted / measured))

    errors = []
    for source in sorted(set(sources)):
        chosen = sources == source
        errors.append(
            SourceError(
                source=str(source),
                points=int(chosen.sum()),
                observed_runs=bool(runs[chosen].any()),
                mape_before=float(np.mean(percentage(before)[chosen])),
                mape_after=float(np.mean(percentage(after)[chosen])),
                log_error_before=float(np.mean(logarithmic(before)[chosen])),
                log_error_after=float(np.mean(logarithmic(after)[chosen])),
            )
        )
    return errors


def _folds(sources: np.ndarray, k: int, seed: int) -> np.ndarray:
    """Fold of each point: every source's points dealt round-robin after a seeded shuffle."""
    rng = np.random.default_rng(seed)
    fold = np.empty(sources.size, dtype=int)
    for source in sorted(set(sources)):
        members = np.flatnonzero(sources == source)
        fold[rng.permutation(members)] = np.arange(members.size) % k
    return fold


def _select(
    points: PointSet,
    names: tuple[str, ...],
    base: EfficiencyParams,
    gemm_cap: float,
    spare_points: int = 2,
) -> tuple[_Problem, list[str]]:
    """The problem over the requested parameters some point depends on, and the others."""
    everything = np.arange(len(points))
    problem = _Problem.build(points, [PARAMETERS[name] for name in names], base, gemm_cap)
    identifiable = _identifiable(problem, everything)
    kept = [spec for spec, ok in zip(problem.specs, identifiable, strict=True) if ok]
    dropped = [spec.name for spec, ok in zip(problem.specs, identifiable, strict=True) if not ok]
    if not kept:
        raise CalibrationError(
            f"none of the requested parameters ({', '.join(names)}) affects these measurements"
        )
    needed = len(kept) + spare_points
    if len(points) < needed:
        raise CalibrationError(
            f"too few points: {len(points)} measurements for {len(kept)} parameters "
            f"({', '.join(spec.name for spec in kept)}); need at least {needed}"
        )
    return _Problem.build(points, kept, base, gemm_cap), dropped


def _cross_validate(
    problem: _Problem, solution: solver.Solution, k: int, seed: int, options: dict[str, Any]
) -> np.ndarray:
    """Each point predicted by a fit on the other folds (NaN where a fold had too little)."""
    points = problem.points
    everything = np.arange(len(points))
    predicted = np.full(len(points), np.nan)
    if k < 2:
        return predicted
    fold = _folds(points.sources, k, seed)
    for f in range(k):
        train, test = everything[fold != f], everything[fold == f]
        if train.size < len(problem.specs) + 2 or test.size == 0:
            continue
        # Starting where the full fit ended only saves iterations: the prior stays centred on
        # the base, so a fold's optimum does not depend on the points it holds out.
        fold_solution = problem.solve(train, start=solution.x, **options)
        predicted[test] = points.predict(problem.params_at(fold_solution.x), test)
    return predicted


def _refuse_if_worse(result: CalibrationResult) -> None:
    """Held-out predictions must not get worse, neither for the observed runs nor for the
    micro-benchmarks (each source counting once within its group). Compared on the symmetric
    log error, so over- and under-prediction weigh alike."""
    for runs, what in ((True, "observed runs"), (False, "micro-benchmarks")):
        group = [error for error in result.held_out if error.observed_runs == runs]
        if not group:
            continue
        before = sum(error.log_error_before for error in group) / len(group)
        after = sum(error.log_error_after for error in group) / len(group)
        if after > before + _DEGRADATION_TOLERANCE:
            mape_before = sum(error.mape_before for error in group) / len(group)
            mape_after = sum(error.mape_after for error in group) / len(group)
            raise CalibrationError(
                f"calibration would make held-out predictions of {what} worse (mean |log "
                f"error| {before:.3f} -> {after:.3f}, MAPE {100 * mape_before:.1f}% -> "
                f"{100 * mape_after:.1f}% over {result.k_folds}-fold cross-validation); the "
                "model keeps its parameters"
            )
    for error in result.held_out:
        if error.log_error_after > error.log_error_before + 0.02:
            result.warnings.append(
                f"'{error.source}' held-out predictions get worse (MAPE "
                f"{100 * error.mape_before:.1f}% -> {100 * error.mape_after:.1f}%) while its "
                "group improves"
            )


def fit_calibration(
    profiles: Sequence[Profile] = (),
    observations: Sequence[StepObservation] = (),
    *,
    base: EfficiencyParams | None = None,
    params: Sequence[str] | None = None,
    k_folds: int = 5,
    seed: int = 0,
    loss_scale: float = 0.1,
    prior_weight: float = 0.005,
    max_iterations: int = 40,
    spare_points: int = 2,
) -> CalibrationResult:
    """Fit the efficiency parameters named in ``params`` (default: all calibratable ones that the
    data constrains) to ``profiles`` and ``observations``, starting from ``base`` (default: the
    built-in defaults of the GPU the data ran on, ``default_base``).

    Raises ``CalibrationError`` (a ``ValueError`` with a one-line message) when the data is
    insufficient, contradictory or unphysical, or when the fit would not improve held-out
    predictions. ``loss_scale`` is where the soft-L1 loss turns linear (log-ratio units: 0.1 is
    about 10% error); ``prior_weight`` how strongly parameters stay near ``base``.
    ``spare_points`` is how many more measurements than fitted parameters the data must hold
    (2: over-determined, with points to hold out). The built-in per-GPU defaults
    (``costmodel.calibration.defaults``) pass 0: a single published figure (one GEMM ceiling)
    then determines its parameter exactly, and when no fold can be held out the result has no
    held-out errors (and no held-out refusal) instead of an error.
    """
    base = base or default_base(profiles, observations)
    names = tuple(params) if params is not None else DEFAULT_FIT
    check_names(names)
    if not profiles and not observations:
        raise CalibrationError("nothing to calibrate on: give at least one profile or observation")
    points = PointSet.build(profiles, observations)
    guards.check_physics(profiles)
    warnings = guards.check_consistency(points)
    everything = np.arange(len(points))
    predicted_before = points.predict(base, everything)
    guards.check_priceable(points, predicted_before)

    problem, not_identifiable = _select(
        points, names, base, _gemm_cap(profiles, observations), spare_points
    )
    options: dict[str, Any] = {
        "loss_scale": loss_scale,
        "prior_weight": prior_weight,
        "max_iterations": max_iterations,
    }
    solution = problem.solve(everything, **options)
    _check_bounds(problem, solution)
    fitted = problem.params_at(solution.x)
    if not solution.converged:
        warnings.append(f"the solver stopped after {solution.iterations} iterations")

    k = min(k_folds, len(points))
    held_out_predicted = _cross_validate(problem, solution, k, seed, options)
    tested = everything[np.isfinite(held_out_predicted)]
    if tested.size == 0 and spare_points > 0:
        raise CalibrationError(
            f"too few points to cross-validate ({len(points)} for {len(problem.specs)} "
            f"parameters, {k_folds} folds): cannot show the calibration improves predictions"
        )
    result = CalibrationResult(
        params=fitted,
        base=base,
        fitted=[spec.name for spec in problem.specs],
        not_identifiable=not_identifiable,
        changes=[
            ParamChange(
                name=spec.name,
                label=spec.label,
                before=float(getattr(base, spec.name)),
                after=float(getattr(fitted, spec.name)),
                moved=bool(abs(solution.x[j] - problem.start[j]) > _MOVED),
            )
            for j, spec in enumerate(problem.specs)
        ],
        in_sample=_by_source(
            points, everything, predicted_before, points.predict(fitted, everything)
        ),
        held_out=_by_source(points, tested, predicted_before[tested], held_out_predicted[tested]),
        k_folds=k,
        points=len(points),
        iterations=solution.iterations,
        converged=solution.converged,
        warnings=warnings,
    )
    _refuse_if_worse(result)
    return result
