"""Helpers shared by CLI commands: one-line errors with exit code 2, spec loading."""

import sys
from typing import Annotated, Literal, NoReturn, overload

import typer

from costmodel.catalog import SpecKind, load_spec
from costmodel.errors import SpecError
from costmodel.frameworks import Framework
from costmodel.specs import ClusterSpec, ModelSpec, Plan, TrainingSpec
from costmodel.specs.base import Spec

# Exit status for bad input, as click uses for usage errors: scripts can tell it from a crash (1).
EXIT_BAD_INPUT = 2


# Exit status for well-formed input that has no answer: the plan does not fit, no plan fits.
EXIT_NO_FIT = 3


def no_fit(message: str) -> NoReturn:
    """Print ``error: <message>`` as one line on stderr and exit with status 3."""
    print(f"error: {' '.join(str(message).split())}", file=sys.stderr)
    raise typer.Exit(code=EXIT_NO_FIT)


def fail(message: str) -> NoReturn:
    """Print ``error: <message>`` as one line on stderr and exit with status 2."""
    one_line = " ".join(str(message).split())
    print(f"error: {one_line}", file=sys.stderr)
    raise typer.Exit(code=EXIT_BAD_INPUT)


FrameworkOption = Annotated[
    Framework | None,
    typer.Option(
        "--framework",
        help="Runtime the plans are for: megatron, deepspeed, torchtitan or any (default: the "
        "training spec's).",
    ),
]


def with_framework(training: TrainingSpec, framework: str | None) -> TrainingSpec:
    """The training spec, for ``framework`` when one is given."""
    return training if framework is None else training.model_copy(update={"framework": framework})


@overload
def load_or_fail(kind: Literal["model"], value: str) -> ModelSpec: ...
@overload
def load_or_fail(kind: Literal["cluster"], value: str) -> ClusterSpec: ...
@overload
def load_or_fail(kind: Literal["training"], value: str) -> TrainingSpec: ...
@overload
def load_or_fail(kind: Literal["plan"], value: str) -> Plan: ...
@overload
def load_or_fail(kind: SpecKind, value: str) -> Spec: ...
def load_or_fail(kind: SpecKind, value: str) -> Spec:
    try:
        return load_spec(kind, value)
    except SpecError as exc:
        fail(str(exc))
