"""How a homogeneous plan splits its layers over pipeline stages, as Megatron-Core expresses it.

Megatron-Core gives the first and last pipeline stages their own layer counts
(``--decoder-first-pipeline-num-layers`` / ``--decoder-last-pipeline-num-layers``) and splits the
rest evenly over the middle stages; ``--account-for-embedding-in-pipeline-split`` and
``--account-for-loss-in-pipeline-split`` count the embedding and the loss as one layer of their
stage. So a split is (first, middle, last), with

    first + (pp - 2) * middle + last = num_layers            (pp > 2; pp = 2: first + last)

and under interleaving (vpp virtual chunks per stage) every stage's layers split into vpp
chunks: ``middle % vpp == 0``, and the first (last) stage's layers — or its layers plus the
embedding (loss) slot — divide by vpp.

A plan that names no split gets the one a practitioner would pass: the even split when
``pp * vpp`` divides the layers (Megatron's default), otherwise the balanced uneven split that
minimizes the slowest stage, where the first stage also runs the embedding and the last the
output layer and loss, each weighed in layers of work (``head_layers``, from FLOPs): e.g. 126
layers on 16 stages become 7 / 8 x 14 / 7, the layout Meta ran Llama 3.1 405B with.
"""

from functools import lru_cache

import numpy as np

from costmodel.flops import LayerShape

Split = tuple[int, int, int]  # (first, middle, last) layers; pp = 1: (L, L, L)
INVALID: Split = (-1, -1, -1)


def head_layers(shape: LayerShape, seq_length: int) -> float:
    """The output layer and loss in layers of work: their FLOPs per token over a layer's
    (forward; the backward scales both alike). The embedding lookup is memory-bound and tiny."""
    layer = (
        shape.attention_proj_flops + shape.dense_mlp_flops + shape.attention_core_flops(seq_length)
    )
    return shape.logits_flops / layer if layer else 0.0


def stage_fits_chunks(layers: int, vpp: int, extra_slot: bool) -> bool:
    """Whether a stage of ``layers`` splits into vpp chunks; an end stage (``extra_slot``) may
    count its embedding or loss as a layer when that makes it divide (Megatron's account-for
    flags)."""
    return layers % vpp == 0 or (extra_slot and (layers + 1) % vpp == 0)


def is_valid(num_layers: int, pp: int, vpp: int, split: Split) -> bool:
    """Whether ``split`` (first, middle, last stage layers) covers ``num_layers`` over ``pp``
    stages, each stage dividing into ``vpp`` chunks."""
    first, middle, last = split
    if pp == 1:
        return first == num_layers and vpp == 1
    if min(first, last) < 1 or (pp > 2 and middle < 1):
        return False
    middles = (pp - 2) * middle if pp > 2 else 0
    if first + middles + last != num_layers:
        return False
    if vpp == 1:
        return True
    return (
        stage_fits_chunks(first, vpp, True)
        and stage_fits_chunks(last, vpp, True)
        and (pp == 2 or middle % vpp == 0)
    )


@lru_cache(maxsize=4096)
def balanced_split(num_layers: int, pp: int, vpp: int, head: float) -> Split:
    """The valid (first, middle, last) whose slowest stage is fastest; INVALID if none is.

    Stage work in layers: first + a negligible embedding, middle, last + ``head``. Ties go to
    the lighter first stage: under 1F1B it holds the most micro-batches in flight, so its
    memory sets the plan's peak.
    """
    if pp == 1:
        return (num_layers, num_layers, num_layers) if vpp == 1 else INVALID
    best: tuple[float, int, Split] | None = None
    for middle in _middle_candidates(num_layers, pp, vpp):
        rest = num_layers - (pp - 2) * middle
        for first in range(1, rest):
            split = (first, middle if pp > 2 else max(first, rest - first), rest - first)
            if not is_valid(num_layers, pp, vpp, split):
                continue
            slowest = max(first, middle if pp > 2 else 0, split[2] + head)
            key = (slowest, first, split)
            if best is None or key < best:
                best = key
    return best[2] if best is not None else INVALID


def _middle_candidates(num_layers: int, pp: int, vpp: int) -> list[int]:
    """Middle-stage sizes worth trying: multiples of vpp within two chunks of the even share
    (the slowest stage is never lighter than num_layers / pp, and a middle stage far above it
    makes itself the slowest), so the search stays O(num_layers) per (pp, vpp)."""
    if pp == 2:
        return [0]
    step = vpp if vpp > 1 else 1
    share = num_layers // pp
    low = max(step, (share // step - 2) * step)
    high = (share // step + 3) * step
    return [m for m in range(low, high + 1, step) if (pp - 2) * m < num_layers]


def resolve_split(num_layers: int, pp: int, vpp: int, first: int, last: int, head: float) -> Split:
    """A plan's split: explicit (``first``/``last`` > 0; the other completes it evenly), even
    when pp * vpp divides the layers, else balanced. INVALID when nothing valid exists."""
    if pp == 1:
        return (
            (num_layers, num_layers, num_layers)
            if vpp == 1 and first in (0, num_layers)
            else (INVALID)
        )
    if first or last:
        return _explicit(num_layers, pp, vpp, first, last)
    if num_layers % (pp * vpp) == 0:
        even = num_layers // pp
        return (even, even, even)
    return balanced_split(num_layers, pp, vpp, head)


def _explicit(num_layers: int, pp: int, vpp: int, first: int, last: int) -> Split:
    """Megatron's rule: the layers the first and last stage do not take split evenly over the
    middle stages; an unset end takes the middle stages' count."""
    if pp == 2:
        first = first or num_layers - last
        last = last or num_layers - first
        split = (first, max(first, last), last)
        return split if is_valid(num_layers, pp, vpp, split) else INVALID
    known = first + last
    unset = (first == 0) + (last == 0)
    # middle stages (pp - 2) plus each unset end share what is left equally.
    share, remainder = divmod(num_layers - known, pp - 2 + unset)
    if remainder or share < 1:
        return INVALID
    split = (first or share, share, last or share)
    return split if is_valid(num_layers, pp, vpp, split) else INVALID


def resolve_splits(
    num_layers: int,
    pp: np.ndarray,
    vpp: np.ndarray,
    first: np.ndarray,
    last: np.ndarray,
    head: float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``resolve_split`` over arrays of plans (computed once per distinct combination)."""
    # One integer key per combination: a 1-D unique is far cheaper than a row-wise one, and the
    # search prices millions of plans through here.
    pp, vpp, first, last = (np.asarray(a, dtype=np.int64) for a in (pp, vpp, first, last))
    if pp.size == 1:  # one plan (the scalar face): no table to build
        split = resolve_split(
            num_layers, int(pp[0]), int(vpp[0]), int(first[0]), int(last[0]), head
        )
        first_layers, middle_layers, last_layers = split
        return (
            np.array([first_layers], dtype=np.int64),
            np.array([middle_layers], dtype=np.int64),
            np.array([last_layers], dtype=np.int64),
        )
    base = int(max(num_layers, pp.max(initial=0), vpp.max(initial=0))) + 1
    base = max(base, int(first.max(initial=0)) + 1, int(last.max(initial=0)) + 1)
    if base**4 >= 2**62:
        raise ValueError(f"pipeline degrees or stage layers too large to price (>= {base})")
    keys = ((pp * base + vpp) * base + first) * base + last
    unique, inverse = np.unique(keys, return_inverse=True)
    splits = np.empty((unique.size, 3), dtype=np.int64)
    for row, key in enumerate(unique.tolist()):
        key, last_value = divmod(key, base)
        key, first_value = divmod(key, base)
        pp_value, vpp_value = divmod(key, base)
        splits[row] = resolve_split(num_layers, pp_value, vpp_value, first_value, last_value, head)
    chosen = splits[inverse.reshape(-1)]
    return chosen[:, 0], chosen[:, 1], chosen[:, 2]


def stages_fit_chunks(stage_layers: list[int], vpp: int) -> bool:
    """Every stage of an explicit split fits vpp chunks (the ends with their extra slot)."""
    ends = {0, len(stage_layers) - 1}
    return all(
        stage_fits_chunks(layers, vpp, index in ends) for index, layers in enumerate(stage_layers)
    )


def stage_layer_counts(num_layers: int, pp: int, split: Split) -> list[int]:
    """Layers of each of the pp stages."""
    first, middle, last = split
    if pp == 1:
        return [num_layers]
    return [first, *([middle] * (pp - 2)), last]


def describe_rule(num_layers: int, pp: int, vpp: int) -> str:
    """Why no split exists, for infeasibility reasons."""
    if vpp > 1 and pp == 1:
        return "vpp > 1 needs pp > 1"
    return (
        f"no split of num_layers={num_layers} over pp={pp} stages"
        + (f" with vpp={vpp} chunks each" if vpp > 1 else "")
        + " (first + (pp - 2) x middle + last; "
        + (
            "each stage's layers divisible by vpp, the first/last counting the embedding/loss"
            if vpp > 1
            else "every stage at least one layer"
        )
        + ")"
    )
