"""One ranked entry per distinct layout: canonical plans, layouts, near-ties folded together.

A search prices many plans that are the same layout with other knobs, or the same plan written
two ways; ranked as they come, a top 10 holds three to five layouts. The ranking works on these
definitions instead:

- **Canonical plan**: one layout expressed two ways is one plan. Explicit ``stages`` that all
  name one node group with one tp and the plan's dp, or ``replicas`` pipelines that all sit on
  one group with one tp and take equal batch shares, whose stages hold the layers a homogeneous
  plan's stages hold (its default split: even when pp x vpp divides the layers, else the
  balanced one; or Megatron's first/last-stage split, middle stages equal) are that homogeneous
  plan on that group (``group``, that tp, the plan's dp, ``first_stage_layers`` /
  ``last_stage_layers`` when not the default): ``canonical_plan``. A homogeneous plan's
  ``sequence_parallel`` is explicit (tp > 1 when unset). Everything else is its own canonical
  form.
- **Layout**: where the GPUs go, i.e. every Plan field except the near-tie knobs: dp, tp, pp,
  cp, ep, etp, vpp, the node group or the stages (groups, layers, per-stage tp and dp), plus
  the global batch size (and the plan's execution options, which searches do not vary).
- **Near-tie knobs** (``KNOBS``): micro_batch_size, zero_stage, offload_optimizer,
  sequence_parallel and recompute, which change memory and overlap but not the layout; and,
  across layouts, the split of the data ranks between dp and cp at the same tokens per GPU per
  micro-batch (dp 32 with micro-batch 1 and dp 16 x cp 2 with micro-batch 2 put the same
  tokens on every GPU).
- **Near-tie**: within ``NEAR_TIE_TOLERANCE`` (0.5%) of the entry's value on every objective
  (relative; the cost model's own error is far larger).

An **entry** is the best plan of its layout. The layout's other plans within the tolerance are
its ``equivalents``; its plans further away are dropped (a worse choice of knobs for a layout
already listed). A plan whose layout differs from a better entry's only in the dp/cp split, at
the same tokens per GPU, within the tolerance, joins that entry's equivalents too (before its
own layout's entry, if any: the closer kin). ``top_k`` counts entries.
"""

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from costmodel.flops import LayerShape
from costmodel.pipeline_split import INVALID, head_layers, resolve_split, stage_layer_counts
from costmodel.specs import ModelSpec, Plan
from search.objectives import Evaluation, Metric, pareto_mask, spread_along_front

NEAR_TIE_TOLERANCE = 0.005
KNOBS = ("micro_batch_size", "zero_stage", "offload_optimizer", "sequence_parallel", "recompute")
# Equivalents listed per entry (the closest first).
MAX_EQUIVALENTS = 8

Found = tuple[int | None, Evaluation]  # (trial number or None, evaluation)


# Canonical plans ---------------------------------------------------------------------------------
def canonical_plan(
    plan: Plan, model: ModelSpec, *, seq_length: int, label_group: bool = True
) -> Plan:
    """The plan's canonical form (module docstring); ``plan`` itself when it is one already.

    ``label_group``: whether homogeneous plans name their group (clusters with several groups),
    as the search space writes them; ``seq_length`` tells the default uneven split.
    """
    if plan.stages is None:
        if plan.sequence_parallel is None:
            return plan.model_copy(update={"sequence_parallel": plan.tp > 1})
        return plan
    single = _single_placement(plan)
    if single is None:
        return plan
    group, tp = single
    split = _homogeneous_split(plan, model, seq_length)
    if split is None:
        return plan
    fields = plan.model_dump(exclude={"stages", "batch_shares", "group", "tp"})
    fields["sequence_parallel"] = bool(plan.sp) and tp > 1
    fields["first_stage_layers"], fields["last_stage_layers"] = split
    return Plan(**fields, tp=tp, group=group if label_group else None)


def _single_placement(plan: Plan) -> tuple[str, int] | None:
    """(group, tp) when every stage (or pipeline) of ``plan`` runs on one group with one tp and
    every pipeline takes the same share of the batch; None otherwise."""
    if plan.batch_shares is not None and len({round(s, 9) for s in plan.batch_shares}) > 1:
        return None
    places: set[tuple[str, int]] = set()
    for stage in plan.stages or []:
        if stage.replicas is not None:
            places.update((replica.group, replica.tp) for replica in stage.replicas)
        else:
            places.add((stage.group or "", stage.tp or plan.tp))
            if (stage.dp or plan.dp) != plan.dp:
                return None
    return places.pop() if len(places) == 1 else None


def _homogeneous_split(
    plan: Plan, model: ModelSpec, seq_length: int
) -> tuple[int | None, int | None] | None:
    """(first_stage_layers, last_stage_layers) of the homogeneous plan whose stages hold the
    same layers as ``plan``'s (None, None: its default split); None when no homogeneous split
    does (a homogeneous plan's middle stages hold equal layers)."""
    layers = [stage.num_layers for stage in plan.stages or []]
    pp, vpp = len(layers), plan.vpp
    head = head_layers(LayerShape.of(model), seq_length)
    default = resolve_split(model.num_layers, pp, vpp, 0, 0, head)
    if default != INVALID and stage_layer_counts(model.num_layers, pp, default) == layers:
        return None, None
    if pp < 2 or len(set(layers[1:-1])) > 1:
        return None
    explicit = resolve_split(model.num_layers, pp, vpp, layers[0], layers[-1], head)
    if explicit == INVALID or stage_layer_counts(model.num_layers, pp, explicit) != layers:
        return None
    return layers[0], layers[-1]


# Layouts -----------------------------------------------------------------------------------------
def layout_key(plan: Plan, global_batch_size: int) -> str:
    """What an entry stands for: the plan without its near-tie knobs (module docstring)."""
    fields = plan.model_dump(mode="json", exclude=set(KNOBS))
    return _key({"global_batch_size": global_batch_size, **fields})


def mesh_key(plan: Plan, global_batch_size: int) -> str:
    """The layout with dp x cp as one number of data ranks and the tokens each GPU holds per
    micro-batch (micro-batch / cp): layouts that only split those ranks differently share it."""
    fields = plan.model_dump(mode="json", exclude={*KNOBS, "dp", "cp"})
    for stage in fields.get("stages") or []:
        stage.pop("dp", None)
    tokens = Fraction(plan.micro_batch_size, plan.cp)
    return _key(
        {
            "global_batch_size": global_batch_size,
            **fields,
            "data_ranks": plan.dp * plan.cp,
            "tokens_per_gpu": [tokens.numerator, tokens.denominator],
        }
    )


def _key(document: dict[str, Any]) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def differing_fields(plan: Plan, reference: Plan) -> list[str]:
    """Plan fields in which ``plan`` differs from ``reference`` (sequence parallelism compared
    as in effect)."""
    mine, theirs = plan.model_dump(), reference.model_dump()
    mine["sequence_parallel"], theirs["sequence_parallel"] = plan.sp, reference.sp
    return [name for name in mine if mine[name] != theirs[name]]


# Entries -----------------------------------------------------------------------------------------
@dataclass
class Entry:
    """One distinct layout: its best (trial, evaluation) and its near-ties."""

    best: Found
    equivalents: list[Found] = field(default_factory=list)

    @property
    def evaluation(self) -> Evaluation:
        """The best evaluation of the layout."""
        return self.best[1]


def near_tie(a: Evaluation, b: Evaluation, metrics: Sequence[Metric], tolerance: float) -> bool:
    """Whether ``a`` is within ``tolerance`` (relative) of ``b`` on every objective."""
    for value_a, value_b in zip(a.values(metrics), b.values(metrics), strict=True):
        if not (np.isfinite(value_a) and np.isfinite(value_b)):
            return False
        if abs(value_a - value_b) > tolerance * abs(value_b):
            return False
    return True


def ordered(found: Sequence[Found], metrics: Sequence[Metric]) -> list[Found]:
    """Best first by the objective scores (ties: the order given, e.g. enumeration order)."""
    return sorted(found, key=lambda item: tuple(-s for s in item[1].scores(metrics)))


def entries(
    found: Sequence[Found],
    metrics: Sequence[Metric],
    *,
    tolerance: float = NEAR_TIE_TOLERANCE,
) -> list[Entry]:
    """Fold ``found`` (distinct canonical plans) into entries, best first (module docstring).

    Plans go best first. A plan within the tolerance of an entry with the same mesh (layout
    with dp x cp as one number, and the same tokens per GPU) joins it; else, a plan of an
    entry's layout joins it when within the tolerance and is dropped otherwise; any other plan
    starts an entry.
    """
    by_mesh: dict[str, Entry] = {}
    by_layout: dict[str, Entry] = {}
    folded: list[Entry] = []
    for item in ordered(found, metrics):
        evaluation = item[1]
        plan, batch = evaluation.plan, evaluation.global_batch_size
        mesh, layout = mesh_key(plan, batch), layout_key(plan, batch)
        host = by_mesh.get(mesh)
        if host is not None and near_tie(evaluation, host.evaluation, metrics, tolerance):
            host.equivalents.append(item)
            continue
        host = by_layout.get(layout)
        if host is not None:
            if near_tie(evaluation, host.evaluation, metrics, tolerance):
                host.equivalents.append(item)
            continue  # else a worse choice of knobs for a layout already listed
        entry = Entry(item)
        folded.append(entry)
        by_layout[layout] = entry
        by_mesh.setdefault(mesh, entry)
    for entry in folded:
        entry.equivalents = entry.equivalents[:MAX_EQUIVALENTS]  # closest first already
    return folded


def top_entries(
    found: Sequence[Found],
    metrics: Sequence[Metric],
    top_k: int,
    *,
    tolerance: float = NEAR_TIE_TOLERANCE,
) -> tuple[list[Entry], list[Entry] | None]:
    """(the ranked entries, the Pareto front of entries or None): the best ``top_k`` entries
    (one objective), or ``top_k`` entries spread along the front of entries (two)."""
    folded = entries(found, metrics, tolerance=tolerance)
    if len(metrics) != 2:
        return folded[:top_k], None
    scores = np.asarray([entry.evaluation.scores(metrics) for entry in folded]).reshape(-1, 2)
    # folded is best first by the first objective, so the front comes fastest first.
    front = [entry for entry, on in zip(folded, pareto_mask(scores), strict=True) if on]
    front_scores = np.asarray([entry.evaluation.scores(metrics) for entry in front]).reshape(-1, 2)
    picks = sorted(spread_along_front(front_scores, top_k).tolist())
    return [front[i] for i in picks], front
