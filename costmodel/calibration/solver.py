"""Robust bounded least squares: Levenberg-Marquardt on finite-difference Jacobians.

Minimizes

    C(x) = sum_i w_i f^2 rho((r_i(x) / f)^2) + sum_j ((x_j - c_j) / s_j)^2

with data residuals r_i (log predicted / measured), per-row weights w_i, the soft-L1 loss
rho(z) = 2 (sqrt(1 + z) - 1) -- quadratic for |r| << f, linear beyond, so a few bad samples
cannot drag the fit (Triggs et al., "Bundle Adjustment -- A Modern Synthesis", 2000, Sec. 3.3)
-- and a weak Gaussian prior around the starting point that keeps parameters the data hardly
constrains where they were. Each iteration linearizes with a forward-difference Jacobian and
iteratively reweighted least squares (IRLS weights rho'(z)), then takes damped Gauss-Newton steps
(Marquardt's diagonal scaling). Box bounds are handled by projection: a coordinate at a bound
whose gradient points outward is frozen for the step, and trial points are clipped into the box.
"""

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

Residuals = Callable[[np.ndarray], np.ndarray]


@dataclass
class Solution:
    """Where the solver stopped: ``x`` and residuals ``(n_residuals,)``, gradient ``(n_params,)``,
    Gauss-Newton Hessian ``(n_params, n_params)``, costs and counts."""

    x: np.ndarray
    cost: float
    initial_cost: float
    iterations: int
    evaluations: int
    converged: bool
    residuals: np.ndarray
    gradient: np.ndarray  # of C/2 at x
    hessian: np.ndarray  # Gauss-Newton approximation of C/2's Hessian at x


def soft_l1_cost(residuals: np.ndarray, weights: np.ndarray, scale: float) -> float:
    """Robust cost sum_i w_i 2 f^2 (sqrt(1 + (r_i / f)^2) - 1) of ``residuals`` and ``weights``,
    both ``(n_residuals,)``, at scale f."""
    z = (residuals / scale) ** 2
    return float(np.sum(weights * scale**2 * 2.0 * (np.sqrt(1.0 + z) - 1.0)))


def soft_l1_irls(residuals: np.ndarray, scale: float) -> np.ndarray:
    """rho'(z): the factor each row's weight gets in the local quadratic model."""
    return 1.0 / np.sqrt(1.0 + (residuals / scale) ** 2)


def forward_jacobian(
    fun: Residuals,
    x: np.ndarray,
    r0: np.ndarray,
    steps: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
) -> np.ndarray:
    """Forward-difference Jacobian of ``fun`` at ``x`` (``(n_params,)``), steps kept inside [lower,
    upper]: shape ``(n_residuals, n_params)``."""
    jac = np.empty((r0.size, x.size))
    for j in range(x.size):
        h = steps[j] if x[j] + steps[j] <= upper[j] else -steps[j]  # stay inside the box
        probe = x.copy()
        probe[j] = min(max(x[j] + h, lower[j]), upper[j])
        h = probe[j] - x[j]
        jac[:, j] = (fun(probe) - r0) / h if h != 0 else 0.0
    return jac


def solve(
    fun: Residuals,
    x0: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    *,
    weights: np.ndarray,
    prior_scale: np.ndarray,
    loss_scale: float,
    steps: np.ndarray,
    start: np.ndarray | None = None,
    max_iterations: int = 40,
    tolerance: float = 1e-4,
) -> Solution:
    """Minimize from ``start`` (default ``x0``); the prior is centred on ``x0``. Stops when an
    iteration lowers the cost by less than ``tolerance`` (relative) or no step helps."""
    center = np.clip(np.asarray(x0, dtype=float), lower, upper)
    x = center.copy() if start is None else np.clip(np.asarray(start, dtype=float), lower, upper)
    evaluations = 0

    def evaluate(point: np.ndarray) -> tuple[np.ndarray, float]:
        nonlocal evaluations
        evaluations += 1
        residuals = fun(point)
        prior = np.sum(((point - center) / prior_scale) ** 2)
        return residuals, soft_l1_cost(residuals, weights, loss_scale) + float(prior)

    r, cost = evaluate(x)
    initial_cost = cost
    damping = 1e-3
    converged = False
    iterations = 0
    for iterations in range(1, max_iterations + 1):  # noqa: B007 (reported after the loop)
        jac = forward_jacobian(fun, x, r, steps, lower, upper)
        evaluations += x.size
        row_weights = weights * soft_l1_irls(r, loss_scale)
        hessian = jac.T @ (row_weights[:, None] * jac) + np.diag(1.0 / prior_scale**2)
        gradient = jac.T @ (row_weights * r) + (x - center) / prior_scale**2
        pinned = ((x <= lower) & (gradient > 0)) | ((x >= upper) & (gradient < 0))
        free = ~pinned
        if not free.any():
            converged = True
            break
        sub = hessian[np.ix_(free, free)]
        accepted = False
        while damping < 1e12:
            step = np.zeros_like(x)
            system = sub + damping * np.diag(np.diag(sub))
            step[free] = np.linalg.solve(system, -gradient[free])
            trial = np.clip(x + step, lower, upper)
            r_trial, cost_trial = evaluate(trial)
            if np.all(np.isfinite(r_trial)) and cost_trial < cost:
                accepted = True
                break
            damping *= 4.0
        if not accepted:
            converged = True
            break
        decrease = cost - cost_trial
        moved = np.max(np.abs(trial - x))
        x, r, cost = trial, r_trial, cost_trial
        damping = max(damping / 3.0, 1e-12)
        if decrease <= tolerance * max(cost + decrease, 1e-30) or moved < 1e-9:
            converged = True
            break
    # The bound check needs the gradient where the fit ended, not where the last step began.
    jac = forward_jacobian(fun, x, r, steps, lower, upper)
    evaluations += x.size
    row_weights = weights * soft_l1_irls(r, loss_scale)
    gradient = jac.T @ (row_weights * r) + (x - center) / prior_scale**2
    hessian = jac.T @ (row_weights[:, None] * jac) + np.diag(1.0 / prior_scale**2)
    return Solution(
        x=x,
        cost=cost,
        initial_cost=initial_cost,
        iterations=iterations,
        evaluations=evaluations,
        converged=converged,
        residuals=r,
        gradient=gradient,
        hessian=hessian,
    )
