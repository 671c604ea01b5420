"""Built-in presets, and one way to turn user input into a validated spec.

A spec argument (CLI option, API field, search request) may be a preset name (``llama3-70b``),
a path to a JSON or YAML file, a mapping, or an already-built spec. ``load_spec`` accepts all of
them, so every entry point resolves specs the same way and reports problems in one readable line
(``SpecError``). Presets are YAML files shipped as package data under ``costmodel/presets/`` and
read through ``importlib.resources``, so they work from an installed wheel as well as a checkout.
"""

import json
import os
from collections.abc import Mapping
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Literal, cast, overload

import yaml
from pydantic import ValidationError

from costmodel.errors import SpecError, format_validation_error
from costmodel.hardware import UnknownGpuError, lookup_gpu
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.base import Spec

__all__ = [
    "SPEC_KINDS",
    "SpecError",
    "SpecKind",
    "list_cluster_presets",
    "list_model_presets",
    "list_plan_presets",
    "list_presets",
    "list_training_presets",
    "load_cluster_preset",
    "load_model_preset",
    "load_plan_preset",
    "load_preset",
    "load_spec",
    "load_training_preset",
]

SpecKind = Literal["model", "cluster", "training", "plan"]
SpecSource = str | os.PathLike[str] | Mapping[str, Any] | Spec

SPEC_KINDS: tuple[SpecKind, ...] = ("model", "cluster", "training", "plan")
_SPEC_TYPES: dict[str, type[Spec]] = {
    "model": ModelSpec,
    "cluster": ClusterSpec,
    "training": TrainingSpec,
    "plan": Plan,
}
_PRESET_FOLDERS = {
    "model": "models",
    "cluster": "clusters",
    "training": "trainings",
    "plan": "plans",
}
_PRESET_SUFFIX = ".yaml"
_FILE_SUFFIXES = (".json", ".yaml", ".yml")


# Presets --------------------------------------------------------------------------------------
def _spec_type(kind: str) -> type[Spec]:
    try:
        return _SPEC_TYPES[kind]
    except KeyError:
        raise SpecError(f"unknown spec kind '{kind}'; choices: {', '.join(SPEC_KINDS)}") from None


def _preset_folder(kind: str) -> Traversable:
    _spec_type(kind)
    return resources.files("costmodel").joinpath("presets").joinpath(_PRESET_FOLDERS[kind])


def list_presets(kind: SpecKind) -> list[str]:
    """Names of the built-in presets of one kind, sorted."""
    return _preset_names(kind)


def load_preset(kind: SpecKind, name: str) -> Spec:
    """Validated built-in preset; names are case-insensitive."""
    return _load_preset(kind, name)


def _load_preset(kind: str, name: str) -> Spec:
    key = name.strip().lower()
    if key not in _preset_names(kind):
        raise _unknown_preset(kind, name, may_be_file=False)
    origin = f"{kind} preset '{key}'"
    text = _preset_folder(kind).joinpath(key + _PRESET_SUFFIX).read_text(encoding="utf-8")
    return _validate(kind, _parse_text(text, origin, _PRESET_SUFFIX), origin=origin)


def list_model_presets() -> list[str]:
    """Names of the built-in model presets."""
    return list_presets("model")


def list_cluster_presets() -> list[str]:
    """Names of the built-in cluster presets."""
    return list_presets("cluster")


def list_training_presets() -> list[str]:
    """Names of the built-in training presets."""
    return list_presets("training")


def list_plan_presets() -> list[str]:
    """Names of the built-in plan presets."""
    return list_presets("plan")


def load_model_preset(name: str) -> ModelSpec:
    """The built-in model preset ``name``."""
    return cast(ModelSpec, load_preset("model", name))


def load_cluster_preset(name: str) -> ClusterSpec:
    """The built-in cluster preset ``name``."""
    return cast(ClusterSpec, load_preset("cluster", name))


def load_training_preset(name: str) -> TrainingSpec:
    """The built-in training preset ``name``."""
    return cast(TrainingSpec, load_preset("training", name))


def load_plan_preset(name: str) -> Plan:
    """The built-in plan preset ``name``."""
    return cast(Plan, load_preset("plan", name))


def _preset_names(kind: str) -> list[str]:
    return sorted(
        entry.name.removesuffix(_PRESET_SUFFIX)
        for entry in _preset_folder(kind).iterdir()
        if entry.is_file() and entry.name.endswith(_PRESET_SUFFIX)
    )


def _unknown_preset(kind: str, value: str, *, may_be_file: bool) -> SpecError:
    what = "preset or an existing file" if may_be_file else "preset"
    choices = ", ".join(_preset_names(kind)) or "(none)"
    return SpecError(f"unknown {kind} '{value}': not a {what}; {kind} presets: {choices}")


# Any source -> spec ---------------------------------------------------------------------------
@overload
def load_spec(kind: Literal["model"], value: SpecSource) -> ModelSpec: ...
@overload
def load_spec(kind: Literal["cluster"], value: SpecSource) -> ClusterSpec: ...
@overload
def load_spec(kind: Literal["training"], value: SpecSource) -> TrainingSpec: ...
@overload
def load_spec(kind: Literal["plan"], value: SpecSource) -> Plan: ...
@overload
def load_spec(kind: str, value: SpecSource) -> Spec: ...
def load_spec(kind: str, value: SpecSource) -> Spec:
    """Resolve a preset name, a JSON/YAML file path, a mapping or a spec into a validated spec.

    A string that names a preset wins over a file of the same name; anything with a path
    separator or a ``.json``/``.yaml``/``.yml`` suffix is read as a file. Raises ``SpecError``
    (a ``ValueError``) with a one-line message naming the argument and the problem.
    """
    spec_type = _spec_type(kind)
    if isinstance(value, spec_type):
        _check_references(kind, value)
        return value
    if isinstance(value, Mapping):
        return _validate(kind, value, origin=None)
    if isinstance(value, str | os.PathLike):
        return _load_named(kind, os.fspath(value))
    raise SpecError(
        f"{kind}: expected a preset name, a file path or a mapping, got {type(value).__name__}"
    )


def _load_named(kind: str, value: str) -> Spec:
    looks_like_path = os.sep in value or "/" in value or value.lower().endswith(_FILE_SUFFIXES)
    if not looks_like_path and value.strip().lower() in _preset_names(kind):
        return _load_preset(kind, value)
    path = Path(value).expanduser()
    if not path.is_file():
        if looks_like_path:
            raise SpecError(f"{kind} file '{value}' does not exist")
        raise _unknown_preset(kind, value, may_be_file=True)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecError(f"cannot read {kind} file '{value}': {exc}") from None
    document = _parse_text(text, f"{kind} file '{value}'", path.suffix.lower())
    return _validate(kind, document, origin=f"{kind} file '{value}'")


def _parse_text(text: str, origin: str, suffix: str) -> object:
    if suffix == ".json":
        try:
            return json.loads(text)
        except json.JSONDecodeError as exc:
            raise SpecError(
                f"{origin}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{origin}: invalid YAML{where}: {' '.join(problem.split())}") from None


def _validate(kind: str, document: object, *, origin: str | None) -> Spec:
    where = f"{origin}: " if origin else ""
    if document is None:
        raise SpecError(f"{where}empty document, expected a mapping of {kind} fields")
    if not isinstance(document, Mapping):
        raise SpecError(
            f"{where}expected a mapping of {kind} fields, got {type(document).__name__}"
        )
    try:
        spec = _spec_type(kind).model_validate(dict(document))
    except ValidationError as exc:
        raise SpecError(where + format_validation_error(exc, prefix=kind)) from None
    _check_references(kind, spec, where=where)
    return spec


def _check_references(kind: str, spec: Spec, *, where: str = "") -> None:
    """Catch names the spec alone cannot check, so a typo fails at load time, not mid-estimate."""
    if isinstance(spec, ClusterSpec):
        for index, group in enumerate(spec.groups):
            if isinstance(group.gpu, str):
                try:
                    lookup_gpu(group.gpu)
                except UnknownGpuError as exc:
                    raise SpecError(f"{where}{kind}.groups[{index}].gpu: {exc}") from None
