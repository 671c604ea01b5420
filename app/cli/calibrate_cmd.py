"""``autopar calibrate``: fit the cost model to profiles and observed steps; store the result
(``app.cli.calibration_store``) as the name's next version. A refused calibration prints one
``error:`` line, exits with status 2 and stores nothing.
"""

import json
import re
from pathlib import Path
from typing import Annotated, Any

import typer
import yaml
from pydantic import ValidationError

from app.cli import cli
from app.cli._common import fail
from app.cli.calibration_store import STORE_ENV, default_store, load_calibration, save_calibration
from app.common.names import CALIBRATION_NAME_PATTERN
from costmodel.api import estimate
from costmodel.calibration import (
    PARAMETERS,
    CalibrationError,
    CalibrationResult,
    fit_calibration,
)
from costmodel.catalog import SpecError, load_spec
from costmodel.errors import format_validation_error
from costmodel.feasibility import why_it_cannot_have_run
from costmodel.observations import Profile, StepObservation

_NAME = re.compile(CALIBRATION_NAME_PATTERN)
_SPEC_FIELDS = ("model", "training", "cluster", "plan")


# ---- inputs -------------------------------------------------------------------------------------
def _read_structured(path: Path, what: str) -> Any:
    try:
        text = path.read_text()
    except OSError as exc:
        fail(f"{what} file '{path}': {exc.strerror}")
    try:
        return json.loads(text) if path.suffix.lower() == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        fail(f"{what} file '{path}': not valid {path.suffix.lstrip('.').upper() or 'YAML'}: {exc}")


def load_profile(path: Path) -> Profile:
    data = _read_structured(path, "profile")
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        fail(f"profile file '{path}': {format_validation_error(exc)}")


def load_observations(path: Path) -> list[StepObservation]:
    """A YAML/JSON list of observations (or ``{observations: [...]}``); model, training, cluster
    and plan may be preset names, spec files (relative to this file) or inline specs."""
    data = _read_structured(path, "observations")
    if isinstance(data, dict) and "observations" in data:
        data = data["observations"]
    if not isinstance(data, list) or not data:
        fail(f"observations file '{path}': expected a non-empty list of observations")
    observations = []
    for index, item in enumerate(data):
        where = f"observations file '{path}': item {index}"
        if not isinstance(item, dict):
            fail(f"{where}: expected a mapping")
        resolved = dict(item)
        for kind in _SPEC_FIELDS:
            value = item.get(kind)
            if isinstance(value, str) and not Path(value).is_absolute():
                candidate = path.parent / value
                value = str(candidate) if candidate.exists() else value
            if value is not None:
                try:
                    resolved[kind] = load_spec(kind, value)
                except SpecError as exc:
                    fail(f"{where}: {exc}")
        try:
            observation = StepObservation.model_validate(resolved)
        except ValidationError as exc:
            fail(f"{where}: {format_validation_error(exc)}")
        _check_it_could_run(observation, where)
        observations.append(observation)
    return observations


def _check_it_could_run(observation: StepObservation, where: str) -> None:
    try:
        priced = estimate(
            observation.model, observation.training, observation.cluster, observation.plan
        )
    except ValueError as exc:
        fail(f"{where}: {exc}")
    if problem := why_it_cannot_have_run(priced.reasons):
        fail(f"{where}: {problem}")


# ---- the command --------------------------------------------------------------------------------
@cli.command("calibrate")
def calibrate_command(
    name: Annotated[str, typer.Option("--name", "-n", help="Calibration name (versioned).")],
    profile: Annotated[
        list[Path] | None, typer.Option("--profile", "-p", help="Profile file (repeatable).")
    ] = None,
    observations: Annotated[
        list[Path] | None,
        typer.Option("--observations", "-O", help="Observed steps, YAML/JSON (repeatable)."),
    ] = None,
    params: Annotated[
        str | None,
        typer.Option("--params", help="Comma-separated parameters to fit (default: all)."),
    ] = None,
    folds: Annotated[int, typer.Option("--folds", min=2, max=50, help="k-fold validation.")] = 5,
    base: Annotated[
        str | None,
        typer.Option(
            "--base", help="Start from this calibration (file, NAME or NAME@VERSION): recalibrate."
        ),
    ] = None,
    store: Annotated[
        Path | None, typer.Option("--store", help=f"Calibration store (default ${STORE_ENV}).")
    ] = None,
    json_output: Annotated[bool, typer.Option("--json", help="Print the Calibration.")] = False,
) -> None:
    """Fit efficiency parameters to profiles and observed steps, report the error before/after."""
    if not _NAME.match(name):
        fail(f"--name '{name}': use letters, digits, '.', '_' or '-' (up to 100)")
    names = [item.strip() for item in params.split(",") if item.strip()] if params else None
    if names:
        unknown = [item for item in names if item not in PARAMETERS]
        if unknown:
            fail(f"--params: unknown {', '.join(unknown)}; choices: {', '.join(PARAMETERS)}")
    profiles = [load_profile(path) for path in profile or []]
    observed = [obs for path in observations or [] for obs in load_observations(path)]
    inputs: dict[str, Any] = {
        "profiles": [p.name for p in profiles],
        "profile_files": [str(path) for path in profile or []],
        "observation_files": [str(path) for path in observations or []],
        "observations": len(observed),
    }
    start = None
    if base is not None:
        try:
            base_calibration = load_calibration(base, store)
        except ValueError as exc:
            fail(f"--base: {exc}")
        start, inputs["base"] = base_calibration.params, base_calibration.ref
    try:
        result = fit_calibration(profiles, observed, base=start, params=names, k_folds=folds)
    except CalibrationError as exc:
        fail(f"calibration refused: {exc}")
    calibration, path = save_calibration(store or default_store(), name, result, inputs)
    if json_output:
        print(calibration.model_dump_json(indent=2))
        return
    print(format_result(result))
    print(f"stored as {calibration.ref} ({path})")


def format_result(result: CalibrationResult) -> str:
    lines = [f"fitted {len(result.fitted)} parameters to {result.points} points:"]
    for change in result.changes:
        mark = "*" if change.moved else " "
        lines.append(f" {mark} {change.name:<28}{change.before:>11.4g} -> {change.after:<11.4g}")
    if result.not_identifiable:
        lines.append(f"   not constrained by the data: {', '.join(result.not_identifiable)}")
    lines.append(f"MAPE by source ({result.k_folds}-fold held-out | in-sample), before -> after:")
    in_sample = {error.source: error for error in result.in_sample}
    for error in result.held_out:
        fit = in_sample[error.source]
        lines.append(
            f"  {error.source:<34}{error.points:>4}  {100 * error.mape_before:6.1f}% -> "
            f"{100 * error.mape_after:5.1f}%  | {100 * fit.mape_before:6.1f}% -> "
            f"{100 * fit.mape_after:5.1f}%"
        )
    lines.append(
        f"  {'mean over sources':<38}  {100 * result.held_out_mape_before:6.1f}% -> "
        f"{100 * result.held_out_mape_after:5.1f}%"
    )
    lines.extend(f"warning: {warning}" for warning in result.warnings)
    return "\n".join(lines)
