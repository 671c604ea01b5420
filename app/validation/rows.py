"""One row of ``runs.csv`` -> a Case the cost model can price, or the reason it cannot.

Columns and conventions are the data set's (``validation/README.md``): a blank cell means the
source does not state it; ``notes`` starts with ``prec=``; ``derived:`` lists what the data set
computed from the source's own figures. Where a source leaves something out that a practitioner
would take from the framework's documented default, the Case records that choice in
``assumptions`` so the report can say how many rows lean on it.
"""

import csv
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import ValidationError

from app.validation.cells import (
    float_cell,
    int_cell,
    parse_precision,
    parse_recompute,
    parse_sharding,
    short_source,
)
from app.validation.devset import DEV_SET_IDS
from app.validation.gpus import Generation, generation, gpu_for
from costmodel.errors import format_validation_error
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec, MoESpec, NodeGroup, Plan, TrainingSpec
from costmodel.specs.plan import Recompute
from costmodel.specs.training import Precision

PrecisionClass = Literal["16-bit", "FP8"]
Architecture = Literal["dense", "MoE"]

# The columns the harness reads; a runs.csv without one of them is not this data set.
REQUIRED_COLUMNS = (
    "id",
    "source",
    "model_name",
    "layers",
    "hidden",
    "ffn_hidden",
    "heads",
    "kv_heads",
    "vocab",
    "seq_len",
    "moe_experts",
    "moe_topk",
    "gpu_type",
    "num_gpus",
    "gpus_per_node",
    "tp",
    "pp",
    "dp",
    "cp",
    "ep",
    "vpp",
    "micro_batch",
    "global_batch",
    "recompute",
    "zero_stage_or_fsdp",
    "seq_parallel",
    "measured_tflops_per_gpu",
    "measured_tokens_per_s_per_gpu",
    "measured_step_time_s",
    "measured_mem_gib",
    "notes",
)

# Sources that predate fused attention (FlashAttention, May 2022) or train with dropout.
_UNFUSED_ATTENTION_SOURCES = ("Narayanan", "Korthikanti", "GPT-NeoX")
_DROPOUT_SOURCES = ("Narayanan", "Korthikanti")
# torchtitan computes the loss with PyTorch's cross_entropy on upcast logits (unfused);
# Megatron-LM uses its vocab-parallel kernel and llm-foundry's MPT configs flash-attn's
# fused xentropy (loss_fn: fused_crossentropy).
_UNFUSED_LOSS_SOURCES = ("torchtitan",)
# Megatron-LM at the time reduced gradients after the backward pass, without overlap
# (Korthikanti et al. Sec. 6.3 states it for their data-parallel run).
_NO_GRAD_OVERLAP_SOURCES = ("Narayanan", "Korthikanti")

# Vocabulary of GPT-3-style rows whose source omits it: the GPT-2 BPE's 50,257 tokens, which
# GPT-3 reuses (Brown et al. 2020, Sec. 2.1) and Paxml's C4 GPT configs declare
# (PassThroughVocabulary(size=50257) in paxml/tasks/lm/params/c4.py). Frameworks pad it by
# under 2% (Megatron/NeMo to a multiple of 128 * tp), a negligible share of a step.
_GPT2_BPE_VOCAB = 50257
_GPT3_STYLE_NAMES = ("GPT3-", "GPT-3 ", "GPT-5B (Paxml")

_GA_IN_NOTES = re.compile(r"\bGA=(\d+)")
_FSDP_SIZE = re.compile(r"FSDP size (\d+)")


class DataSetError(ValueError):
    """The data folder is missing or is not the validation data set."""


@dataclass(frozen=True)
class Exclusion:
    """A row the harness does not score, and why."""

    row_id: str
    reason: str


@dataclass(frozen=True)
class Case:
    """A published run as cost-model specs, with the measurement to compare against.

    When the source does not state recompute, ``plan.recompute`` is a placeholder and
    ``recompute_stated`` is False: scoring picks the least recompute whose plan fits.
    """

    row_id: str
    source: str
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    plan: Plan
    recompute_stated: bool
    measured_tokens_per_s_per_gpu: float
    measured_memory_gib: float | None
    gpu_type: str
    assumptions: tuple[str, ...] = field(default=())

    @property
    def gpu(self) -> GpuSpec:
        gpu = self.cluster.groups[0].gpu
        assert isinstance(gpu, GpuSpec)  # rows always carry a resolved spec (see build_cluster)
        return gpu

    @property
    def generation(self) -> Generation:
        return generation(self.gpu)

    @property
    def precision_class(self) -> PrecisionClass:
        return "FP8" if self.training.precision == "fp8" else "16-bit"

    @property
    def architecture(self) -> Architecture:
        return "MoE" if self.model.moe is not None else "dense"

    @property
    def in_dev_set(self) -> bool:
        return self.row_id in DEV_SET_IDS

    @property
    def sweep_key(self) -> tuple[str, str, str, str]:
        """Rows of one sweep: same source, model, GPU and precision; the layout varies."""
        return (self.source, self.model.name, self.gpu.name, self.precision_class)


# Reading ----------------------------------------------------------------------------------------
def read_rows(data_dir: Path) -> list[dict[str, str]]:
    """The rows of ``data_dir/runs.csv``; DataSetError when it is absent or lacks columns."""
    path = data_dir / "runs.csv"
    if not path.is_file():
        raise DataSetError(
            f"no runs.csv in '{data_dir}': pass --data DIR, the folder holding the validation "
            "data set (default ./validation)"
        )
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [name for name in REQUIRED_COLUMNS if name not in (reader.fieldnames or [])]
        if missing:
            raise DataSetError(f"'{path}' lacks the column(s) {', '.join(missing)}")
        return list(reader)


def load_cases(data_dir: Path) -> tuple[list[Case], list[Exclusion]]:
    """Every row of ``data_dir/runs.csv`` as a Case or an Exclusion, in file order."""
    cases: list[Case] = []
    excluded: list[Exclusion] = []
    for row in read_rows(data_dir):
        built = build_case(row)
        if isinstance(built, Exclusion):
            excluded.append(built)
        else:
            cases.append(built)
    return cases, excluded


def _gated_ffn(row: dict[str, str], ffn: int | None, hidden: int, heads: int, kv: int) -> bool:
    """SwiGLU/GeGLU (three FFN matrices) for Llama-family rows, or a non-4h FFN next to GQA.

    The second rule covers Grok-1 (GeGLU experts: 64 layers x 8 experts x 3 x 6144 x 32768
    plus attention = its published 314B parameters) and leaves Nemotron-4 (squared-ReLU,
    ffn = 4h, two matrices) as a two-matrix FFN.
    """
    name = row["model_name"]
    if "Llama" in name or "LLAMA" in name:
        return True
    return ffn is not None and ffn != 4 * hidden and kv != heads


# Building ---------------------------------------------------------------------------------------
@dataclass
class _Shape:
    """The integer cells a Case needs, read once."""

    layers: int | None
    hidden: int | None
    heads: int | None
    vocab: int | None
    seq_len: int | None
    num_gpus: int | None
    tp: int | None
    pp: int | None
    global_batch: int | None

    @classmethod
    def of(cls, row: dict[str, str]) -> "_Shape":
        return cls(
            layers=int_cell(row["layers"]),
            hidden=int_cell(row["hidden"]),
            heads=int_cell(row["heads"]),
            vocab=int_cell(row["vocab"]),
            seq_len=int_cell(row["seq_len"]),
            num_gpus=int_cell(row["num_gpus"]),
            tp=int_cell(row["tp"]),
            pp=int_cell(row["pp"]),
            global_batch=int_cell(row["global_batch"]),
        )

    def missing(self) -> list[str]:
        return [name for name, value in vars(self).items() if value is None]


def _fill_vocab(row: dict[str, str], shape: _Shape, assumptions: list[str]) -> None:
    if shape.vocab is None and row["model_name"].startswith(_GPT3_STYLE_NAMES):
        shape.vocab = _GPT2_BPE_VOCAB
        assumptions.append(f"vocab not stated: GPT-2 BPE ({_GPT2_BPE_VOCAB})")


def _data_parallel(row: dict[str, str], shape: _Shape, cp: int, notes: list[str]) -> int | str:
    """dp, or the reason the row's layout does not add up to its GPU count."""
    assert shape.num_gpus and shape.tp and shape.pp
    model_parallel = shape.tp * shape.pp * cp
    dp = int_cell(row["dp"])
    if dp is not None and dp * model_parallel == shape.num_gpus:
        return dp
    ep = int_cell(row["ep"])
    if dp is not None and ep and dp * ep * model_parallel == shape.num_gpus:
        # Megatron/NeMo place experts on data-parallel ranks: the source's "DP" counts
        # replicas of the expert-parallel group, the cost model's dp counts all data ranks.
        notes.append("dp = GPUs/(tp*pp*cp): source's DP excludes the EP ranks it folds in")
        return dp * ep
    if dp is None and shape.num_gpus % model_parallel == 0:
        notes.append("dp not stated: GPUs/(tp*pp*cp)")
        return shape.num_gpus // model_parallel
    return "dp*tp*pp*cp does not match num_gpus"


def _micro_batch(row: dict[str, str], global_batch: int, dp: int, notes: list[str]) -> int | None:
    """The stated micro-batch, or global_batch / (dp * GA) when the notes give GA."""
    stated = int_cell(row["micro_batch"])
    ga = _GA_IN_NOTES.search(row["notes"])
    if stated is not None:
        if ga and global_batch != dp * stated * int(ga.group(1)):
            # The columns match the measured step time (tokens/s = batch * seq / step): keep them.
            notes.append("notes' GA disagrees with global_batch/(dp*micro_batch); columns used")
        return stated
    if ga and global_batch % (dp * int(ga.group(1))) == 0:
        notes.append("micro-batch not stated: global_batch/(dp*GA)")
        return global_batch // (dp * int(ga.group(1)))
    return None


def _measured_tokens_per_s_per_gpu(row: dict[str, str], shape: _Shape) -> float | str:
    """tokens/s per GPU: the column, else from step time, else from HFU-like TFLOP/s."""
    tokens = float_cell(row["measured_tokens_per_s_per_gpu"])
    if tokens is not None:
        return tokens
    assert shape.global_batch and shape.seq_len and shape.num_gpus
    step = float_cell(row["measured_step_time_s"])
    if step is not None:
        return shape.global_batch * shape.seq_len / step / shape.num_gpus
    tflops = float_cell(row["measured_tflops_per_gpu"])
    if tflops is not None and "[HFU-like]" in row["notes"]:
        return _tokens_from_narayanan_tflops(shape, tflops)
    if tflops is not None:
        return "throughput only as TFLOP/s of an unstated FLOP convention"
    return "no throughput measurement"


def _tokens_from_narayanan_tflops(shape: _Shape, tflops: float) -> float:
    """Narayanan et al. Eq. 3: F = 96 B s l h^2 (1 + s/6h + V/16lh) FLOPs per iteration."""
    b, s, layers, h, vocab = (
        shape.global_batch,
        shape.seq_len,
        shape.layers,
        shape.hidden,
        shape.vocab,
    )
    assert b and s and layers and h and vocab and shape.num_gpus
    flops = 96 * b * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
    step = flops / (tflops * 1e12 * shape.num_gpus)
    return b * s / step / shape.num_gpus


def build_model(row: dict[str, str], shape: _Shape) -> ModelSpec:
    assert shape.layers and shape.hidden and shape.heads and shape.vocab
    ffn = int_cell(row["ffn_hidden"])
    kv_heads = int_cell(row["kv_heads"]) or shape.heads
    experts, top_k = int_cell(row["moe_experts"]), int_cell(row["moe_topk"])
    # Grok-1's expert width is the ffn_hidden column (data set README); every layer is MoE.
    moe = (
        MoESpec(num_experts=experts, top_k=top_k, expert_ffn_hidden_size=ffn or 4 * shape.hidden)
        if experts and top_k
        else None
    )
    gated = _gated_ffn(row, ffn, shape.hidden, shape.heads, kv_heads)
    return ModelSpec(
        name=row["model_name"],
        num_layers=shape.layers,
        hidden_size=shape.hidden,
        num_attention_heads=shape.heads,
        num_kv_heads=kv_heads,
        ffn_hidden_size=ffn,
        vocab_size=shape.vocab,
        activation="swiglu" if gated else "gelu",
        moe=moe,
    )


def build_training(source: str, shape: _Shape, precision: Precision) -> TrainingSpec:
    assert shape.seq_len and shape.global_batch
    return TrainingSpec(
        seq_length=shape.seq_len,
        global_batch_size=shape.global_batch,
        precision=precision,
        flash_attention=not any(key in source for key in _UNFUSED_ATTENTION_SOURCES),
        dropout=any(key in source for key in _DROPOUT_SOURCES),
        fused_cross_entropy=not any(key in source for key in _UNFUSED_LOSS_SOURCES),
    )


def build_cluster(row: dict[str, str], gpu: GpuSpec, num_gpus: int) -> ClusterSpec:
    gpus_per_node = int_cell(row["gpus_per_node"]) or 8  # every NVIDIA DGX/HGX node holds 8 GPUs
    return ClusterSpec(
        name=f"{row['id']}-cluster",
        groups=[
            NodeGroup(
                name="g",
                gpu=gpu,
                num_nodes=max(1, math.ceil(num_gpus / gpus_per_node)),
                gpus_per_node=gpus_per_node,
            )
        ],
    )


@dataclass(frozen=True)
class _Layout:
    dp: int
    cp: int
    micro_batch: int
    zero_stage: int
    recompute: Recompute | None


def build_plan(row: dict[str, str], shape: _Shape, layout: _Layout) -> Plan:
    assert shape.tp and shape.pp
    source, notes = row["source"], row["notes"]
    sp_flag = row["seq_parallel"].strip()
    return Plan(
        dp=layout.dp,
        tp=shape.tp,
        pp=shape.pp,
        cp=layout.cp,
        ep=int_cell(row["ep"]) or 1,
        vpp=int_cell(row["vpp"]) or 1,
        micro_batch_size=layout.micro_batch,
        zero_stage=layout.zero_stage,
        dp_shard=_fsdp_subgroup(row, layout),
        recompute=layout.recompute or "none",
        # "unknown" stays None: Megatron/NeMo turn sequence parallelism on whenever tp > 1.
        sequence_parallel=(sp_flag == "y") if sp_flag in ("y", "n") and shape.tp > 1 else None,
        overlap_grad_reduce=not any(key in source for key in _NO_GRAD_OVERLAP_SOURCES),
        tp_comm_overlap="async TP" in notes or "--tp-comm-overlap" in notes,
    )


def _fsdp_subgroup(row: dict[str, str], layout: _Layout) -> int | None:
    """The FSDP group of JAX FSDP+DP (hybrid sharding) when it is a strict subgroup of dp."""
    size = _FSDP_SIZE.search(row["zero_stage_or_fsdp"])
    if layout.zero_stage == 3 and size and int(size.group(1)) < layout.dp * layout.cp:
        shard = int(size.group(1))
        return shard if (layout.dp * layout.cp) % shard == 0 else None
    return None


def _sharding_notes(row: dict[str, str], dp: int, zero_stage: int) -> list[str]:
    """Say how JAX FSDP+DP is priced when the source leaves the FSDP size out."""
    if zero_stage == 3 and "FSDP size not stated" in row["zero_stage_or_fsdp"]:
        return ["FSDP size not stated: ZeRO-3 over all dp"]
    return []


def _unstated(
    row: dict[str, str],
    shape: _Shape,
    precision: Precision | None,
    sharding: tuple[int, str | None] | None,
) -> list[str]:
    """What the row lacks that no documented default can stand in for."""
    missing = shape.missing()
    missing += ["precision"] if precision is None else []
    missing += ["sharding"] if sharding is None else []
    if int_cell(row["micro_batch"]) is None and not _GA_IN_NOTES.search(row["notes"]):
        missing.append("micro_batch")
    return missing


def _defaults_taken(
    row: dict[str, str], shape: _Shape, layout: _Layout, sharding_note: str | None
) -> list[str]:
    """The framework defaults the Case rests on where the source is silent."""
    notes = [sharding_note] if sharding_note else []
    notes += _sharding_notes(row, layout.dp, layout.zero_stage)
    if layout.recompute is None:
        notes.append("recompute not stated: least that fits")
    if row["seq_parallel"].strip() not in ("y", "n") and shape.tp and shape.tp > 1:
        notes.append("sequence parallelism not stated: on (tp > 1)")
    return notes


def _specs(
    row: dict[str, str], shape: _Shape, gpu: GpuSpec, precision: Precision, layout: _Layout
) -> tuple[ModelSpec, TrainingSpec, ClusterSpec, Plan] | str:
    """The four specs, or why pydantic refuses them."""
    assert shape.num_gpus
    try:
        return (
            build_model(row, shape),
            build_training(row["source"], shape, precision),
            build_cluster(row, gpu, shape.num_gpus),
            build_plan(row, shape, layout),
        )
    except ValidationError as exc:
        return f"spec rejected: {format_validation_error(exc)}"


def build_case(row: dict[str, str]) -> Case | Exclusion:
    """A Case, or an Exclusion naming what the row lacks or the cost model cannot express."""
    row_id = row["id"]
    gpu = gpu_for(row["gpu_type"])
    if gpu is None:
        return Exclusion(row_id, f"GPU '{row['gpu_type']}' is not a catalog GPU")
    assumptions: list[str] = []
    shape = _Shape.of(row)
    _fill_vocab(row, shape, assumptions)
    precision = parse_precision(row["notes"])
    sharding = parse_sharding(row["zero_stage_or_fsdp"])
    missing = _unstated(row, shape, precision, sharding)
    if missing:
        return Exclusion(row_id, "not stated: " + ", ".join(missing))
    assert precision is not None and sharding is not None and shape.global_batch
    cp = int_cell(row["cp"]) or 1
    dp = _data_parallel(row, shape, cp, assumptions)
    if isinstance(dp, str):
        return Exclusion(row_id, dp)
    micro_batch = _micro_batch(row, shape.global_batch, dp, assumptions)
    if micro_batch is None:
        return Exclusion(row_id, "micro_batch not stated and global_batch/(dp*GA) is not whole")
    measured = _measured_tokens_per_s_per_gpu(row, shape)
    if isinstance(measured, str):
        return Exclusion(row_id, measured)
    recompute = parse_recompute(row["recompute"], row["source"])
    layout = _Layout(dp, cp, micro_batch, sharding[0], recompute)
    assumptions += _defaults_taken(row, shape, layout, sharding[1])
    specs = _specs(row, shape, gpu, precision, layout)
    if isinstance(specs, str):
        return Exclusion(row_id, specs)
    model, training, cluster, plan = specs
    return Case(
        row_id=row_id,
        source=short_source(row["source"]),
        model=model,
        training=training,
        cluster=cluster,
        plan=plan,
        recompute_stated=recompute is not None,
        measured_tokens_per_s_per_gpu=measured,
        measured_memory_gib=float_cell(row["measured_mem_gib"]),
        gpu_type=row["gpu_type"],
        assumptions=tuple(assumptions),
    )
