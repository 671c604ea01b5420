"""Hand-made starting points: the layouts practitioners reach for first.

Studies are warm-started with the best of these (``enqueue_trial``), so even a short study never
returns something worse than the textbook layout. Each family is a filter over the valid rows of a
``GroupSpace`` (so every seed is valid by construction) plus fixed options:

- Megatron PTD-P (Narayanan et al. SC'21 Sec. 3): tensor parallelism inside a node (any degree
  up to the node), the pipeline depth and interleaving as free choices, data parallelism over
  the rest, distributed optimizer, sequence parallelism with no, selective or full recompute
  (Korthikanti et al. 2022), micro-batch 1;
- FSDP / ZeRO-3 (torchtitan's default for models up to ~70B): data parallelism only, with full or
  selective recompute;
- 2D FSDP + TP (torchtitan, Llama 3 70B): tensor parallelism inside a node, ZeRO-3 across nodes.

Every family uses as many GPUs as it can (largest dp for its tp x pp x cp).
"""

import numpy as np

from search.space import OPTION_DIMS, RECOMPUTE_NAMES, STRUCT_DIMS, GroupSpace

Table = dict[str, np.ndarray]

# (family, zero_stage, recompute, sequence parallel)
_FAMILY_OPTIONS = {
    "megatron": [(1, "none", True), (1, "selective", True), (1, "full", True)],
    "fsdp": [(3, "full", False), (3, "selective", False)],
    "fsdp_tp": [(3, "selective", True), (3, "full", True)],
}


def _node_tp(space: GroupSpace) -> int:
    """Largest valid tp that fits in one node (its NVLink domain)."""
    return int(_tps_in_node(space).max())


def _tps_in_node(space: GroupSpace) -> np.ndarray:
    """Valid tp degrees that fit in one node (all of them if none does)."""
    tps = np.unique(space.rows["tp"])
    inside = tps[tps <= space.group.gpus_per_node]
    return inside if inside.size else tps[:1]


def _family_rows(space: GroupSpace, family: str) -> np.ndarray:
    rows = space.rows
    basic = (rows["cp"] == 1) & (rows["ep"] == rows["ep"].min())
    mbs_one = rows["micro_batch_size"] == rows["micro_batch_size"].min()
    if family == "megatron":
        mask = basic & mbs_one & np.isin(rows["tp"], _tps_in_node(space))
    elif family == "fsdp":
        mask = basic & (rows["tp"] == rows["tp"].min()) & (rows["pp"] == rows["pp"].min())
    else:
        mask = basic & mbs_one & (rows["tp"] == _node_tp(space)) & (rows["pp"] == rows["pp"].min())
    picked = np.flatnonzero(mask)
    if picked.size == 0:
        return picked
    # Keep the largest dp of each (tp, pp, vpp, micro-batch): use every GPU the layout can.
    keys = np.stack([rows[dim][picked] for dim in ("tp", "pp", "vpp", "micro_batch_size")], axis=1)
    dp = rows["dp"][picked]
    order = np.lexsort((-dp, *keys.T[::-1]))
    first = np.ones(order.size, dtype=bool)
    first[1:] = np.any(keys[order][1:] != keys[order][:-1], axis=1)
    return picked[order[first]]


def heuristic_plans(space: GroupSpace) -> Table:
    """Candidate plans (estimate_many columns) of every family that the space allows."""
    parts: list[Table] = []
    for family, choices in _FAMILY_OPTIONS.items():
        rows = _family_rows(space, family)
        if rows.size == 0:
            continue
        for zero, recompute, sp in choices:
            option = {
                "zero_stage": zero,
                "offload_optimizer": 0,
                "recompute": RECOMPUTE_NAMES.index(recompute),
                "sequence_parallel": int(sp),
            }
            kept = rows[_offered(space, rows, option)]
            part = {dim: space.rows[dim][kept] for dim in STRUCT_DIMS}
            part.update({dim: np.full(kept.size, value) for dim, value in option.items()})
            parts.append(part)
    if not parts:
        return {dim: np.zeros(0, dtype=np.int64) for dim in (*STRUCT_DIMS, *OPTION_DIMS)}
    return {dim: np.concatenate([part[dim] for part in parts]) for dim in parts[0]}


def _offered(space: GroupSpace, rows: np.ndarray, option: dict[str, int]) -> np.ndarray:
    """Mask of the rows whose class offers this option combination (constraints may remove
    it, and one-rank rows keep only their canonical ZeRO stage)."""
    offered = []
    for table in space.options:
        match = np.ones(len(table["zero_stage"]), dtype=bool)
        for dim, value in option.items():
            match &= table[dim] == value
        offered.append(bool(match.any()))
    return np.asarray(offered)[space.row_class[rows]]
