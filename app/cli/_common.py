"""Helpers shared by CLI commands: one-line errors with exit code 2, spec loading."""

import sys
from typing import NoReturn

import typer

from costmodel.catalog import SpecKind, load_spec
from costmodel.errors import SpecError
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


def load_or_fail(kind: SpecKind, value: str) -> Spec:
    try:
        return load_spec(kind, value)
    except SpecError as exc:
        fail(str(exc))
