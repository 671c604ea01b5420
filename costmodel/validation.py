"""Validate the uncalibrated cost model against published training runs.

``python -m costmodel.validation`` / ``autopar validate`` reads ``validation/runs.csv`` (copied
from the shared data set, citations kept), predicts every fully specified BF16/FP16 row, and
prints per-source MAPE of tokens/s per GPU next to a constant-utilization baseline, per-sweep
Spearman rank correlations, memory where measured, the excluded rows and why, and Korthikanti et
al. Table 4's per-layer time ratios.
"""

import csv
import math
import sys
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from costmodel.api import estimate
from costmodel.context import ModelContext
from costmodel.flops import model_flops_per_token
from costmodel.hardware import CATALOG, peak_tflops
from costmodel.homogeneous import evaluate_homogeneous
from costmodel.params import DEFAULT_PARAMS, EfficiencyParams
from costmodel.specs import ClusterSpec, GpuSpec, ModelSpec, NodeGroup, Plan, TrainingSpec
from costmodel.stage import RECOMPUTE_CODES

DATA_DIR = Path(__file__).resolve().parent.parent / "validation"

# Meta's H100 variants in torchtitan's benchmarks: HBM2e parts (96 GB, 2.4 TB/s per the
# torchtitan benchmark file) at a 500 W limit, whose peak torchtitan places "between SXM and
# NVL": we interpolate linearly in power between H100 NVL (400 W, 835 TF BF16 dense, datasheet)
# and H100 SXM (700 W, 989.4 TF): 835 + (500 - 400) / 300 * 154.4 = 886 TF.
_META_H100_BF16_TFLOPS = 835.0 + (500.0 - 400.0) / 300.0 * (989.4 - 835.0)
_META_H100 = CATALOG["H100-80GB"].model_copy(
    update={
        "name": "H100-96GB-HBM2e-500W",
        "hbm_gib": 96.0,
        "hbm_GBps": 2400.0,
        "bf16_tflops": _META_H100_BF16_TFLOPS,
        "fp16_tflops": _META_H100_BF16_TFLOPS,
        "fp8_tflops": 2 * _META_H100_BF16_TFLOPS,
    }
)
GPU_ALIASES: dict[str, GpuSpec] = {
    "A100-SXM4-80GB": CATALOG["A100-80GB"],
    "A100-80GB": CATALOG["A100-80GB"],
    "A100-SXM4-40GB": CATALOG["A100-40GB"],
    "A100-40GB": CATALOG["A100-40GB"],
    "H100-SXM5-80GB (DGX-H100)": CATALOG["H100-80GB"],
    "H200": CATALOG["H200-141GB"],
    "H100 (Meta Grand Teton, 96GB HBM2e, 2.4 TB/s, 500W limit)": _META_H100,
    "H100 (HBM2e ~94-95GB, lower-TDP SXM)": _META_H100,
}
_SIXTEEN_BIT = ("bf16", "fp16", "amp_bf16", "bfloat16", "mixed")
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


@dataclass
class Case:
    row_id: str
    source: str
    short_source: str
    model: ModelSpec
    training: TrainingSpec
    cluster: ClusterSpec
    plan: Plan
    measured_tokens_per_s_per_gpu: float
    measured_memory_gib: float | None
    sweep_key: tuple[str, str, str]


@dataclass
class Outcome:
    case: Case
    predicted: float
    baseline: float
    feasible: bool
    reasons: list[str]
    predicted_memory_gib: float

    @property
    def error(self) -> float:
        return abs(self.predicted - self.case.measured_tokens_per_s_per_gpu) / (
            self.case.measured_tokens_per_s_per_gpu
        )

    @property
    def baseline_error(self) -> float:
        return abs(self.baseline - self.case.measured_tokens_per_s_per_gpu) / (
            self.case.measured_tokens_per_s_per_gpu
        )


@dataclass
class Report:
    outcomes: list[Outcome]
    excluded: list[tuple[str, str]]
    baseline_mfu: float
    per_source: dict[str, dict[str, float]] = field(default_factory=dict)


def short_source(source: str) -> str:
    for key in (
        "Narayanan",
        "Korthikanti",
        "llm-foundry",
        "torchtitan",
        "NeMo",
        "Megatron-LM",
        "PaLM",
        "GPT-NeoX",
        "falcon",
    ):
        if key in source:
            suffix = ""
            if key == "llm-foundry":
                suffix = " A100-40GB" if "40GB" in source else " A100-80GB"
            if key == "Narayanan":
                suffix = " T1" if "Table 1" in source else " T2"
            return key + suffix
    return source[:30]


def _int(value: str) -> int | None:
    value = value.strip()
    if not value:
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return int(number) if number.is_integer() else None


def _float(value: str) -> float | None:
    try:
        return float(value) if value.strip() else None
    except ValueError:
        return None


def _recompute(value: str, source: str) -> str | None:
    """Map a source's activation-checkpointing mode onto none / selective / full.

    torchtitan's selective AC is not Megatron's "selective" (which recomputes only the attention
    core): per-op SAC keeps only every other matmul output and re-runs everything else, and
    per-layer SAC fully checkpoints every other layer. Both sit between Megatron-selective and
    full in memory and compute; ``full`` is the nearer of our modes (and the one under which
    the published Llama 2 70B run fits in 80 GB, as it did in reality).
    """
    value = value.strip().lower()
    if value == "full":
        return "full"
    if value == "none":
        return "none"
    if value.startswith(("selective (op)", "selective (layer)", "selective (per-op")):
        return "full"
    if value.startswith("selective") and "torchtitan" in source:
        return "full"  # torchtitan's default selective AC is per-op SAC (train_configs)
    if value.startswith("selective"):
        return "selective"
    return None


def _zero(value: str) -> int | None:
    value = value.strip()
    if value.startswith("none") or value == "":
        return 0 if value else None
    if "ZeRO-3" in value or "FSDP" in value:
        return 3
    if "ZeRO-1" in value or "distributed optimizer" in value:
        return 1
    return None


def build_case(row: dict[str, str], *, allow_fp8: bool = False) -> Case | str:
    """A Case, or the reason the row is not fully specified.

    ``allow_fp8`` admits FP8 rows (priced with FP8 GEMMs) for the memory comparison only:
    throughput is validated on BF16/FP16 rows.
    """
    notes = row["notes"]
    precision = notes.split(";")[0].removeprefix("prec=").strip().lower()
    fp8 = "float8" in precision or "fp8" in precision
    if (fp8 and not allow_fp8) or not (fp8 or precision.startswith(_SIXTEEN_BIT)):
        return f"precision '{precision[:30]}' is not BF16/FP16"
    gpu = GPU_ALIASES.get(row["gpu_type"])
    if gpu is None:
        return f"GPU '{row['gpu_type']}' is not a catalog GPU"
    needed = {
        "layers": _int(row["layers"]),
        "hidden": _int(row["hidden"]),
        "heads": _int(row["heads"]),
        "vocab": _int(row["vocab"]),
        "seq_len": _int(row["seq_len"]),
        "num_gpus": _int(row["num_gpus"]),
        "tp": _int(row["tp"]),
        "pp": _int(row["pp"]),
        "dp": _int(row["dp"]),
        "micro_batch": _int(row["micro_batch"]),
        "global_batch": _int(row["global_batch"]),
    }
    missing = [name for name, value in needed.items() if value is None]
    recompute = _recompute(row["recompute"], row["source"])
    zero = _zero(row["zero_stage_or_fsdp"])
    if recompute is None:
        missing.append("recompute")
    if zero is None:
        missing.append("sharding")
    if missing:
        return "not stated: " + ", ".join(missing)
    source = row["source"]
    cp = _int(row["cp"]) or 1
    if needed["dp"] * needed["tp"] * needed["pp"] * cp != needed["num_gpus"]:
        return "dp*tp*pp*cp does not match num_gpus"
    tokens_per_gpu = _float(row["measured_tokens_per_s_per_gpu"])
    step = _float(row["measured_step_time_s"])
    if tokens_per_gpu is None and step is not None:
        tokens_per_gpu = needed["global_batch"] * needed["seq_len"] / step / needed["num_gpus"]
    hfu_tflops = _float(row["measured_tflops_per_gpu"])
    if tokens_per_gpu is None and hfu_tflops is not None and "[HFU-like]" in notes:
        # Narayanan et al. Eq. 3 counts F = 96 B s l h^2 (1 + s/6h + V/16lh) per iteration.
        b, s, layers, h, vocab = (
            needed[k] for k in ("global_batch", "seq_len", "layers", "hidden", "vocab")
        )
        flops = 96 * b * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h))
        step = flops / (hfu_tflops * 1e12 * needed["num_gpus"])
        tokens_per_gpu = b * s / step / needed["num_gpus"]
    if tokens_per_gpu is None:
        return "no throughput measurement"
    ffn = _int(row["ffn_hidden"])
    kv_heads = _int(row["kv_heads"]) or needed["heads"]
    swiglu = (ffn is not None and ffn != 4 * needed["hidden"] and kv_heads != needed["heads"]) or (
        "Llama" in row["model_name"] or "LLAMA" in row["model_name"]
    )
    model = ModelSpec(
        name=row["model_name"],
        num_layers=needed["layers"],
        hidden_size=needed["hidden"],
        num_attention_heads=needed["heads"],
        num_kv_heads=kv_heads,
        ffn_hidden_size=ffn,
        vocab_size=needed["vocab"],
        activation="swiglu" if swiglu else "gelu",
    )
    training = TrainingSpec(
        seq_length=needed["seq_len"],
        global_batch_size=needed["global_batch"],
        precision="fp8" if fp8 else "fp16" if precision.startswith("fp16") else "bf16",
        flash_attention=not any(key in source for key in _UNFUSED_ATTENTION_SOURCES),
        dropout=any(key in source for key in _DROPOUT_SOURCES),
        fused_cross_entropy=not any(key in source for key in _UNFUSED_LOSS_SOURCES),
    )
    gpus_per_node = _int(row["gpus_per_node"]) or 8
    cluster = ClusterSpec(
        name=f"{row['id']}-cluster",
        groups=[
            NodeGroup(
                name="g",
                gpu=gpu,
                num_nodes=max(1, math.ceil(needed["num_gpus"] / gpus_per_node)),
                gpus_per_node=gpus_per_node,
            )
        ],
    )
    sp_flag = row["seq_parallel"].strip()
    plan = Plan(
        dp=needed["dp"],
        tp=needed["tp"],
        pp=needed["pp"],
        cp=cp,
        vpp=_int(row["vpp"]) or 1,
        micro_batch_size=needed["micro_batch"],
        zero_stage=zero,
        recompute=recompute,
        sequence_parallel=(sp_flag == "y") if sp_flag in ("y", "n") and needed["tp"] > 1 else None,
        overlap_grad_reduce=not any(key in source for key in _NO_GRAD_OVERLAP_SOURCES),
        tp_comm_overlap="async TP" in notes,
    )
    return Case(
        row_id=row["id"],
        source=source,
        short_source=short_source(source),
        model=model,
        training=training,
        cluster=cluster,
        plan=plan,
        measured_tokens_per_s_per_gpu=tokens_per_gpu,
        measured_memory_gib=_float(row["measured_mem_gib"]),
        sweep_key=(short_source(source), row["model_name"], row["gpu_type"]),
    )


def load_cases(path: Path = DATA_DIR / "runs.csv") -> tuple[list[Case], list[tuple[str, str]]]:
    cases, excluded = [], []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            built = build_case(row)
            if isinstance(built, str):
                excluded.append((row["id"], built))
            else:
                cases.append(built)
    return cases, excluded


def load_memory_cases(path: Path = DATA_DIR / "runs.csv") -> list[Case]:
    """Rows with a measured peak memory, FP8 included (memory barely depends on GEMM dtype)."""
    cases = []
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            if not row["measured_mem_gib"].strip():
                continue
            built = build_case(row, allow_fp8=True)
            if isinstance(built, Case):
                cases.append(built)
    return cases


def _baseline_flops_per_token(case: Case) -> float:
    """6N + attention (PaLM App. B), N = non-embedding + output-layer parameters."""
    return model_flops_per_token(case.model, case.training.seq_length)


def fit_constant_mfu(cases: list[Case]) -> float:
    """The single MFU minimizing MAPE of tokens/s/GPU over ``cases`` (a 1-D scan)."""
    ratios = np.array(
        [
            c.measured_tokens_per_s_per_gpu
            * _baseline_flops_per_token(c)
            / (peak_tflops(c.cluster.groups[0].gpu, c.training.precision) * 1e12)
            for c in cases
        ]
    )
    grid = np.linspace(0.05, 1.0, 1901)
    errors = np.abs(grid[:, None] - ratios[None, :]) / ratios[None, :]
    return float(grid[np.argmin(errors.mean(axis=1))])


def spearman(a: list[float], b: list[float]) -> float:
    def ranks(values: list[float]) -> np.ndarray:
        order = np.argsort(values, kind="mergesort")
        result = np.empty(len(values))
        sorted_values = np.asarray(values)[order]
        i = 0
        while i < len(values):
            j = i
            while j + 1 < len(values) and sorted_values[j + 1] == sorted_values[i]:
                j += 1
            result[order[i : j + 1]] = (i + j) / 2.0
            i = j + 1
        return result

    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return 0.0
    return float(np.corrcoef(ra, rb)[0, 1])


def run(params: EfficiencyParams | None = None, path: Path = DATA_DIR / "runs.csv") -> Report:
    cases, excluded = load_cases(path)
    mfu = fit_constant_mfu(cases)
    outcomes = []
    for case in cases:
        result = estimate(case.model, case.training, case.cluster, case.plan, params=params)
        gpu = case.cluster.groups[0].gpu
        baseline = (
            mfu * peak_tflops(gpu, case.training.precision) * 1e12 / _baseline_flops_per_token(case)
        )
        outcomes.append(
            Outcome(
                case=case,
                predicted=result.tokens_per_s_per_gpu,
                baseline=baseline,
                feasible=result.feasible,
                reasons=result.reasons,
                predicted_memory_gib=result.peak_memory_gib,
            )
        )
    return Report(outcomes=outcomes, excluded=excluded, baseline_mfu=mfu)


def sweeps(outcomes: list[Outcome]) -> dict[tuple[str, str, str], list[Outcome]]:
    grouped: dict[tuple[str, str, str], list[Outcome]] = defaultdict(list)
    for outcome in outcomes:
        grouped[outcome.case.sweep_key].append(outcome)
    return {key: group for key, group in grouped.items() if len(group) >= 3}


def korthikanti_table4(params: EfficiencyParams | None = None) -> list[tuple[str, float, float]]:
    """(configuration, predicted overhead vs baseline, measured overhead) for one 22B layer."""
    model = ModelSpec(
        name="GPT-22B", num_layers=48, hidden_size=6144, num_attention_heads=64, vocab_size=51200
    )
    training = TrainingSpec(
        seq_length=2048, global_batch_size=4, flash_attention=False, dropout=True
    )
    ctx = ModelContext.build(model, training, params or DEFAULT_PARAMS)
    group = NodeGroup(name="g", gpu="A100-80GB", num_nodes=1)
    configs = [
        ("Baseline no recompute", "none", 0, 0.0),
        ("Sequence Parallelism", "none", 1, -0.03),
        ("Baseline with recompute", "full", 0, 0.39),
        ("Selective Recompute", "selective", 0, 0.07),
        ("Selective + Sequence", "selective", 1, 0.04),
    ]
    times = []
    for _, recompute, sp, _ in configs:
        result = evaluate_homogeneous(
            model,
            ctx,
            group,
            {
                "dp": [1],
                "tp": [8],
                "pp": [1],
                "micro_batch_size": [4],
                "recompute": [RECOMPUTE_CODES[recompute]],
                "sequence_parallel": [sp],
            },
        )
        stage = result.stages
        per_layer = stage.per_microbatch_s[0] / model.num_layers  # first stage = the only one
        times.append(per_layer)
    base = times[0]
    return [
        (name, t / base - 1.0, measured)
        for (name, _, _, measured), t in zip(configs, times, strict=True)
    ]


def format_report(report: Report) -> str:
    lines: list[str] = []
    by_source: dict[str, list[Outcome]] = defaultdict(list)
    for outcome in report.outcomes:
        by_source[outcome.case.short_source].append(outcome)
    lines.append(
        f"Validation: {len(report.outcomes)} fully specified BF16/FP16 rows used, "
        f"{len(report.excluded)} excluded"
    )
    lines.append(
        f"Baseline: 6N + attention FLOPs/token at one fitted MFU = {report.baseline_mfu:.3f}"
    )
    lines.append("")
    lines.append(f"{'source':<26}{'rows':>5}{'MAPE':>9}{'baseline':>10}{'infeasible':>12}")
    for source, group in sorted(by_source.items()):
        mape = 100 * np.mean([o.error for o in group])
        base = 100 * np.mean([o.baseline_error for o in group])
        infeasible = sum(not o.feasible for o in group)
        lines.append(f"{source:<26}{len(group):>5}{mape:>8.1f}%{base:>9.1f}%{infeasible:>12}")
    overall = 100 * np.mean([o.error for o in report.outcomes])
    overall_base = 100 * np.mean([o.baseline_error for o in report.outcomes])
    lines.append(
        f"{'OVERALL':<26}{len(report.outcomes):>5}{overall:>8.1f}%{overall_base:>9.1f}%"
        f"{sum(not o.feasible for o in report.outcomes):>12}"
    )
    lines.append(f"MAPE reduction vs baseline: {100 * (1 - overall / overall_base):.1f}%")
    lines.append("")
    lines.append("Rank correlation within sweeps (Spearman, predicted vs measured tokens/s/GPU):")
    lines.append(f"{'sweep':<60}{'rows':>5}{'model':>8}{'baseline':>10}")
    model_rhos, base_rhos = [], []
    for key, group in sorted(sweeps(report.outcomes).items()):
        measured = [o.case.measured_tokens_per_s_per_gpu for o in group]
        rho = spearman([o.predicted for o in group], measured)
        rho_base = spearman([o.baseline for o in group], measured)
        model_rhos.append(rho)
        base_rhos.append(rho_base)
        label = f"{key[0]} | {key[1]} | {key[2]}"[:59]
        lines.append(f"{label:<60}{len(group):>5}{rho:>8.2f}{rho_base:>10.2f}")
    if model_rhos:
        lines.append(f"{'mean':<60}{'':>5}{np.mean(model_rhos):>8.2f}{np.mean(base_rhos):>10.2f}")
    lines.append("")
    lines.append("Worst rows:")
    for outcome in sorted(report.outcomes, key=lambda o: -o.error)[:10]:
        c = outcome.case
        measured = c.measured_tokens_per_s_per_gpu
        deviation = 100 * (outcome.predicted / measured - 1)
        lines.append(
            f"  {c.row_id:<28} {c.model.name[:22]:<22} measured {measured:>9.1f}"
            f" predicted {outcome.predicted:>9.1f} ({deviation:+.1f}%)"
        )
    infeasible = [o for o in report.outcomes if not o.feasible]
    if infeasible:
        lines.append("")
        lines.append("Rows predicted infeasible (each actually ran, so each is a model bug):")
        for outcome in infeasible:
            lines.append(f"  {outcome.case.row_id}: {'; '.join(outcome.reasons)}")
    memory_cases = load_memory_cases()
    if memory_cases:
        lines.append("")
        lines.append("Memory (peak GiB per GPU, rows that measured it; FP8 rows included):")
        for case in memory_cases:
            predicted = estimate(case.model, case.training, case.cluster, case.plan)
            lines.append(
                f"  {case.row_id}: measured {case.measured_memory_gib:.1f}"
                f" predicted {predicted.peak_memory_gib:.1f}"
                f" ({100 * (predicted.peak_memory_gib / case.measured_memory_gib - 1):+.1f}%)"
            )
    lines.append("")
    lines.append("Korthikanti et al. Table 4 (one 22B layer, overhead vs. baseline):")
    for name, predicted, measured in korthikanti_table4():
        lines.append(
            f"  {name:<26} predicted {100 * predicted:+6.1f}%  measured {100 * measured:+6.1f}%"
        )
    lines.append("")
    lines.append("Excluded rows:")
    reasons: dict[str, list[str]] = defaultdict(list)
    for row_id, reason in report.excluded:
        reasons[reason].append(row_id)
    for reason, ids in sorted(reasons.items(), key=lambda item: -len(item[1])):
        lines.append(
            f"  {len(ids):>3} {reason}: {', '.join(ids[:6])}{' ...' if len(ids) > 6 else ''}"
        )
    return "\n".join(lines)


def main() -> int:
    print(format_report(run()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
