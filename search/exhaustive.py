"""Exhaustive search: price every valid homogeneous plan with the vectorized cost model.

This is the ground truth the Optuna samplers are measured against. Plans are expanded and priced
chunk by chunk (memory stays flat however large the space), and only the candidates the ranking
can use are kept (``search.ranking``: one entry per layout, near-ties folded): for one objective
the best plan of each of the best ``keep x LAYOUTS_PER_ENTRY`` layouts with its plans within
``NEAR_TIE_TOLERANCE`` of it (at most ``MAX_EQUIVALENTS`` more); for two, the Pareto front.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from search.objectives import REPORTED, Evaluation, Metric, pareto_mask
from search.pricing import price_group
from search.ranking import MAX_EQUIVALENTS, NEAR_TIE_TOLERANCE
from search.request import SearchRequest
from search.result import Status
from search.space import OPTION_DIMS, STRUCT_DIMS, GroupSpace

# Plans priced per estimate_many call: large enough to amortize numpy's per-call overhead,
# small enough that a chunk's ~40 float arrays stay within a few tens of MB.
CHUNK_PLANS = 65_536
PLAN_COLUMNS = (*STRUCT_DIMS, *OPTION_DIMS)
# The columns of a plan's layout (search.ranking.layout_key): all but the micro-batch, which is
# a near-tie knob like the options; "space" tells the global batch sizes apart.
LAYOUT_COLUMNS = ("space", *(dim for dim in STRUCT_DIMS if dim != "micro_batch_size"))
# Layouts kept per ranked entry: near-tie layouts (dp/cp splits) fold into one entry.
LAYOUTS_PER_ENTRY = 4

ProgressFn = Callable[[int, int | None, float | None], None]
StopFn = Callable[[], bool]


@dataclass
class Enumeration:
    """What an exhaustive search kept (best first), how many plans it priced and found feasible, and
    whether it finished."""

    candidates: list[Evaluation]  # best first (pareto: the front, fastest first)
    evaluated: int
    feasible: int
    status: Status  # completed | stopped | timeout (the last two: part of the space unpriced)


def _price(request: SearchRequest, space: GroupSpace, plans: dict[str, np.ndarray]) -> dict:
    arrays = price_group(request, space, plans)
    kept = {name: plans[name] for name in PLAN_COLUMNS}
    kept.update({name: arrays[name] for name in (*REPORTED, "peak_memory_gib", "memory_ratio")})
    return kept


def _scores(pool: dict[str, np.ndarray], metrics: Sequence[Metric]) -> np.ndarray:
    return np.stack([metric.score(pool[metric.key]) for metric in metrics], axis=1)


def _select(pool: dict[str, np.ndarray], metrics: Sequence[Metric], keep: int) -> np.ndarray:
    """Indices of the rows worth keeping (module docstring): best first for one metric, the
    front for two.

    Ties go to the plan enumerated first (fewer tp, pp, cp... ; see ``space.STRUCT_DIMS``), so
    the ranking does not depend on how the space was chunked. Selecting a chunk, then the
    merged pool, keeps every row that selecting the whole space at once would: a row's group
    only ranks higher, and its group's best is only closer, in a part of the space.
    """
    scores = _scores(pool, metrics)
    if len(metrics) == 2:
        return np.flatnonzero(pareto_mask(scores))
    order = np.lexsort((pool["index"], -scores[:, 0]))  # best first
    if not len(order):
        return order
    values = pool[metrics[0].key][order]
    # Near-ties of a layout's best, and of a mesh's best (the ranking folds both).
    kept = _near_best(_layout_ids(pool)[order], values, keep)
    kept |= _near_best(_mesh_ids(pool)[order], values, keep)
    return order[kept]


def _near_best(ids: np.ndarray, values: np.ndarray, keep: int) -> np.ndarray:
    """Mask of the rows (best first) of the best ``keep x LAYOUTS_PER_ENTRY`` groups that are
    within the tolerance of their group's best, at most 1 + ``MAX_EQUIVALENTS`` per group."""
    _, first = np.unique(ids, return_index=True)  # where each group's best is
    first.sort()
    chosen = np.zeros(ids.max() + 1, dtype=bool)
    chosen[ids[first[: keep * LAYOUTS_PER_ENTRY]]] = True
    best = np.empty(ids.max() + 1)
    best[ids[first]] = values[first]
    close = np.abs(values - best[ids]) <= NEAR_TIE_TOLERANCE * np.abs(best[ids])
    # Rank of each row within its group (best first): the close rows are a prefix of them.
    grouped = np.argsort(ids, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(ids[grouped]) != 0])
    sizes = np.diff(np.r_[starts, len(ids)])
    rank = np.empty(len(ids), dtype=np.int64)
    rank[grouped] = np.arange(len(ids)) - np.repeat(starts, sizes)
    return chosen[ids] & close & (rank <= MAX_EQUIVALENTS)


def _group_ids(columns: list[np.ndarray]) -> np.ndarray:
    stacked = np.stack([np.asarray(column, dtype=np.int64) for column in columns], axis=1)
    _, ids = np.unique(stacked, axis=0, return_inverse=True)
    return ids.reshape(-1)


def _layout_ids(pool: dict[str, np.ndarray]) -> np.ndarray:
    """One integer per distinct layout of the rows (``search.ranking.layout_key``)."""
    return _group_ids([pool[name] for name in LAYOUT_COLUMNS])


def _mesh_ids(pool: dict[str, np.ndarray]) -> np.ndarray:
    """One integer per distinct mesh (``search.ranking.mesh_key``): the layout with dp x cp as
    one number, and the tokens per GPU per micro-batch (micro-batch / cp, reduced)."""
    mbs = np.asarray(pool["micro_batch_size"], dtype=np.int64)
    cp = np.asarray(pool["cp"], dtype=np.int64)
    common = np.gcd(mbs, cp)
    others = [pool[name] for name in LAYOUT_COLUMNS if name not in ("dp", "cp")]
    return _group_ids([*others, pool["dp"] * cp, mbs // common, cp // common])


def _worth_pricing(
    rows: dict[str, np.ndarray],
    pool: dict[str, np.ndarray] | None,
    metrics: Sequence[Metric],
    keep: int,
) -> np.ndarray:
    """Mask of new rows that can still enter the selection (one metric): once the pool (best
    first, as ``_select`` leaves it) holds all the layouts and meshes it may, a row must come
    within the tolerance of the weakest one's best, as a better one or a near-tie of one."""
    count = len(rows[metrics[0].key])
    if len(metrics) == 2 or pool is None or not len(pool["tp"]):
        return np.ones(count, dtype=bool)
    metric = metrics[0]
    edges = []
    for ids in (_layout_ids(pool), _mesh_ids(pool)):
        _, first = np.unique(ids, return_index=True)
        if len(first) < keep * LAYOUTS_PER_ENTRY:
            return np.ones(count, dtype=bool)
        edges.append(float(pool[metric.key][first.max()]))
    new = rows[metric.key]
    if metric.direction == "maximize":
        edge = min(edges)
        return new >= edge - NEAR_TIE_TOLERANCE * abs(edge)
    edge = max(edges)
    return new <= edge + NEAR_TIE_TOLERANCE * abs(edge)


def _merge(pool: dict | None, new: dict, rows: np.ndarray) -> dict:
    chosen = {name: column[rows] for name, column in new.items()}
    if pool is None:
        return chosen
    return {name: np.concatenate([pool[name], chosen[name]]) for name in pool}


def enumerate_plans(
    request: SearchRequest,
    spaces: Sequence[GroupSpace],
    metrics: Sequence[Metric],
    *,
    keep: int,
    progress: ProgressFn | None = None,
    should_stop: StopFn | None = None,
    deadline: float | None = None,
) -> Enumeration:
    """Price every plan of ``spaces`` in chunks and keep the best ``keep`` (pareto: the front),
    reporting progress and stopping on ``should_stop`` or ``deadline``."""
    total = sum(space.size for space in spaces)
    pool: dict[str, np.ndarray] | None = None
    evaluated = feasible = 0
    status: Status = "completed"
    offset = 0
    for index, space in enumerate(spaces):
        for plans in space.chunks(CHUNK_PLANS):
            if should_stop is not None and should_stop():
                status = "stopped"
            elif deadline is not None and time.monotonic() > deadline:
                status = "timeout"
            if status != "completed":
                break
            priced = _price(request, space, plans)
            count = len(priced["tp"])
            priced["space"] = np.full(count, index)
            priced["index"] = np.arange(offset, offset + count)  # enumeration order, for ties
            offset += count
            ok = priced["memory_ratio"] <= 1.0
            evaluated += len(ok)
            feasible += int(ok.sum())
            feasible_rows = {name: column[ok] for name, column in priced.items()}
            worth = _worth_pricing(feasible_rows, pool, metrics, keep)
            feasible_rows = {name: column[worth] for name, column in feasible_rows.items()}
            pool = _merge(pool, feasible_rows, _select(feasible_rows, metrics, keep))
            rows = _select(pool, metrics, keep)
            pool = {name: column[rows] for name, column in pool.items()}
            if progress is not None:
                best = float(pool[metrics[0].key][0]) if len(pool["tp"]) else None
                progress(evaluated, total, best)
        if status != "completed":
            break
    return Enumeration(
        candidates=_evaluations(pool, spaces, metrics),
        evaluated=evaluated,
        feasible=feasible,
        status=status,
    )


def _evaluations(
    pool: dict[str, np.ndarray] | None, spaces: Sequence[GroupSpace], metrics: Sequence[Metric]
) -> list[Evaluation]:
    if pool is None or not len(pool["tp"]):
        return []
    scores = _scores(pool, metrics)
    order = np.lexsort((pool["index"], *(-scores[:, i] for i in reversed(range(len(metrics))))))
    results = []
    for row in order:
        space = spaces[int(pool["space"][row])]
        values = {name: pool[name][row] for name in PLAN_COLUMNS}
        results.append(
            Evaluation(
                plan=space.plan(values),
                global_batch_size=space.global_batch_size,
                metrics={name: float(pool[name][row]) for name in (*REPORTED, "peak_memory_gib")},
                memory_ratio=float(pool["memory_ratio"][row]),
            )
        )
    return results
