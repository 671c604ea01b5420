"""Where ``autopar calibrate`` keeps calibrations, and how commands that accept ``--calibration``
find them: ``<store>/<name>/v<version>.json`` (``--store``, default ``$AUTOPAR_CALIBRATIONS`` or
``~/.autopar/calibrations``); each fit adds a version. The service keeps its own in its database
(``POST /v1/calibrations``); ``GET /v1/calibrations/{ref}`` returns the same document.
"""

import os
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from pydantic import ValidationError

from app.cli._common import fail
from costmodel.calibration import Calibration, CalibrationResult
from costmodel.errors import format_validation_error
from costmodel.params import EfficiencyParams

STORE_ENV = "AUTOPAR_CALIBRATIONS"

CalibrationOption = Annotated[
    str | None,
    typer.Option(
        "--calibration",
        help="Price with a calibration from `autopar calibrate`: a file, NAME or NAME@VERSION.",
    ),
]


def default_store() -> Path:
    return Path(os.environ.get(STORE_ENV) or Path.home() / ".autopar" / "calibrations")


def _versions(store: Path, name: str) -> list[int]:
    folder = store / name
    if not folder.is_dir():
        return []
    return sorted(
        int(match.group(1))
        for entry in folder.iterdir()
        if (match := re.fullmatch(r"v(\d+)\.json", entry.name))
    )


def save_calibration(
    store: Path, name: str, result: CalibrationResult, inputs: dict[str, Any]
) -> tuple[Calibration, Path]:
    versions = _versions(store, name)
    calibration = Calibration(
        name=name,
        version=(versions[-1] + 1) if versions else 1,
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        inputs=inputs,
        result=result,
    )
    folder = store / name
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"v{calibration.version}.json"
    partial = path.with_suffix(".json.partial")
    partial.write_text(calibration.model_dump_json(indent=2) + "\n")
    partial.replace(path)  # atomic: readers never see half a calibration
    return calibration, path


def load_calibration(reference: str, store: Path | None = None) -> Calibration:
    """A calibration by file path, ``name`` (latest version) or ``name@version``.

    Raises ``ValueError`` with a one-line message when it cannot be found or read."""
    path = Path(reference)
    if not path.is_file():
        name, _, version = reference.partition("@")
        store = store or default_store()
        versions = _versions(store, name)
        if not versions:
            raise ValueError(f"no calibration named '{name}' in {store}")
        if version and (not version.isdigit() or int(version) not in versions):
            known = ", ".join(f"{name}@{v}" for v in versions)
            raise ValueError(f"calibration '{reference}' not found; known: {known}")
        path = store / name / f"v{int(version) if version else versions[-1]}.json"
    try:
        return Calibration.model_validate_json(path.read_text())
    except OSError as exc:
        raise ValueError(f"calibration file '{path}': {exc.strerror}") from None
    except ValidationError as exc:
        raise ValueError(f"calibration file '{path}': {format_validation_error(exc)}") from None


def params_or_fail(reference: str | None) -> EfficiencyParams | None:
    """The parameters of ``--calibration`` (None: uncalibrated); a bad reference exits 2."""
    if reference is None:
        return None
    try:
        return load_calibration(reference).params
    except ValueError as exc:
        fail(f"--calibration: {exc}")
