"""Readable, one-line errors for bad specs, shared by the catalog loader, the CLI and the API."""

import re

from pydantic import ValidationError


class SpecError(ValueError):
    """A spec could not be resolved or validated; the message is one line meant for users."""


# pydantic puts the name of the union member it tried into an error's location
# (``groups.0.gpu.GpuSpec.bf16_tflops``). Spec field names are snake_case, so a location part that
# is a class name (capitalised) or a builtin / wrapper schema tag is such a member name.
_UNION_MEMBER = re.compile(r"^(?:[A-Z]\w*|str|int|float|bool|bytes|none|[a-z-]+\[.*\])$")
# pydantic prefixes messages raised inside validators with the exception kind; users need only
# the reason.
_MESSAGE_PREFIXES = ("Value error, ", "Assertion failed, ")
# One line stays readable with a handful of problems; the rest are counted.
_MAX_ERRORS_SHOWN = 5


def _split_union_member(loc: tuple[int | str, ...]) -> tuple[tuple[int | str, ...], bool]:
    """Location without union member names, and whether one was present."""
    kept = tuple(part for part in loc if not (isinstance(part, str) and _UNION_MEMBER.match(part)))
    return kept, len(kept) != len(loc)


def _format_location(prefix: str, loc: tuple[int | str, ...]) -> str:
    text = prefix
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _clean_message(message: str) -> str:
    for noise in _MESSAGE_PREFIXES:
        if message.startswith(noise):
            message = message[len(noise) :]
    return " ".join(message.split())


def _is_type_mismatch(error_type: str) -> bool:
    # "string_type", "model_type", "dict_type"...: the input was not of this union branch's type.
    return error_type.endswith("_type")


def format_validation_error(exc: ValidationError, prefix: str = "") -> str:
    """One line naming each bad field path and the reason.

    ``prefix`` names the spec (``model``), so a bad layer count reads
    ``model.num_layers: Input should be greater than or equal to 1``. When a field accepts
    several types (``gpu: str | GpuSpec``), the branches that merely had the wrong type are
    dropped in favour of the branch with a real complaint.
    """
    entries: list[tuple[tuple[int | str, ...], bool, str, str]] = []
    for error in exc.errors(include_url=False):
        loc, in_union = _split_union_member(tuple(error["loc"]))
        entries.append((loc, in_union, error["type"], _clean_message(error["msg"])))

    substantive_union_locs = {
        loc for loc, in_union, kind, _ in entries if in_union and not _is_type_mismatch(kind)
    }
    messages_by_loc: dict[tuple[int | str, ...], list[str]] = {}
    for loc, in_union, kind, message in entries:
        # Drop "wrong type for this branch" when some other branch says what is really wrong.
        if (
            in_union
            and _is_type_mismatch(kind)
            and any(other[: len(loc)] == loc for other in substantive_union_locs)
        ):
            continue
        bucket = messages_by_loc.setdefault(loc, [])
        if message not in bucket:
            bucket.append(message)

    parts = [
        f"{_format_location(prefix, loc) or 'input'}: {' or '.join(messages)}"
        for loc, messages in messages_by_loc.items()
    ]
    hidden = len(parts) - _MAX_ERRORS_SHOWN
    text = "; ".join(parts[:_MAX_ERRORS_SHOWN])
    if hidden > 0:
        text += f"; ... and {hidden} more"
    return text
