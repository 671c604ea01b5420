"""Import nccl-tests output (``all_reduce_perf`` and friends) as collective samples.

nccl-tests prints, per run, a preamble (version, ``Collective test starting: <name>_perf``, the
``nThread ... iters: N`` settings line, one ``#  Rank r ... on <host> device d ... <GPU name>``
line per rank) and a table with one row per message size:

    size  count  type  redop  [root]  time algbw busbw #wrong  time algbw busbw #wrong
                                      \\___ out-of-place ___/  \\_____ in-place _____/

Times are microseconds (the average over ``iters``), bandwidths GB/s. Older versions omit the
``root`` column; logs from mpirun often prefix lines with ``[1,0]<stdout>:``; pasted docs indent
them. Several runs may follow each other in one file. Each row yields an out-of-place and an
in-place ``CollectiveSample``.

Which collective ran is read from the preamble (test name or binary name) or, failing that,
inferred from ``busbw / algbw`` (nccl-tests PERFORMANCE.md: 2(n-1)/n for all-reduce, (n-1)/n for
reduce-scatter, all-gather and all-to-all, 1 for sendrecv) and the reduction column. The rank
count comes from the rank lines, NCCL's ``nranks`` log, or the same ratio; ranks per node from the
hosts in the rank lines or the caller.
"""

import re
from collections import Counter
from dataclasses import dataclass, field

from costmodel.observations import CollectiveOp, CollectiveSample


class NcclTestsError(ValueError):
    """The text is not usable nccl-tests output; the message says why, in one line."""


_TEST_NAMES: dict[str, CollectiveOp | None] = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "allgather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
    "sendrecv": "p2p",
    # Collectives the cost model does not price (Megatron-style training does not use them).
    "broadcast": None,
    "reduce": None,
    "gather": None,
    "scatter": None,
    "hypercube": None,
}
_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:)?\s*")
_TEST_NAME = re.compile(r"\b(" + "|".join(_TEST_NAMES) + r")_perf\b")
_RANK_LINE = re.compile(
    r"^#\s*Rank\s+(\d+)\s+Group\s+\d+\s+Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$"
)
_NRANKS = re.compile(r"\bnranks (\d+)\b")
_ITERS = re.compile(r"(?<!warmup )(?<!agg )\biters:\s*(\d+)")
_FOOTERS = ("# Out of bounds values", "# Avg bus bandwidth", "# Collective test concluded")
_REDOPS = {"sum", "prod", "max", "min", "avg", "premulsum"}
# Ratios printed with two decimals: compare factors within 3%.
_FACTOR_TOLERANCE = 0.03


@dataclass
class _Section:
    preamble: list[str] = field(default_factory=list)
    has_root: bool = True
    rows: list[list[str]] = field(default_factory=list)


def _lines(text: str) -> list[str]:
    return [_PREFIX.sub("", line, count=1).rstrip() for line in text.splitlines()]


def _is_header(line: str) -> bool:
    words = line.lstrip("#").split()
    return words[:2] == ["size", "count"] and "algbw" in words


def _sections(text: str) -> list[_Section]:
    sections: list[_Section] = []
    current = _Section()
    in_table = False
    for line in _lines(text):
        if _is_header(line):
            if current.rows:  # a new table without the previous one's footer (truncated log)
                sections.append(current)
                current = _Section()
            current.has_root = "root" in line.lstrip("#").split()
            in_table = True
        elif in_table and line[:1].isdigit():
            current.rows.append(line.split())
        elif in_table and line.startswith(_FOOTERS):
            # nccl-tests closes every run with these lines; what follows is the next preamble.
            sections.append(current)
            current, in_table = _Section(), False
        elif not in_table:
            current.preamble.append(line)
        # Anything else inside a table (NCCL INFO logs, units line) is noise between rows.
    if current.rows:
        sections.append(current)
    return [section for section in sections if section.rows]


def _test_op(preamble: list[str]) -> tuple[bool, CollectiveOp | None]:
    """(found, op) from the test or binary name in the preamble; the last name wins."""
    names = [m.group(1) for line in preamble for m in _TEST_NAME.finditer(line)]
    if not names:
        return False, None
    name = names[-1]
    op = _TEST_NAMES[name]
    if op is None:
        raise NcclTestsError(
            f"{name}_perf measures a collective the cost model does not use; import "
            "all_reduce, all_gather, reduce_scatter, alltoall or sendrecv results"
        )
    return True, op


def _topology(preamble: list[str]) -> tuple[int | None, int | None]:
    """(ranks, ranks per node) from the ``# Rank`` lines or NCCL's ``nranks`` log."""
    hosts: list[str] = [m.group(2) for line in preamble if (m := _RANK_LINE.match(line))]
    if hosts:
        return len(hosts), max(Counter(hosts).values())
    counts = [int(m.group(1)) for line in preamble if (m := _NRANKS.search(line))]
    return (max(counts) if counts else None), None


def _factor(op: CollectiveOp, ranks: int) -> float:
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op == "p2p":
        return 1.0
    return (ranks - 1) / ranks


def _measured_ratio(rows: list[list[str]], offset: int) -> float | None:
    """busbw / algbw of the row with the largest algbw (the most significant digits)."""
    best: tuple[float, float] | None = None
    for row in rows:
        algbw, busbw = float(row[offset + 1]), float(row[offset + 2])
        if algbw > 0 and (best is None or algbw > best[0]):
            best = (algbw, busbw)
    return None if best is None else best[1] / best[0]


def _infer_op(redop: str, ratio: float | None, ranks: int | None) -> CollectiveOp:
    reduces = redop.lower() in _REDOPS
    candidates: list[CollectiveOp] = (
        ["all_reduce", "reduce_scatter"] if reduces else ["all_gather", "all_to_all", "p2p"]
    )
    if ratio is None:
        raise NcclTestsError("cannot tell which collective ran (no test name, no bandwidth)")
    if ranks is not None:
        matching = [op for op in candidates if abs(_factor(op, ranks) - ratio) <= _FACTOR_TOLERANCE]
    elif reduces:
        # 2(n-1)/n >= 1 for all-reduce, (n-1)/n < 1 for reduce-scatter.
        matching = ["all_reduce" if ratio >= 1 - _FACTOR_TOLERANCE else "reduce_scatter"]
    else:
        matching = ["p2p"] if abs(ratio - 1) <= _FACTOR_TOLERANCE else ["all_gather", "all_to_all"]
    if len(matching) != 1:
        names = " or ".join(matching) if matching else "no supported collective"
        raise NcclTestsError(
            f"cannot tell which collective ran (busbw/algbw = {ratio:.3f} fits {names}); "
            "give the test name (op)"
        )
    return matching[0]


def _infer_ranks(op: CollectiveOp, ratio: float | None) -> int | None:
    if ratio is None or op == "p2p":
        return 2 if op == "p2p" else None
    if op == "all_reduce":
        return round(2.0 / (2.0 - ratio)) if ratio < 2.0 else None
    return round(1.0 / (1.0 - ratio)) if ratio < 1.0 else None


def _float(token: str, what: str, size: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise NcclTestsError(f"row of size {size}: {what} '{token}' is not a number") from None


def _section_samples(
    section: _Section,
    op: CollectiveOp | None,
    ranks: int | None,
    ranks_per_node: int | None,
) -> list[CollectiveSample]:
    offset = 5 if section.has_root else 4  # first out-of-place column (time)
    rows = [row for row in section.rows if len(row) >= offset + 4]
    if not rows:
        raise NcclTestsError("the results table has no complete rows")
    found, named_op = _test_op(section.preamble)
    text_ranks, text_per_node = _topology(section.preamble)
    ratio = _measured_ratio(rows, offset)
    ranks = ranks or text_ranks
    op = op or (named_op if found else None) or _infer_op(rows[0][3], ratio, ranks)
    ranks = ranks or _infer_ranks(op, ratio)
    if ranks is None or ranks < 2:
        raise NcclTestsError("cannot tell how many ranks ran; give ranks")
    if ratio is not None and abs(_factor(op, ranks) - ratio) > _FACTOR_TOLERANCE:
        raise NcclTestsError(
            f"busbw/algbw = {ratio:.3f} does not match {op} on {ranks} ranks "
            f"({_factor(op, ranks):.3f}): wrong test name or rank count"
        )
    per_node = ranks_per_node or text_per_node
    if per_node is None:
        raise NcclTestsError(
            f"the output does not list ranks per host ({ranks} ranks); give ranks_per_node"
        )
    iters = [int(m.group(1)) for line in section.preamble if (m := _ITERS.search(line))]
    repeats = iters[-1] if iters else 1
    samples = []
    for row in rows:
        size = row[0]
        if int(size) == 0:
            continue  # nccl-tests' zero-byte warm-up rows carry no bandwidth information
        for in_place, start in ((False, offset), (True, offset + 4)):
            if len(row) < start + 4:
                continue
            wrong = row[start + 3]
            if wrong not in ("0", "N/A"):
                raise NcclTestsError(
                    f"row of size {size} reports {wrong} wrong values: the run failed its own "
                    "correctness check"
                )
            time_us = _float(row[start], "time", size)
            samples.append(
                CollectiveSample(
                    op=op,
                    size_B=float(size),
                    ranks=ranks,
                    ranks_per_node=min(per_node, ranks),
                    dtype=row[2],
                    in_place=in_place,
                    median_s=time_us * 1e-6,
                    repeats=repeats,
                    source="nccl-tests",
                )
            )
    return samples


def parse_nccl_tests(
    text: str,
    *,
    op: CollectiveOp | None = None,
    ranks: int | None = None,
    ranks_per_node: int | None = None,
) -> list[CollectiveSample]:
    """Samples of every run in ``text``; ``op``/``ranks``/``ranks_per_node`` override what the
    text says (needed when a bare table is pasted without its preamble)."""
    sections = _sections(text)
    if not sections:
        raise NcclTestsError(
            "no nccl-tests results table found (expected a '#  size  count  type ... algbw' "
            "header followed by rows)"
        )
    samples: list[CollectiveSample] = []
    for section in sections:
        samples.extend(_section_samples(section, op, ranks, ranks_per_node))
    if not samples:
        raise NcclTestsError("the results tables hold only zero-byte rows")
    return samples


def nccl_tests_device(text: str) -> str | None:
    """The GPU name the rank lines report ('NVIDIA A100-SXM4-80GB'), if they agree on one."""
    names = {m.group(3).strip() for line in _lines(text) if (m := _RANK_LINE.match(line))}
    names.discard("")
    return names.pop() if len(names) == 1 else None
