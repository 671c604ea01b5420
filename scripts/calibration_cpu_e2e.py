"""Demonstration 2: profile this machine, train a small GPT for real under several plans, and
compare the calibrated cost model's step times with the measured ones.

    .venv/bin/python scripts/calibration_cpu_e2e.py [--profile profile.json] [--out results.json]

Steps: (1) ``run_profile`` measures GEMMs, memory-bound kernels, attention and gloo collectives
on 2 CPU ranks (or ``--profile`` loads one); (2) a 4-layer, hidden-256 GPT trains on the same
2 ranks under each plan of ``calibration_common.PLANS`` (single rank, 2-way data parallel over
gloo, a 2-stage pipeline, 2-way tensor parallel), median of timed steps after warm-up, the plans
visited in rounds so that a busy spell of the machine spreads over all of them; (3) the
cost model prices each plan with
  - default parameters (the profile's nominal device description only),
  - parameters calibrated on the profile alone (no training step seen),
  - parameters calibrated on the profile plus the OTHER plans' measured steps (leave-one-out:
    the closed loop, each plan predicted by a calibration that never saw it);
and the table reports each prediction's error and whether the plans come out in measured order:
over all pairs of plans, and over the pairs whose measured difference exceeds the measurement's
spread (interquartile ranges of the step times apart; ``calibration_common.resolved_pairs``).
"""

import argparse
import json
import time
from pathlib import Path

import numpy as np
from calibration_common import (
    GLOBAL_BATCH,
    PLANS,
    SHAPE,
    discordant_pairs,
    load_average,
    observation,
    predict,
    ranks,
    resolved_pairs,
)

from costmodel.calibration import CalibrationError, fit_calibration
from costmodel.observations import Profile
from costmodel.params import DEFAULT_PARAMS
from profiler.launcher import run_ranks
from profiler.minigpt import measure_plans
from profiler.runner import ProfileOptions, run_profile


def measure(profile: Profile, steps: int, warmup: int, rounds: int) -> list[list[float]]:
    """Per plan, every timed step (s)."""
    results = run_ranks(
        measure_plans,
        (SHAPE, PLANS, GLOBAL_BATCH, steps, warmup, rounds),
        world=profile.device.ranks,
        backend="gloo",
        threads_per_rank=profile.device.threads_per_rank,
    )
    return [[float(t) for t in result["step_times_s"]] for result in results]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=Path, help="use this profile instead of measuring")
    parser.add_argument("--measured", type=Path, help="reuse step times from an earlier --out file")
    parser.add_argument("--out", type=Path, help="write figures as JSON here")
    parser.add_argument("--steps", type=int, default=3, help="timed steps per plan and round")
    parser.add_argument("--rounds", type=int, default=4, help="rounds over all plans")
    parser.add_argument("--warmup", type=int, default=2)
    args = parser.parse_args()

    started = time.perf_counter()
    print(f"load average before: {load_average()}")
    if args.profile:
        profile = Profile.model_validate_json(args.profile.read_text())
    else:
        profile = run_profile(ProfileOptions(ranks=2))
        if args.out:
            args.out.with_suffix(".profile.json").write_text(profile.model_dump_json(indent=1))
    print(f"profile: {profile.name}, {profile.sample_count} samples ({profile.gpu.name})")
    if args.measured:
        earlier = json.loads(args.measured.read_text())
        # Files from before step times were kept: each median stands for its plan's spread.
        step_times = earlier.get("step_times_s") or [[t] for t in earlier["measured_s"]]
    else:
        step_times = measure(profile, args.steps, args.warmup, args.rounds)
    measured = [float(np.median(times)) for times in step_times]
    if args.out and not args.measured:
        args.out.write_text(json.dumps({"measured_s": measured, "step_times_s": step_times}))
    print(f"measured {len(PLANS)} plans ({time.perf_counter() - started:.0f} s so far)")

    default = [predict(profile, plan, DEFAULT_PARAMS) for plan in PLANS]
    profile_only = fit_calibration([profile])
    from_profile = [predict(profile, plan, profile_only.params) for plan in PLANS]
    observed = [observation(profile, plan, t) for plan, t in zip(PLANS, measured, strict=True)]
    leave_one_out = []
    refusals = []
    for index, plan in enumerate(PLANS):
        others = observed[:index] + observed[index + 1 :]
        try:
            fitted = fit_calibration([profile], others, k_folds=3).params
        except CalibrationError as exc:
            refusals.append(f"{plan.label}: {exc}")
            fitted = profile_only.params  # the refused calibration is not used
        leave_one_out.append(predict(profile, plan, fitted))
    closed_loop = fit_calibration([profile], observed, k_folds=len(PLANS))

    columns = {
        "default": default,
        "profile-calibrated": from_profile,
        "closed loop (LOO)": leave_one_out,
    }
    header = f"{'plan':<22}{'measured':>10}" + "".join(f"{name:>22}" for name in columns)
    print("\nstep time (s), prediction (error):")
    print(header)
    for index, plan in enumerate(PLANS):
        row = f"{plan.label:<22}{measured[index]:>10.3f}"
        for values in columns.values():
            error = values[index] / measured[index] - 1
            row += f"{values[index]:>13.3f} ({100 * error:+5.1f}%)"
        print(row)
    print(f"{'measured rank':<22}{'':>10}" + f"{ranks(measured)!s:>22}")
    spread = [
        float(np.percentile(times, 75) - np.percentile(times, 25)) / float(np.median(times))
        for times in step_times
    ]
    print(
        f"{'measured IQR/median':<22}{'':>10}"
        + " ".join(f"{100 * value:.0f}%" for value in spread)
        + f" ({sum(len(times) for times in step_times)} steps)"
    )
    resolved = resolved_pairs(step_times)
    all_pairs = len(PLANS) * (len(PLANS) - 1) // 2
    summary = {}
    for name, values in columns.items():
        errors = np.abs(np.array(values) / np.array(measured) - 1)
        pairs = discordant_pairs(measured, values)
        resolved_swapped = discordant_pairs(measured, values, resolved)
        summary[name] = {
            "mape": float(errors.mean()),
            "max_error": float(errors.max()),
            "within_25pct": int(np.sum(errors <= 0.25)),
            "discordant_pairs": pairs,
            "resolved_pairs": len(resolved),
            "discordant_resolved_pairs": resolved_swapped,
            "ranks": ranks(values),
        }
        print(
            f"{name:<22} MAPE {100 * errors.mean():5.1f}%  max {100 * errors.max():5.1f}%  "
            f"within 25%: {int(np.sum(errors <= 0.25))}/{len(PLANS)}  "
            f"order: {ranks(values)} ({pairs} of {all_pairs} pairs swapped; "
            f"{resolved_swapped} of the {len(resolved)} pairs apart beyond the spread)"
        )
    print("\nprofile-only calibration moved:")
    for change in profile_only.moved:
        print(f"  {change.name:<28}{change.before:>10.4g} -> {change.after:.4g}")
    print("closed-loop calibration (profile + all plans) moved:")
    for change in closed_loop.moved:
        print(f"  {change.name:<28}{change.before:>10.4g} -> {change.after:.4g}")
    for error in closed_loop.held_out:
        print(
            f"  held-out {error.source:<32} {100 * error.mape_before:6.1f}% -> "
            f"{100 * error.mape_after:5.1f}%"
        )
    for refusal in refusals:
        print(f"refused: {refusal}")
    print(f"\nload average after: {load_average()}; {time.perf_counter() - started:.0f} s total")
    if args.out:
        args.out.write_text(
            json.dumps(
                {
                    "plans": [plan.label for plan in PLANS],
                    "measured_s": measured,
                    "step_times_s": step_times,
                    **{f"predicted_{name}": values for name, values in columns.items()},
                    "summary": summary,
                    "profile": json.loads(profile.model_dump_json()),
                },
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
