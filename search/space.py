"""The valid homogeneous plan space of one node group, enumerated as numpy arrays.

Validity is encoded, not discovered: every enumerated plan passes the cost model's structural
rules (``costmodel.feasibility.Violation``: divisibility, GPU count, batch, interleaving), and
only memory can make it infeasible. The space has two layers:

- structural rows (tp, pp, cp, dp, micro_batch_size, vpp, ep), built by cross-joining each
  dimension's divisor list and filtering by the rules that couple dimensions; plans may use fewer
  GPUs than the group has (dp*tp*pp*cp <= GPUs);
- options (zero_stage, offload_optimizer, recompute, sequence_parallel), a small table of
  combinations valid for each class of row.

Two canonical forms keep every plan distinct (so counts are honest and nothing is priced twice):
with one data-parallel rank (dp*cp = 1) ZeRO shards over nothing, so only the smallest allowed
stage is kept (stage >= 1 when the optimizer is offloaded); and sequence parallelism is on
whenever tp > 1 unless the request constrains it, because in the cost model it moves the same
tensor-parallel bytes as plain TP while storing and processing less (Korthikanti et al. 2022
Sec. 4.2.2), so plans without it are dominated. Offloading the optimizer needs ZeRO >= 1 (Megatron
``--optimizer-cpu-offload`` requires the distributed optimizer; DeepSpeed offloads ZeRO states).
"""

import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property, reduce
from typing import Any

import numpy as np

from costmodel.flops import LayerShape
from costmodel.frameworks import allowed
from costmodel.pipeline_split import head_layers, resolve_splits
from costmodel.specs import ModelSpec, NodeGroup, Plan, TrainingSpec
from costmodel.specs.plan import Recompute
from search.constraints import DimFilter, SearchScope

# Structural dimensions, in the order trials sample them (and the table is sorted by).
STRUCT_DIMS = ("tp", "pp", "cp", "dp", "micro_batch_size", "vpp", "ep", "etp")
OPTION_DIMS = ("zero_stage", "offload_optimizer", "recompute", "sequence_parallel")
# Index = the cost model's code.
RECOMPUTE_NAMES: tuple[Recompute, ...] = ("none", "selective", "full")


class SpaceError(ValueError):
    """No valid plan: the message names the field (or constraint) that rules everything out."""


def divisors(n: int) -> list[int]:
    """The divisors of ``n``, ascending."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})


def _fmt(values: list[Any], limit: int = 12) -> str:
    shown = ", ".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values[:limit])
    return shown + (", ..." if len(values) > limit else "")


def tp_divisor(model: ModelSpec) -> int:
    """tp must divide heads, KV heads and the FFN width(s): it divides their gcd."""
    parts = [model.num_attention_heads, model.kv_heads, model.ffn_size]
    if model.moe is not None:
        parts.append(model.moe.expert_ffn_hidden_size)
    return reduce(math.gcd, parts)


def pipeline_degrees(num_layers: int, *, explicit: bool) -> list[int]:
    """Pipeline degrees to search. Any pp up to num_layers is valid (uneven splits), but
    practitioners run the degrees that split the layers evenly, or evenly once the embedding and
    the loss count as a layer each (Megatron's account-for flags: divisors of L + 1 and L + 2),
    and powers of two (Llama 3.1 405B: 126 layers on pp 16). The search tries those unless the
    request names pp values itself, which are then all allowed."""
    if explicit:
        return list(range(1, num_layers + 1))
    nice = set(divisors(num_layers)) | set(divisors(num_layers + 1)) | set(divisors(num_layers + 2))
    nice |= {2**k for k in range(num_layers.bit_length())}
    return sorted(pp for pp in nice if pp <= num_layers)


def virtual_stage_degrees(num_layers: int) -> list[int]:
    """Interleaving degrees to search: 1-8 and the divisors of num_layers (+1, +2)."""
    degrees = set(range(1, 9)) | set(divisors(num_layers))
    degrees |= set(divisors(num_layers + 1)) | set(divisors(num_layers + 2))
    return sorted(v for v in degrees if v <= num_layers)


# Per-dimension domains -----------------------------------------------------------------------
def _restrict(dim: str, candidates: list[Any], filters: dict[str, DimFilter], why: str) -> list:
    kept = filters[dim].keep(candidates) if dim in filters else candidates
    if not kept:
        raise SpaceError(
            f"constraints.{dim}: no allowed value is valid ({why}: {_fmt(candidates)})"
        )
    return kept


def dimension_domains(
    model: ModelSpec, training: TrainingSpec, filters: dict[str, DimFilter], batch_field: str
) -> dict[str, list[Any]]:
    """Values each dimension may take on its own (before rules that couple dimensions)."""
    gbs = training.global_batch_size
    tp_base = tp_divisor(model)
    domains: dict[str, list[Any]] = {
        "tp": _restrict(
            "tp",
            divisors(tp_base),
            filters,
            f"tp divides num_attention_heads={model.num_attention_heads}, "
            f"num_kv_heads={model.kv_heads} and the FFN width",
        ),
        "pp": _restrict(
            "pp",
            pipeline_degrees(model.num_layers, explicit="pp" in filters),
            filters,
            "every pipeline stage holds at least one layer: pp <= num_layers",
        ),
        "vpp": _restrict(
            "vpp",
            allowed(training.framework, "vpp", virtual_stage_degrees(model.num_layers)),
            filters,
            "vpp chunks split the layers (or the layers plus the embedding and loss slots)",
        ),
        "cp": _restrict(
            "cp",
            allowed(training.framework, "cp", divisors(training.seq_length)),
            filters,
            "cp divides seq_length (deepspeed: no context parallelism)",
        ),
        "dp": _restrict("dp", divisors(gbs), filters, f"dp divides {batch_field}={gbs}"),
        "micro_batch_size": _restrict(
            "micro_batch_size", divisors(gbs), filters, f"dp*micro_batch_size divides {batch_field}"
        ),
        "zero_stage": _restrict(
            "zero_stage",
            allowed(training.framework, "zero_stage", [0, 1, 2, 3]),
            filters,
            f"ZeRO stages {training.framework} runs",
        ),
        "offload_optimizer": _restrict(
            "offload_optimizer",
            allowed(training.framework, "offload_optimizer", [False, True]),
            filters,
            f"offload settings {training.framework} runs",
        ),
        "recompute": _restrict("recompute", list(RECOMPUTE_NAMES), filters, "modes"),
    }
    if model.moe is None:
        domains["ep"] = _restrict("ep", [1], filters, "the model has no MoE layers, so ep is")
    else:
        domains["ep"] = _restrict(
            "ep", divisors(model.moe.num_experts), filters, "ep divides num_experts"
        )
    # Absent: unconstrained, i.e. on exactly when tp > 1 (see the module docstring).
    sp = filters.get("sequence_parallel")
    if sp is not None:
        domains["sequence_parallel"] = sp.keep([False, True])
    return domains


# Structural rows -----------------------------------------------------------------------------
Table = dict[str, np.ndarray]


def _cross(table: Table, dim: str, values: list[int]) -> Table:
    size = len(next(iter(table.values()))) if table else 1
    out = {name: np.repeat(column, len(values)) for name, column in table.items()}
    out[dim] = np.tile(np.asarray(values, dtype=np.int64), size)
    return out


def _where(table: Table, keep: np.ndarray) -> Table:
    return {name: column[keep] for name, column in table.items()}


def _rows(table: Table) -> int:
    return len(next(iter(table.values())))


def _check(table: Table, message: str) -> Table:
    if _rows(table) == 0:
        raise SpaceError(message)
    return table


def structural_rows(
    model: ModelSpec,
    training: TrainingSpec,
    group: NodeGroup,
    domains: dict[str, list[Any]],
    filters: dict[str, DimFilter],
    batch_field: str,
) -> Table:
    """Every (tp, pp, cp, dp, micro_batch_size, vpp, ep) that passes the coupled rules."""
    gpus, layers, gbs = group.num_gpus, model.num_layers, training.global_batch_size
    where = f"group '{group.name}' ({gpus} GPUs)"
    table = _cross(_cross({}, "tp", domains["tp"]), "pp", domains["pp"])
    table = _cross(table, "cp", domains["cp"])
    width = table["tp"] * table["pp"] * table["cp"]
    table = _check(
        _where(table, width <= gpus),
        f"cluster: {where} has fewer GPUs than the smallest allowed tp*pp*cp ({int(width.min())})",
    )
    table = _cross(table, "vpp", domains["vpp"])
    zeros = np.zeros_like(table["pp"])
    first, _, _ = resolve_splits(
        layers,
        table["pp"],
        table["vpp"],
        zeros,
        zeros,
        head_layers(LayerShape.of(model), training.seq_length),
    )
    table = _check(
        _where(table, (first > 0) & ((table["vpp"] == 1) | (table["pp"] > 1))),
        f"constraints.vpp: no allowed (pp, vpp) splits num_layers={layers} into stages of "
        "vpp chunks (pipeline_split), or vpp > 1 with pp = 1",
    )
    table = _cross(table, "dp", domains["dp"])
    used = table["dp"] * table["tp"] * table["pp"] * table["cp"]
    table = _check(
        _where(table, used <= gpus),
        f"cluster: {where} is too small for any allowed dp*tp*pp*cp (smallest: {int(used.min())})",
    )
    if "num_gpus" in filters:
        used = table["dp"] * table["tp"] * table["pp"] * table["cp"]
        allowed = np.array([filters["num_gpus"].allows(int(n)) for n in used], dtype=bool)
        table = _check(
            _where(table, allowed),
            f"constraints.num_gpus: no valid layout on {where} uses an allowed number of GPUs",
        )
    table = _cross(table, "micro_batch_size", domains["micro_batch_size"])
    table = _check(
        _where(table, gbs % (table["dp"] * table["micro_batch_size"]) == 0),
        f"{batch_field}: {gbs} is not divisible by dp*micro_batch_size for any allowed dp "
        f"({_fmt(domains['dp'])}) and micro_batch_size ({_fmt(domains['micro_batch_size'])})",
    )
    microbatches = gbs // (table["dp"] * table["micro_batch_size"])
    table = _check(
        _where(table, (table["vpp"] == 1) | (microbatches % table["pp"] == 0)),
        "constraints.vpp: interleaving (vpp > 1) needs the micro-batch count to be a multiple of "
        "pp; no allowed layout has one",
    )
    table = _cross(table, "ep", domains["ep"])
    table = _expert_tensor_parallel(model, table, filters, training.framework)
    order = np.lexsort([table[dim] for dim in reversed(STRUCT_DIMS)])
    return {dim: table[dim][order] for dim in STRUCT_DIMS}


def _expert_tensor_parallel(
    model: ModelSpec, table: Table, filters: dict[str, DimFilter], framework: str = "any"
) -> Table:
    """etp per row: the attention's tp (Megatron's default) or 1 (experts whole on each rank,
    what Megatron-Core recommends for fine-grained MoE), with the expert ranks ep x etp tiling
    tp x cp x dp (MoE parallel folding). Dense models keep etp = tp, which means nothing."""
    if model.moe is None:
        table = {**table, "etp": table["tp"].copy()}
    else:
        # etp_one = 1 (experts unsharded) only where the framework can launch etp = 1.
        both = _cross(table, "etp_one", [0, 1] if allowed(framework, "etp", [1]) else [0])
        etp = np.where(both["etp_one"] == 1, 1, both["tp"])
        keep = (both["etp_one"] == 0) | (both["tp"] > 1)  # etp = tp = 1 listed once
        keep &= (both["tp"] * both["cp"] * both["dp"]) % (both["ep"] * etp) == 0
        keep &= model.moe.expert_ffn_hidden_size % etp == 0
        both = {name: column for name, column in both.items() if name != "etp_one"}
        table = _check(
            _where({**both, "etp": etp}, keep),
            "constraints.ep: ep x etp must divide tp x cp x dp (the expert ranks tile the "
            "attention ranks); no allowed layout has such an ep",
        )
    if "etp" in filters:
        wanted = np.array([filters["etp"].allows(int(v)) for v in table["etp"]], dtype=bool)
        table = _check(_where(table, wanted), "constraints.etp: no valid layout has that etp")
    return table


# Options ---------------------------------------------------------------------------------------
def option_tables(domains: dict[str, list[Any]]) -> tuple[Table, Table, Table, Table]:
    """Option combinations for the four row classes, indexed 2 * (dp*cp == 1) + (tp == 1)."""
    sp_domain = domains.get("sequence_parallel")
    tables = []
    for single_rank in (False, True):
        for tp_one in (False, True):
            if sp_domain is None:
                sp_values = [not tp_one]
            else:
                sp_values = [value for value in sp_domain if not (value and tp_one)]
            combos = []
            for offload in domains["offload_optimizer"]:
                zeros = [z for z in domains["zero_stage"] if z >= 1 or not offload]
                if single_rank and zeros:
                    zeros = zeros[:1]  # ZeRO over one rank changes nothing: keep one stage
                for zero in zeros:
                    for recompute in domains["recompute"]:
                        for sp in sp_values:
                            combos.append(
                                (zero, int(offload), RECOMPUTE_NAMES.index(recompute), int(sp))
                            )
            columns = np.asarray(combos, dtype=np.int64).reshape(len(combos), len(OPTION_DIMS))
            tables.append({dim: columns[:, i] for i, dim in enumerate(OPTION_DIMS)})
    return tables[0], tables[1], tables[2], tables[3]


# One group's space -----------------------------------------------------------------------------
@dataclass
class GroupSpace:
    """The valid homogeneous plans of one node group at one global batch size."""

    group: NodeGroup
    training: TrainingSpec
    rows: Table  # structural rows, sorted by STRUCT_DIMS
    options: tuple[Table, Table, Table, Table]
    label_group: bool = False  # whether plans name their group (clusters with several groups)
    row_class: np.ndarray = field(init=False)

    def __post_init__(self) -> None:
        self.row_class = 2 * (self.rows["dp"] * self.rows["cp"] == 1) + (self.rows["tp"] == 1)

    @property
    def global_batch_size(self) -> int:
        """Sequences per step of this space."""
        return self.training.global_batch_size

    @property
    def num_rows(self) -> int:
        """Structural rows of the space."""
        return _rows(self.rows)

    @cached_property
    def size(self) -> int:
        """Number of valid plans."""
        counts = np.bincount(self.row_class, minlength=4)
        return int(sum(int(counts[c]) * _rows(self.options[c]) for c in range(4) if counts[c]))

    def expand(self, start: int, stop: int) -> Table:
        """All plans of structural rows [start, stop), as estimate_many columns ``(n_plans,)``."""
        parts: list[Table] = []
        classes = self.row_class[start:stop]
        for cls, options in enumerate(self.options):
            count = _rows(options)
            picked = np.flatnonzero(classes == cls) + start
            if count == 0 or picked.size == 0:
                continue
            part = {dim: np.repeat(self.rows[dim][picked], count) for dim in STRUCT_DIMS}
            part.update({dim: np.tile(options[dim], picked.size) for dim in OPTION_DIMS})
            parts.append(part)
        if not parts:
            return {dim: np.zeros(0, dtype=np.int64) for dim in (*STRUCT_DIMS, *OPTION_DIMS)}
        return {dim: np.concatenate([part[dim] for part in parts]) for dim in parts[0]}

    def chunks(self, plans_per_chunk: int) -> Iterator[Table]:
        """The space's plans as ``estimate_many`` columns, about ``plans_per_chunk`` at a time."""
        per_row = max(1, max(_rows(options) for options in self.options))
        step = max(1, plans_per_chunk // per_row)
        for start in range(0, self.num_rows, step):
            yield self.expand(start, min(start + step, self.num_rows))

    def plan(self, values: dict[str, Any]) -> Plan:
        """The Plan of one enumerated combination (columns as ``expand`` returns them)."""
        return plan_from_values(values, self.group.name if self.label_group else None)


def plan_from_values(values: dict[str, Any], group: str | None) -> Plan:
    """The ``Plan`` of one row of ``estimate_many`` columns (codes decoded), on ``group``."""
    tp = int(values["tp"])
    return Plan(
        dp=int(values["dp"]),
        tp=tp,
        pp=int(values["pp"]),
        cp=int(values["cp"]),
        ep=int(values["ep"]),
        etp=int(values["etp"]) if int(values["etp"]) != tp else None,
        vpp=int(values["vpp"]),
        micro_batch_size=int(values["micro_batch_size"]),
        zero_stage=int(values["zero_stage"]),
        recompute=RECOMPUTE_NAMES[int(values["recompute"])],
        sequence_parallel=bool(values["sequence_parallel"]) and tp > 1,
        offload_optimizer=bool(values["offload_optimizer"]),
        group=group,
    )


def batch_field(request: SearchScope) -> str:
    """The request field that sets the batch sizes, for messages."""
    return "global_batch_sizes" if request.global_batch_sizes else "training.global_batch_size"


def group_space(request: SearchScope, group: NodeGroup, global_batch_size: int) -> GroupSpace:
    """The valid homogeneous plan space of ``group`` at ``global_batch_size``."""
    training = request.training_for(global_batch_size)
    filters = request.filters()
    field_name = batch_field(request)
    domains = dimension_domains(request.model, training, filters, field_name)
    rows = structural_rows(request.model, training, group, domains, filters, field_name)
    options = option_tables(domains)
    space = GroupSpace(
        group=group,
        training=training,
        rows=rows,
        options=options,
        label_group=len(request.cluster.groups) > 1,
    )
    if space.size == 0:
        raise SpaceError(
            "constraints: sequence_parallel, zero_stage and offload_optimizer leave no valid "
            "combination (sequence parallelism needs tp > 1; offloading needs zero_stage >= 1)"
        )
    return space


def homogeneous_spaces(request: SearchScope) -> list[GroupSpace]:
    """The non-empty spaces of every (group, global batch) pair; SpaceError if all are empty."""
    spaces, errors = [], []
    for group in request.search_groups:
        for batch in request.batch_sizes:
            try:
                spaces.append(group_space(request, group, batch))
            except SpaceError as exc:
                errors.append(str(exc))
    if not spaces:
        raise SpaceError(errors[0])
    return spaces


def check_space(request: SearchScope) -> None:
    """Raise SpaceError unless the request has a valid plan to search.

    A single-group search needs a valid homogeneous plan. Across several groups a plan may spread
    its stages over groups, so only the per-dimension domains must be non-empty there.
    """
    if len(request.search_groups) == 1:
        homogeneous_spaces(request)
        return
    for batch in request.batch_sizes:
        dimension_domains(
            request.model, request.training_for(batch), request.filters(), batch_field(request)
        )
