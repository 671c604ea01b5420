"""Demonstration 3: the same machine profiled twice gives calibrations that predict alike.

    .venv/bin/python scripts/calibration_repeatability.py [--full] [--profiles a.json b.json]
        [--save DIR]

Profiles this machine twice (or loads two profiles), calibrates the cost model on each alone,
and prices the plans of ``calibration_common.PLANS`` with each profile's device description and
calibration. Reports the largest relative difference between the two predictions of any plan
(target: below 5%), next to how much the raw measurements themselves moved.
"""

import argparse
import time
from pathlib import Path

import numpy as np
from calibration_common import PLANS, load_average, predict

from costmodel.calibration import fit_calibration
from costmodel.observations import Profile
from profiler.runner import ProfileOptions, run_profile


def headline(profile: Profile) -> dict[str, float]:
    """Best rates per kind of measurement: how much the raw data differs between runs."""
    figures = {
        f"GEMM {dtype} TFLOP/s": max(s.flops / s.median_s for s in profile.gemm if s.dtype == dtype)
        / 1e12
        for dtype in sorted({s.dtype for s in profile.gemm})
    }
    figures["memory GB/s"] = max(s.bytes / s.median_s for s in profile.memory) / 1e9
    figures["attention fwd TFLOP/s"] = (
        max(s.full_flops / s.median_s for s in profile.attention if s.direction == "forward") / 1e12
    )
    for op in sorted({s.op for s in profile.collectives}):
        figures[f"{op} busbw GB/s"] = max(s.busbw_GBps for s in profile.collectives if s.op == op)
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", type=Path, nargs=2, help="two profiles to compare")
    parser.add_argument("--save", type=Path, help="folder to save the two profiles in")
    parser.add_argument("--full", action="store_true", help="profile with the --full sweep")
    args = parser.parse_args()
    started = time.perf_counter()
    if args.profiles:
        profiles = [Profile.model_validate_json(path.read_text()) for path in args.profiles]
    else:
        profiles = []
        for index in range(2):
            options = ProfileOptions(
                mode="full" if args.full else "default", ranks=2, name=f"take-{index + 1}"
            )
            before = load_average()
            profiles.append(run_profile(options))
            print(f"take {index + 1}: load average {before} before, {load_average()} after")
            if args.save:
                args.save.mkdir(parents=True, exist_ok=True)
                path = args.save / f"take-{index + 1}.json"
                path.write_text(profiles[-1].model_dump_json(indent=1))
    calibrations = [fit_calibration([profile]) for profile in profiles]
    predictions = [
        [predict(profile, plan, result.params) for plan in PLANS]
        for profile, result in zip(profiles, calibrations, strict=True)
    ]

    print("raw measurements, take 1 vs take 2:")
    first, second = headline(profiles[0]), headline(profiles[1])
    for name in first:
        if name in second:
            change = second[name] / first[name] - 1
            print(f"  {name:<32}{first[name]:>10.4g}{second[name]:>10.4g}  ({100 * change:+.1f}%)")
    print("\ncalibrated parameters, take 1 vs take 2:")
    for one, two in zip(calibrations[0].changes, calibrations[1].changes, strict=False):
        if one.name == two.name:
            print(f"  {one.name:<32}{one.after:>10.4g}{two.after:>10.4g}")
    print("\npredicted step time (s), take 1 vs take 2:")
    differences = []
    for index, plan in enumerate(PLANS):
        a, b = predictions[0][index], predictions[1][index]
        difference = abs(b / a - 1)
        differences.append(difference)
        print(f"  {plan.label:<24}{a:>9.3f}{b:>9.3f}  ({100 * difference:.1f}%)")
    worst = float(np.max(differences))
    verdict = "within" if worst < 0.05 else "NOT within"
    print(
        f"\nlargest difference {100 * worst:.1f}%, mean {100 * float(np.mean(differences)):.1f}% "
        f"({verdict} the 5% target); {time.perf_counter() - started:.0f} s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
