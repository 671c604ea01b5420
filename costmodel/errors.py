"""Readable errors for bad input, shared by the catalog loader, the CLI, the search and the API.

``field_errors`` is the one translator of pydantic validation errors: it turns a
``ValidationError`` (or FastAPI's list of error dicts) into ``FieldError(path, reason)`` pairs,
paths in one notation (``model.groups[0].gpu``). ``format_validation_error`` renders them as the
CLI's one line; ``search.request.format_request_error`` and ``app.errors.validation_details``
render from the same pairs.
"""

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError

Loc = tuple[int | str, ...]


class SpecError(ValueError):
    """A spec could not be resolved or validated; the message is one line meant for users."""


class FieldError(NamedTuple):
    """One problem with the input: where it is and what is wrong."""

    path: str
    """Dotted path with list indexes in brackets (``model.groups[0].gpu``); "" for the whole
    input."""
    reason: str
    """What is wrong, without pydantic's "Value error, " noise."""


# pydantic puts the name of the union member it tried into an error's location
# (``groups.0.gpu.GpuSpec.bf16_tflops``, ``constraints.tp.list[union[int,str,bool]]``). Field
# names are snake_case, so a location part that is a class name (capitalised), a builtin type or
# a wrapper schema tag (``function-after[...]``, ``constrained-str``) is such a member name.
_UNION_MEMBER = re.compile(
    r"^(?:[A-Z]\w*|str|int|float|bool|bytes|none|constrained-\w+|[a-z-]+\[.*\])$"
)
# pydantic prefixes messages raised inside validators with the exception kind; users need only
# the reason.
_MESSAGE_PREFIXES = ("Value error, ", "Assertion failed, ")
# Checks written as model validators name the field they blame at the start of their message
# (``constraints.tp: ...``, ``cluster.groups[a100].price_per_gpu_hour: ...``).
_LEADING_PATH = re.compile(r"^([a-z_]\w*(?:\.[a-z_]\w*|\[[^\]]*\])*): (.+)$", re.S)
# One line stays readable with a handful of problems; the rest are counted.
_MAX_ERRORS_SHOWN = 5


def field_path(loc: Iterable[int | str], prefix: str = "") -> str:
    """``("groups", 0, "gpu")`` -> ``groups[0].gpu``; ``prefix`` (``model``) goes in front."""
    text = prefix
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def split_leading_path(message: str) -> tuple[str | None, str]:
    """``"constraints.tp: no allowed value"`` -> ``("constraints.tp", "no allowed value")``;
    ``(None, message)`` when the message does not start with a field path."""
    match = _LEADING_PATH.match(message)
    return (match.group(1), match.group(2)) if match else (None, message)


def _within(path: str, field: str) -> bool:
    return not field or path == field or path.startswith((f"{field}.", f"{field}["))


def _join(head: str, path: str) -> str:
    if not head or not path:
        return head or path
    return head + path if path.startswith("[") else f"{head}.{path}"


def _clean_message(message: str) -> str:
    for noise in _MESSAGE_PREFIXES:
        message = message.removeprefix(noise)
    return " ".join(message.split())


def _is_type_mismatch(error_type: str) -> bool:
    # "string_type", "model_type", "dict_type"...: the input was not of this union branch's type.
    return error_type.endswith("_type")


def field_errors(
    errors: ValidationError | Iterable[Mapping[str, Any]],
    *,
    prefix: str | Sequence[int | str] = "",
) -> list[FieldError]:
    """Each distinct problem of a validation error once, as a field path and a reason.

    ``errors`` is a ``ValidationError`` or its ``errors()`` dicts (FastAPI's, with the request
    part such as ``body`` already removed from each ``loc``). ``prefix`` names what was
    validated (``"model"`` or ``("model",)``), so a bad layer count reads
    ``model.num_layers``. Union member names are dropped from paths; when a field accepts several
    types (``gpu: str | GpuSpec``), branches that merely had the wrong type give way to a branch
    with a real complaint. A message that starts with a path inside its own location
    (``constraints.tp: ...`` raised by a model validator) is split into that path and the rest.
    """
    if isinstance(errors, ValidationError):
        errors = errors.errors(include_url=False)
    head = (prefix,) if isinstance(prefix, str) else tuple(prefix)
    head_text = field_path(part for part in head if part != "")

    entries: list[tuple[Loc, bool, str, str]] = []
    for error in errors:
        loc = tuple(error.get("loc", ()))
        kept = tuple(
            part for part in loc if not (isinstance(part, str) and _UNION_MEMBER.match(part))
        )
        message = _clean_message(str(error.get("msg", "invalid")))
        entries.append((kept, len(kept) != len(loc), str(error.get("type", "")), message))

    substantive = [loc for loc, _, kind, _ in entries if not _is_type_mismatch(kind)]
    found: dict[FieldError, None] = {}
    for loc, in_union, kind, message in entries:
        # Drop "wrong type for this branch" when some other branch says what is really wrong.
        if (
            in_union
            and _is_type_mismatch(kind)
            and any(other[: len(loc)] == loc for other in substantive)
        ):
            continue
        path = field_path(loc)
        named, rest = split_leading_path(message)
        if named is not None and _within(named, path):
            path, message = named, rest
        found.setdefault(FieldError(_join(head_text, path), message))
    return list(found)


def format_validation_error(
    exc: ValidationError | Iterable[Mapping[str, Any]], prefix: str = ""
) -> str:
    """One line naming each bad field path and the reason (the CLI's and the loaders' message).

    ``prefix`` names the spec (``model``), so a bad layer count reads
    ``model.num_layers: Input should be greater than or equal to 1``; several reasons for one
    field are joined with "or"; after five fields the rest are counted.
    """
    reasons: dict[str, list[str]] = {}
    for path, reason in field_errors(exc, prefix=prefix):
        reasons.setdefault(path, []).append(reason)
    parts = [
        f"{path}: {' or '.join(messages)}" if path else " or ".join(messages)
        for path, messages in reasons.items()
    ]
    hidden = len(parts) - _MAX_ERRORS_SHOWN
    text = "; ".join(parts[:_MAX_ERRORS_SHOWN])
    if hidden > 0:
        text += f"; ... and {hidden} more"
    return text
