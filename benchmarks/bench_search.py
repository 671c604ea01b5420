"""Search quality and speed: the numbers the search issue asks for, as tables.

- Homogeneous: GPT-3 175B on 1,024 H100-80GB (dgx-h100-128n), batch 1,536 x 2,048 tokens: how long
  exhaustive enumeration takes and how many valid plans it prices; how close TPE gets to the
  exhaustive optimum in 300 trials (5 seeds, with and without the heuristic warm start) and at
  which trial it is first within 1%.
- Heterogeneous: Llama-3 70B on mixed-h100-a100-2zone (64 H100-80GB + 128 A100-80GB + 64
  A100-40GB, two zones joined by 100 Gb/s): the best plan of a 60 s search against a 10x longer
  one, and its gain over the best plan on a single GPU type.
- Speed of the search itself: plans priced per second for every sampler.

Full run (about 14 minutes on one core): ``make bench-search``. ``--quick`` (about 4 minutes)
runs 3 seeds, warm starts only, and a 15 s vs 150 s heterogeneous comparison:
``make bench-search BENCH_ARGS=--quick``. numpy is pinned to one thread so figures are per core.
"""

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import argparse
import math
import statistics
import time
import warnings
from collections.abc import Sequence

from app.cli.search_cmd import layout
from search import SearchRequest, SearchResult, run_search
from search.space import homogeneous_spaces

HOMOGENEOUS = {"model": "gpt3-175b", "training": "gpt3-2k", "cluster": "dgx-h100-128n"}
HETEROGENEOUS = {"model": "llama3-70b", "training": "llama3-8k", "cluster": "mixed-h100-a100-2zone"}
TPE_TRIALS = 300
WITHIN = 0.01  # "within 1% of the exhaustive optimum"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
    cells = [[str(c) for c in header], *[[str(c) for c in row] for row in rows]]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print("  ".join(cell.rjust(width) for cell, width in zip(row, widths, strict=True)))
        if index == 0:
            print("  ".join("-" * width for width in widths))


def timed(request: SearchRequest) -> tuple[SearchResult, float]:
    start = time.perf_counter()
    result = run_search(request)
    return result, time.perf_counter() - start


def first_trial_within(result: SearchResult, optimum: float) -> int | None:
    """Trial number (1-based) of the first trial whose plan is within WITHIN of the optimum."""
    hits = [
        ranked.trial_number
        for ranked in result.plans
        if ranked.trial_number is not None and ranked.objective_values[0] >= (1 - WITHIN) * optimum
    ]
    return min(hits) + 1 if hits else None


def homogeneous(seeds: int, cold: bool) -> tuple[float, list[list[object]]]:
    exhaustive, seconds = timed(SearchRequest(**HOMOGENEOUS, sampler="exhaustive"))
    optimum = exhaustive.plans[0].objective_values[0]
    table(
        "Homogeneous: GPT-3 175B, 1,024 H100-80GB, batch 1,536 x 2,048 tokens (exhaustive)",
        ["valid plans", "fit in memory", "seconds", "plans/s", "best tokens/s", "best plan"],
        [
            [
                f"{exhaustive.evaluated:,}",
                f"{exhaustive.feasible:,}",
                f"{seconds:.2f}",
                f"{exhaustive.evaluated / seconds:,.0f}",
                f"{optimum:,.0f}",
                layout(exhaustive.plans[0].plan),
            ]
        ],
    )
    rows, speed = [], []
    for warm in [True, False] if cold else [True]:
        ratios, firsts = [], []
        for seed in range(seeds):
            request = SearchRequest(
                **HOMOGENEOUS,
                sampler="tpe",
                trials=TPE_TRIALS,
                seed=seed,
                warm_start=warm,
                top_k=TPE_TRIALS,
            )
            result, seconds = timed(request)
            ratio = result.plans[0].objective_values[0] / optimum
            first = first_trial_within(result, optimum)
            ratios.append(ratio)
            firsts.append(first)
            rows.append(
                [
                    "warm" if warm else "cold",
                    seed,
                    f"{ratio:.4f}",
                    first if first is not None else "-",
                    f"{seconds:.1f}",
                ]
            )
            speed.append((result.evaluated, seconds, result.trials or 0))
        # A seed that never got within 1% counts as "later than the budget".
        ordered = sorted(f if f is not None else math.inf for f in firsts)
        middle = statistics.median_low(ordered)
        median_first = middle if math.isfinite(middle) else f"> {TPE_TRIALS}"
        rows.append(
            [
                "warm" if warm else "cold",
                "median",
                f"{statistics.median(ratios):.4f}",
                median_first,
                "",
            ]
        )
    table(
        f"TPE, {TPE_TRIALS} trials: best found / exhaustive optimum, and the first trial "
        f"within {WITHIN:.0%} (warm = seeded with heuristic plans)",
        ["start", "seed", "best / optimum", "trial within 1%", "seconds"],
        rows,
    )
    return optimum, [["tpe", *_rate(speed)]]


def _rate(runs: list[tuple[int, float, int]]) -> list[str]:
    plans = sum(r[0] for r in runs)
    seconds = sum(r[1] for r in runs)
    trials = sum(r[2] for r in runs)
    return [
        f"{plans:,}",
        f"{trials:,}" if trials else "-",
        f"{seconds:.1f}",
        f"{plans / seconds:,.0f}",
    ]


def sampler_speed(tpe_row: list[list[object]], trials: int) -> None:
    rows: list[list[object]] = []
    result, seconds = timed(SearchRequest(**HOMOGENEOUS, sampler="exhaustive"))
    rows.append(["exhaustive", *_rate([(result.evaluated, seconds, 0)])])
    rows.extend(tpe_row)
    for sampler in ("nsga2", "random"):
        request = SearchRequest(**HOMOGENEOUS, sampler=sampler, trials=trials, seed=0)
        result, seconds = timed(request)
        rows.append([sampler, *_rate([(result.evaluated, seconds, result.trials or 0)])])
    table(
        "Search speed, GPT-3 175B on 1,024 H100 (Optuna samplers price every option of a "
        "trial's structure: about 20 plans per trial)",
        ["sampler", "plans priced", "trials", "seconds", "plans/s"],
        rows,
    )


def heterogeneous(short_s: float, seed: int) -> None:
    runs = []
    for budget in (short_s, 10 * short_s):
        request = SearchRequest(**HETEROGENEOUS, timeout_s=budget, seed=seed)
        result, seconds = timed(request)
        runs.append((budget, result, seconds))
    reference = runs[-1][1].plans[0].objective_values[0]
    # Each group's homogeneous plans are enumerated first (the single-type baselines).
    baseline = sum(
        space.size
        for group in request.search_groups
        for space in homogeneous_spaces(request.model_copy(update={"groups": [group.name]}))
    )
    rows = []
    for budget, result, seconds in runs:
        best = result.plans[0]
        rows.append(
            [
                f"{budget:.0f}",
                f"{seconds:.0f}",
                f"{result.trials:,}",
                f"{result.evaluated - baseline:,}",
                f"{best.objective_values[0]:,.0f}",
                f"{best.objective_values[0] / reference - 1:+.2%}",
                f"{(result.gain_over_single_type or 0):+.1%}",
            ]
        )
    table(
        "Heterogeneous: Llama-3 70B on 64 H100-80GB + 128 A100-80GB + 64 A100-40GB, two zones "
        f"(100 Gb/s); {baseline:,} single-group plans enumerated first in every run",
        [
            "budget s",
            "seconds",
            "trials",
            "mixed plans priced",
            "best tokens/s",
            "vs 10x run",
            "vs 1 GPU type",
        ],
        rows,
    )
    short = runs[0][1]
    assert short.single_type_best is not None
    print(f"  best plan ({short_s:.0f} s): {layout(short.plans[0].plan)}")
    single = short.single_type_best
    print(
        f"  best single-GPU-type plan: {layout(single.plan)} on {single.estimate.per_stage[0].gpu}"
        f", {single.objective_values[0]:,.0f} tokens/s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds, 15 s vs 150 s")
    args = parser.parse_args()
    warnings.filterwarnings("ignore")  # Optuna's experimental-feature notices
    seeds = 3 if args.quick else 5
    _, tpe_row = homogeneous(seeds, cold=not args.quick)
    sampler_speed(tpe_row, trials=TPE_TRIALS)
    heterogeneous(15.0 if args.quick else 60.0, seed=0)


if __name__ == "__main__":
    main()
