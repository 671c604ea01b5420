"""``run(data_dir)``: every row of the data set scored or excluded, as one Report."""

from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from app.validation.korthikanti import Table4Row, table4
from app.validation.rows import Exclusion, load_cases
from app.validation.scoring import (
    RECOMPUTE_LADDER,
    Baseline,
    MemoryRow,
    Outcome,
    SliceFigures,
    SweepFigures,
    memory_rows,
    predict,
    slice_figures,
    slices_by,
    sweep_figures,
    with_baselines,
)
from costmodel.params import EfficiencyParams

# Slice dimensions of the report, each with the order its values are listed in.
DIMENSIONS: dict[str, tuple[str, ...]] = {
    "source": (),
    "gpu": ("A100", "H100-class", "Blackwell", "other"),
    "precision": ("16-bit", "FP8"),
    "architecture": ("dense", "MoE"),
}
_KEYS: dict[str, Callable[[Outcome], str]] = {
    "source": lambda o: o.case.source,
    "gpu": lambda o: o.case.generation,
    "precision": lambda o: o.case.precision_class,
    "architecture": lambda o: o.case.architecture,
}
WORST_ROWS = 10


@dataclass(frozen=True)
class Report:
    """Everything ``autopar validate`` prints, as data.

    ``slices[dimension][value]`` holds the figures per source, GPU generation, precision and
    dense/MoE; ``overall`` covers every scored row and ``dev_set`` the 161 rows the previous
    harness scored (comparable with its figures).
    """

    data_dir: Path
    total_rows: int
    outcomes: list[Outcome]
    excluded: list[Exclusion]
    baseline: Baseline
    overall: SliceFigures
    dev_set: SliceFigures | None
    slices: dict[str, dict[str, SliceFigures]]
    sweeps: list[SweepFigures]
    memory: list[MemoryRow]
    table4: list[Table4Row]

    @property
    def infeasible(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.feasible]

    @property
    def worst(self) -> list[Outcome]:
        return sorted(self.outcomes, key=lambda o: -o.error)[:WORST_ROWS]

    @property
    def recompute_choices(self) -> dict[str, int]:
        """Rows with unstated recompute, by the mode the fallback chose."""
        counts = Counter(
            o.recompute_chosen if o.feasible else "none fits"
            for o in self.outcomes
            if o.recompute_chosen is not None
        )
        return {mode: counts[mode] for mode in ("none", "selective", "full", "none fits")}

    @property
    def uneven_recompute_sweeps(self) -> dict[str, dict[str, int]]:
        """Sweeps whose chosen recompute changes from row to row: "sweep" -> mode -> rows.

        A recipe table (NVIDIA's DGX Cloud tables) runs one configuration at every scale, so a
        choice that flips with the GPU count means the memory estimate sits at the capacity
        edge: the fallback then hides a memory over-estimate instead of reporting it.
        """
        modes: dict[str, Counter[str]] = defaultdict(Counter)
        for o in self.outcomes:
            if o.recompute_chosen is not None:
                source, model, gpu, precision = o.case.sweep_key
                modes[f"{source} | {precision} | {gpu} | {model}"][o.recompute_chosen] += 1
        return {
            key: {mode: counts[mode] for mode in RECOMPUTE_LADDER if counts[mode]}
            for key, counts in sorted(modes.items())
            if len(counts) > 1
        }

    @property
    def assumptions(self) -> dict[str, int]:
        """How many scored rows lean on each default the harness filled in."""
        counts = Counter(text for o in self.outcomes for text in o.case.assumptions)
        return dict(counts.most_common())

    @property
    def mean_sweep_rho(self) -> tuple[float, float] | None:
        """(model, baseline) mean Spearman over the sweeps; None without sweeps."""
        if not self.sweeps:
            return None
        return (
            float(np.mean([s.model_rho for s in self.sweeps])),
            float(np.mean([s.baseline_rho for s in self.sweeps])),
        )

    @property
    def memory_mape(self) -> float | None:
        if not self.memory:
            return None
        return float(np.mean([abs(m.signed_error) for m in self.memory]))


def run(data_dir: Path, params: EfficiencyParams | None = None) -> Report:
    """Score every expressible row of ``data_dir/runs.csv`` with ``params`` (default: the
    uncalibrated model). Raises ``DataSetError`` when the folder holds no such file."""
    cases, excluded = load_cases(data_dir)
    predicted: list[Outcome] = []
    for case in cases:
        result = predict(case, params)
        if isinstance(result, Exclusion):
            excluded.append(result)
        else:
            predicted.append(result)
    baseline = Baseline.fit([o.case for o in predicted])
    outcomes = with_baselines(predicted, baseline)
    dev = [o for o in outcomes if o.case.in_dev_set]
    return Report(
        data_dir=data_dir,
        total_rows=len(outcomes) + len(excluded),
        outcomes=outcomes,
        excluded=excluded,
        baseline=baseline,
        overall=slice_figures(outcomes),
        dev_set=slice_figures(dev) if dev else None,
        slices={
            name: slices_by(outcomes, _KEYS[name], order) for name, order in DIMENSIONS.items()
        },
        sweeps=sweep_figures(outcomes),
        memory=memory_rows(outcomes),
        table4=table4(data_dir, params),
    )
