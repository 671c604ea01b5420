"""What a calibration produces: fitted parameters, what moved, and the error before and after."""

from pydantic import BaseModel, ConfigDict, Field

from costmodel.params import EfficiencyParams


class _Result(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParamChange(_Result):
    """One calibrated parameter's value before and after the fit."""

    name: str
    label: str
    before: float
    after: float
    moved: bool = Field(description="Moved by more than 1% (log parameters) or 0.01 units.")


class SourceError(_Result):
    """Errors of one source's points before and after calibration.

    ``mape_*``: mean absolute percentage error of the measured quantity (0.1 = 10%).
    ``log_error_*``: mean |ln(predicted / measured)|, symmetric in over- and under-prediction
    (MAPE caps under-prediction at 100% but not over-prediction); the fit minimizes this kind
    of error and the no-degradation rule compares it."""

    source: str
    points: int
    observed_runs: bool = Field(default=False, description="Training runs, not micro-benchmarks.")
    mape_before: float
    mape_after: float
    log_error_before: float
    log_error_after: float


class CalibrationResult(_Result):
    """What a fit produced: the parameters, what moved and the errors in and out of sample."""

    params: EfficiencyParams = Field(description="What estimates should use.")
    base: EfficiencyParams = Field(description="What the fit started from (and falls back to).")
    fitted: list[str] = Field(description="Parameters the fit was allowed to move.")
    not_identifiable: list[str] = Field(
        default_factory=list,
        description=(
            "Requested parameters no measurement depends on, or only as parameters listed "
            "before them do (degenerate: the data cannot tell them apart)."
        ),
    )
    changes: list[ParamChange]
    in_sample: list[SourceError]
    held_out: list[SourceError] = Field(
        description="k-fold: each point predicted by a fit without it."
    )
    k_folds: int
    points: int
    iterations: int
    converged: bool
    warnings: list[str] = Field(default_factory=list)

    @property
    def moved(self) -> list[ParamChange]:
        """The changes that moved (``ParamChange.moved``)."""
        return [change for change in self.changes if change.moved]

    @staticmethod
    def _mean(errors: list[SourceError], attribute: str) -> float:
        # Each source counts once, as the fit weights them.
        values = [getattr(error, attribute) for error in errors]
        return sum(values) / len(values) if values else float("nan")

    @property
    def held_out_mape_before(self) -> float:
        """Mean held-out MAPE over sources, before the fit (0.1 = 10%)."""
        return self._mean(self.held_out, "mape_before")

    @property
    def held_out_mape_after(self) -> float:
        """Mean held-out MAPE over sources, after the fit (0.1 = 10%)."""
        return self._mean(self.held_out, "mape_after")

    @property
    def held_out_log_error_before(self) -> float:
        """Mean held-out |ln(predicted / measured)| over sources, before the fit."""
        return self._mean(self.held_out, "log_error_before")

    @property
    def held_out_log_error_after(self) -> float:
        """Mean held-out |ln(predicted / measured)| over sources, after the fit."""
        return self._mean(self.held_out, "log_error_after")


class Calibration(_Result):
    """A stored, named and versioned calibration: what ``estimate(params=...)`` consumes."""

    name: str = Field(min_length=1, max_length=200)
    version: int = Field(ge=1)
    created_at: str = Field(description="ISO 8601, UTC.")
    inputs: dict[str, str | int | list[str]] = Field(
        default_factory=dict, description="Profiles and observations it was fitted to."
    )
    result: CalibrationResult

    @property
    def params(self) -> EfficiencyParams:
        """The fitted parameters (``result.params``)."""
        return self.result.params

    @property
    def ref(self) -> str:
        """``name@version``, how searches and estimates refer to this calibration."""
        return f"{self.name}@{self.version}"
