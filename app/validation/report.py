"""A Report as text (``autopar validate``), a JSON-able dict (``--json``) or Markdown tables
(``--markdown``, the README's figures)."""

import math
from collections import defaultdict
from typing import Any

from app.validation.harness import Report
from app.validation.rows import Exclusion
from app.validation.scoring import Outcome, SliceFigures

DIMENSION_TITLES = {
    "source": "per source",
    "gpu": "per GPU generation",
    "precision": "per precision",
    "architecture": "dense / MoE",
}
DEV_SET_LABEL = "dev set (previous harness's 161 rows)"
BASELINE_DEFINITION = (
    "tokens/s/GPU = MFU * BF16 dense peak / (6N + attention FLOPs per token), N = active matmul "
    "parameters; one MFU fitted to minimize MAPE over the 16-bit rows scored, another over the "
    "FP8 rows (also against the BF16 peak, as NVIDIA and torchtitan report FP8 MFU)"
)
_LABEL_WIDTH = 40
_EXCLUDED_IDS_SHOWN = 6


# Shared pieces ----------------------------------------------------------------------------------
def _pct(value: float, signed: bool = False) -> str:
    if math.isnan(value):
        return "-"
    return f"{100 * value:+.1f}%" if signed else f"{100 * value:.1f}%"


def _ratio(value: float) -> str:
    return "-" if math.isnan(value) else f"{value:.2f}"


def _mfu(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def excluded_by_reason(excluded: list[Exclusion]) -> dict[str, list[str]]:
    """Reason -> row ids, most common reason first."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for exclusion in excluded:
        grouped[exclusion.reason].append(exclusion.row_id)
    return dict(sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0])))


def summary_rows(report: Report) -> list[tuple[str, str, SliceFigures]]:
    """(section, label, figures) for every line of the summary table, in print order."""
    rows = [("overall", "all scored rows", report.overall)]
    if report.dev_set is not None:
        rows.append(("overall", DEV_SET_LABEL, report.dev_set))
    for dimension, slices in report.slices.items():
        rows += [(DIMENSION_TITLES[dimension], name, figures) for name, figures in slices.items()]
    return rows


# Text -------------------------------------------------------------------------------------------
def _figures_line(label: str, f: SliceFigures) -> str:
    return (
        f"{label[: _LABEL_WIDTH - 1]:<{_LABEL_WIDTH}}{f.rows:>5}{_pct(f.model_mape):>9}"
        f"{_pct(f.baseline_mape):>10}{_ratio(f.ratio):>8}{_pct(f.bias, signed=True):>9}"
        f"{f.infeasible:>12}"
    )


def _summary_text(report: Report) -> list[str]:
    header = (
        f"{'slice':<{_LABEL_WIDTH}}{'rows':>5}{'model':>9}{'baseline':>10}{'ratio':>8}"
        f"{'bias':>9}{'infeasible':>12}"
    )
    lines = [header]
    section = None
    for current, label, figures in summary_rows(report):
        if current != section:
            section = current
            if current != "overall":
                lines.append(current)
        indent = "" if current == "overall" else "  "
        lines.append(_figures_line(indent + label, figures))
    lines.append(
        "model / baseline = MAPE of tokens/s/GPU; ratio = model/baseline; bias = mean signed "
        "error (+ = over-predicts)"
    )
    return lines


def _recompute_text(report: Report) -> list[str]:
    choices = report.recompute_choices
    total = sum(choices.values())
    if not total:
        return []
    parts = ", ".join(f"{mode} {count}" for mode, count in choices.items())
    lines = [
        "",
        f"Recompute not stated ({total} rows): least of none -> selective -> full that fits: "
        + parts,
    ]
    uneven = report.uneven_recompute_sweeps
    if uneven:
        lines.append(
            "  choice changes within a sweep (one recipe at every scale: the memory estimate "
            "sits at capacity):"
        )
        for sweep, modes in uneven.items():
            counts = ", ".join(f"{mode} {count}" for mode, count in modes.items())
            lines.append(f"    {sweep}: {counts}")
    return lines


def _assumptions_text(report: Report) -> list[str]:
    if not report.assumptions:
        return []
    lines = ["", "Defaults filled in where the source is silent (scored rows):"]
    lines += [f"  {count:>4}  {text}" for text, count in report.assumptions.items()]
    return lines


def _sweeps_text(report: Report) -> list[str]:
    lines = [
        "",
        "Rank correlation within sweeps (Spearman vs measured tokens/s/GPU; same source, "
        "precision, GPU, model; >= 3 rows):",
        f"{'sweep':<66}{'rows':>5}{'model':>8}{'baseline':>10}",
    ]
    for s in report.sweeps:
        label = f"{s.source} | {s.precision} | {s.gpu} | {s.model}"[:65]
        lines.append(f"{label:<66}{s.rows:>5}{s.model_rho:>8.2f}{s.baseline_rho:>10.2f}")
    means = report.mean_sweep_rho
    if means is not None:
        lines.append(f"{'mean':<66}{len(report.sweeps):>5}{means[0]:>8.2f}{means[1]:>10.2f}")
    return lines


def _row_text(o: Outcome) -> str:
    chosen = "" if o.recompute_chosen is None else " (chosen)"
    return (
        f"  {o.case.row_id:<34} {o.case.model.name[:24]:<24} measured {o.measured:>9.1f}"
        f" predicted {o.predicted:>9.1f} ({_pct(o.signed_error, signed=True)})"
        f" recompute {o.plan.recompute}{chosen}"
    )


def _rows_text(report: Report) -> list[str]:
    lines = ["", f"Worst {len(report.worst)} rows:"]
    lines += [_row_text(o) for o in report.worst]
    if report.infeasible:
        lines += ["", "Rows predicted infeasible (each actually ran, so each is a model bug):"]
        lines += [f"  {o.case.row_id}: {'; '.join(o.reasons)}" for o in report.infeasible]
    return lines


def _memory_text(report: Report) -> list[str]:
    if not report.memory:
        return []
    lines = ["", "Memory (peak GiB per GPU where the source measured it; FP8 rows included):"]
    for m in report.memory:
        lines.append(
            f"  {m.row_id}: measured {m.measured_gib:.1f} predicted {m.predicted_gib:.1f}"
            f" ({_pct(m.signed_error, signed=True)})"
        )
    assert report.memory_mape is not None
    lines.append(f"  MAPE {_pct(report.memory_mape)} over {len(report.memory)} rows")
    return lines


def _table4_text(report: Report) -> list[str]:
    if not report.table4:
        return ["", "Korthikanti et al. Table 4: layer_times.csv not in the data folder"]
    lines = ["", "Korthikanti et al. Table 4 (one 22B layer, overhead vs. baseline):"]
    for row in report.table4:
        lines.append(
            f"  {row.config:<26} predicted {100 * row.predicted:+6.1f}%"
            f"  measured {100 * row.measured:+6.1f}%"
        )
    return lines


def _excluded_text(report: Report) -> list[str]:
    lines = ["", f"Excluded rows ({len(report.excluded)}), by reason:"]
    for reason, ids in excluded_by_reason(report.excluded).items():
        shown = ", ".join(ids[:_EXCLUDED_IDS_SHOWN])
        more = " ..." if len(ids) > _EXCLUDED_IDS_SHOWN else ""
        lines.append(f"  {len(ids):>3} {reason}: {shown}{more}")
    return lines


def format_text(report: Report) -> str:
    b = report.baseline
    lines = [
        f"Validation against {report.data_dir / 'runs.csv'}: {report.total_rows} rows, "
        f"{len(report.outcomes)} scored, {len(report.excluded)} excluded",
        f"Baseline: constant MFU (16-bit rows {_mfu(b.mfu_16bit)}, FP8 rows {_mfu(b.mfu_fp8)}, "
        "both vs the BF16 peak) on 6N + attention FLOPs/token",
        "",
        *_summary_text(report),
        *_recompute_text(report),
        *_assumptions_text(report),
        *_sweeps_text(report),
        *_rows_text(report),
        *_memory_text(report),
        *_table4_text(report),
        *_excluded_text(report),
    ]
    return "\n".join(lines)


# Markdown ---------------------------------------------------------------------------------------
def format_markdown(report: Report) -> str:
    """The summary as one Markdown table (the README's), plus the sweep and memory means."""
    lines = [
        "| slice | rows | MAPE tokens/s/GPU | constant-MFU baseline | model / baseline | bias |"
        " predicted infeasible |",
        "|---|---|---|---|---|---|---|",
    ]
    for section, label, f in summary_rows(report):
        name = f"**{label}**" if section == "overall" else f"{section}: {label}"
        lines.append(
            f"| {name} | {f.rows} | {_pct(f.model_mape)} | {_pct(f.baseline_mape)} | "
            f"{_ratio(f.ratio)} | {_pct(f.bias, signed=True)} | {f.infeasible} |"
        )
    b = report.baseline
    lines += [
        "",
        f"Baseline MFU: 16-bit {_mfu(b.mfu_16bit)}, FP8 {_mfu(b.mfu_fp8)} (vs BF16 peak).",
    ]
    means = report.mean_sweep_rho
    if means is not None:
        lines.append(
            f"Mean Spearman within {len(report.sweeps)} sweeps: model {means[0]:.2f}, "
            f"baseline {means[1]:.2f}."
        )
    if report.memory_mape is not None:
        lines.append(
            f"Peak-memory MAPE over {len(report.memory)} rows: {_pct(report.memory_mape)}."
        )
    return "\n".join(lines)


# JSON -------------------------------------------------------------------------------------------
def _number(value: float | None) -> float | None:
    """JSON has no NaN: missing figures become null."""
    return None if value is None or math.isnan(value) else value


def _figures_dict(f: SliceFigures) -> dict[str, Any]:
    return {
        "rows": f.rows,
        "model_mape": _number(f.model_mape),
        "baseline_mape": _number(f.baseline_mape),
        "ratio": _number(f.ratio),
        "bias": _number(f.bias),
        "infeasible": f.infeasible,
    }


def _outcome_dict(o: Outcome) -> dict[str, Any]:
    c = o.case
    return {
        "id": c.row_id,
        "source": c.source,
        "model": c.model.name,
        "gpu_type": c.gpu_type,
        "gpu_generation": c.generation,
        "precision": c.precision_class,
        "architecture": c.architecture,
        "dev_set": c.in_dev_set,
        "measured_tokens_per_s_per_gpu": o.measured,
        "predicted_tokens_per_s_per_gpu": o.predicted,
        "baseline_tokens_per_s_per_gpu": _number(o.baseline),
        "error": o.signed_error,
        "recompute": o.plan.recompute,
        "recompute_stated": c.recompute_stated,
        "feasible": o.feasible,
        "reasons": list(o.reasons),
        "measured_memory_gib": c.measured_memory_gib,
        "predicted_memory_gib": o.predicted_memory_gib,
        "assumptions": list(c.assumptions),
    }


def to_dict(report: Report) -> dict[str, Any]:
    """The report as plain JSON-able data: the same content as the text."""
    means = report.mean_sweep_rho
    return {
        "data_dir": str(report.data_dir),
        "rows": {
            "total": report.total_rows,
            "scored": len(report.outcomes),
            "excluded": len(report.excluded),
        },
        "baseline": {
            "mfu_16bit": report.baseline.mfu_16bit,
            "mfu_fp8": report.baseline.mfu_fp8,
            "definition": BASELINE_DEFINITION,
        },
        "overall": _figures_dict(report.overall),
        "dev_set": None if report.dev_set is None else _figures_dict(report.dev_set),
        "slices": {
            dimension: {name: _figures_dict(f) for name, f in slices.items()}
            for dimension, slices in report.slices.items()
        },
        "recompute_choices": report.recompute_choices,
        "uneven_recompute_sweeps": report.uneven_recompute_sweeps,
        "assumptions": report.assumptions,
        "sweeps": [
            {
                "source": s.source,
                "model": s.model,
                "gpu": s.gpu,
                "precision": s.precision,
                "rows": s.rows,
                "model_rho": s.model_rho,
                "baseline_rho": s.baseline_rho,
            }
            for s in report.sweeps
        ],
        "mean_sweep_rho": None if means is None else {"model": means[0], "baseline": means[1]},
        "memory": {
            "rows": [
                {
                    "id": m.row_id,
                    "measured_gib": m.measured_gib,
                    "predicted_gib": m.predicted_gib,
                    "error": m.signed_error,
                }
                for m in report.memory
            ],
            "mape": report.memory_mape,
        },
        "worst": [o.case.row_id for o in report.worst],
        "infeasible": [
            {"id": o.case.row_id, "reasons": list(o.reasons)} for o in report.infeasible
        ],
        "korthikanti_table4": [
            {"config": r.config, "predicted": r.predicted, "measured": r.measured}
            for r in report.table4
        ],
        "excluded": excluded_by_reason(report.excluded),
        "outcomes": [_outcome_dict(o) for o in report.outcomes],
    }
