"""Exhaustive search: price every valid homogeneous plan with the vectorized cost model.

This is the ground truth the Optuna samplers are measured against. Plans are expanded and priced
chunk by chunk (memory stays flat however large the space), and only the best candidates of each
chunk are kept: the top ``keep`` by score for one objective, the Pareto front for two.
"""

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from search.objectives import REPORTED, Evaluation, Metric, pareto_mask
from search.request import SearchRequest
from search.space import OPTION_DIMS, STRUCT_DIMS, GroupSpace

# Plans priced per estimate_many call: large enough to amortize numpy's per-call overhead,
# small enough that a chunk's ~40 float arrays stay within a few tens of MB.
CHUNK_PLANS = 65_536
PLAN_COLUMNS = (*STRUCT_DIMS, *OPTION_DIMS)

ProgressFn = Callable[[int, int | None, float | None], None]
StopFn = Callable[[], bool]


@dataclass
class Enumeration:
    candidates: list[Evaluation]  # best first (pareto: the front, fastest first)
    evaluated: int
    feasible: int
    status: str  # completed | stopped | timeout (the last two: part of the space unpriced)


def _price(request: SearchRequest, space: GroupSpace, plans: dict[str, np.ndarray]) -> dict:
    arrays = request.price_group(space, plans)
    kept = {name: plans[name] for name in PLAN_COLUMNS}
    kept.update({name: arrays[name] for name in (*REPORTED, "peak_memory_gib", "memory_ratio")})
    return kept


def _scores(pool: dict[str, np.ndarray], metrics: Sequence[Metric]) -> np.ndarray:
    return np.stack([metric.score(pool[metric.key]) for metric in metrics], axis=1)


def _select(pool: dict[str, np.ndarray], metrics: Sequence[Metric], keep: int) -> np.ndarray:
    """Indices of the rows worth keeping: top ``keep`` (one metric) or the front (two).

    Ties go to the plan enumerated first (fewer tp, pp, cp... ; see ``space.STRUCT_DIMS``), so
    the ranking does not depend on how the space was chunked.
    """
    scores = _scores(pool, metrics)
    if len(metrics) == 2:
        return np.flatnonzero(pareto_mask(scores))
    candidates = np.arange(len(scores))
    if len(scores) > keep:
        threshold = np.partition(-scores[:, 0], keep - 1)[keep - 1]
        candidates = np.flatnonzero(-scores[:, 0] <= threshold)  # the top keep and their ties
    order = np.lexsort((pool["index"][candidates], -scores[candidates, 0]))
    return candidates[order[:keep]]


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
    total = sum(space.size for space in spaces)
    pool: dict[str, np.ndarray] | None = None
    evaluated = feasible = 0
    status = "completed"
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
            pool = _merge(pool, feasible_rows, _select(feasible_rows, metrics, keep))
            pool = {name: column[_select(pool, metrics, keep)] for name, column in pool.items()}
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
