"""The dashboard's own logic, run in the browser as the pages run it: the pipeline schedule
simulation against the closed forms it must reproduce, number formatting, constraint parsing,
and which estimate fields count as parameter counts."""

from typing import Any

import pytest
from playwright.sync_api import Page

pytestmark = pytest.mark.browser


def run(page: Page, base_url: str, module: str, body: str, arg: Any = None) -> Any:
    """``body`` runs with the module as ``m`` and ``arg`` passed in from Python."""
    page.goto(f"{base_url}/compare")  # any page: the modules expect the dashboard's document
    script = f"async (arg) => {{ const m = await import('/static/js/{module}'); {body} }}"
    return page.evaluate(script, arg)


@pytest.mark.parametrize(
    ("schedule", "stages", "micro_batches", "vpp", "expected"),
    [
        # Identical stages, forward 1 + backward 2: (m + p - 1) * t for 1F1B and GPipe alike,
        ("1f1b", 4, 8, 1, (8 + 4 - 1) * 3.0),
        ("gpipe", 4, 8, 1, (8 + 4 - 1) * 3.0),
        ("1f1b", 1, 5, 1, 5 * 3.0),
        # and m * t + (p - 1) * t / v interleaved (Narayanan et al. SC'21, section 2.2).
        ("1f1b", 4, 8, 2, 8 * 3.0 + 3 * 3.0 / 2),
        ("1f1b", 8, 16, 4, 16 * 3.0 + 7 * 3.0 / 4),
    ],
)
def test_the_timeline_reproduces_the_pipeline_formulas(
    page: Page,
    base_url: str,
    schedule: str,
    stages: int,
    micro_batches: int,
    vpp: int,
    expected: float,
) -> None:
    result = run(
        page,
        base_url,
        "pipeline.js",
        """const one = {forward: 1 / arg.vpp, backward: 2 / arg.vpp};
        const durations = Array.from({length: arg.stages}, () => one);
        const r = m.simulate({...arg, durations});
        return {makespan: r.makespan, ops: r.ops.length, bubble: r.bubbleFraction};""",
        {"schedule": schedule, "stages": stages, "microBatches": micro_batches, "vpp": vpp},
    )
    assert result["makespan"] == pytest.approx(expected)
    assert result["ops"] == 2 * stages * micro_batches * vpp
    assert result["bubble"] == pytest.approx(1 - micro_batches * 3.0 / expected)


def test_a_slow_stage_sets_the_pace(page: Page, base_url: str) -> None:
    # Stages of 3, 6 and 3 s per micro-batch: the slow one is busy m * 6 s, and the step takes
    # at least that, at most the cost model's T = m * max(t) + (sum(t) - max(t)) (v = 1).
    result = run(
        page,
        base_url,
        "pipeline.js",
        'const r = m.simulate({schedule: "1f1b", microBatches: 6, durations: arg});'
        "return {makespan: r.makespan, busy: r.busy};",
        [
            {"forward": 1, "backward": 2},
            {"forward": 2, "backward": 4},
            {"forward": 1, "backward": 2},
        ],
    )
    assert result["busy"] == pytest.approx([18, 36, 18])
    assert 36 < result["makespan"] <= 6 * 6 + (3 + 6 + 3 - 6)


def test_stage_durations_scale_compute_to_the_whole_micro_batch(page: Page, base_url: str) -> None:
    result = run(
        page,
        base_url,
        "pipeline.js",
        """return m.stageDurations([
          {time_per_microbatch_s: 0.9, forward_s: 0.2, backward_s: 0.4},
          {time_per_microbatch_s: 0.6, forward_s: null, backward_s: null},
        ], 2);""",
    )
    assert result[0] == {
        "forward": pytest.approx(0.15),
        "backward": pytest.approx(0.3),
        "scaled": True,
    }
    assert result[1] == {
        "forward": pytest.approx(0.1),
        "backward": pytest.approx(0.2),
        "scaled": False,
    }


def test_numbers_are_written_for_people(page: Page, base_url: str) -> None:
    result = run(
        page,
        base_url,
        "format.js",
        """return [m.tokensPerS(1.2e6), m.tokensPerS(144095.4), m.seconds(0.0123), m.seconds(21.83),
          m.seconds(2081953), m.gib(46.085), m.gib(0.5), m.usd(0.030843), m.usd(16), m.usd(1234.5),
          m.percent(0.6489), m.count(33663), m.params(1.7e9)];""",
    )
    assert result == [
        "1.2M tokens/s",
        "144.1K tokens/s",
        "12.3 ms",
        "21.8 s",
        "24.1 days",
        "46.1 GiB",
        "512 MiB",
        "$0.0308",
        "$16.00",
        "$1,235",
        "64.9%",
        "33,663",
        "1.7B",
    ]


def test_constraint_cells_become_api_constraints(page: Page, base_url: str) -> None:
    result = run(
        page,
        base_url,
        "constraints_editor.js",
        "return arg.map(m.parseConstraint);",
        ["8", "2..8", "..4", "16..", "1,2,4", "selective,full", "true", "abc"],
    )
    assert result == [
        8,
        {"min": 2, "max": 8},
        {"max": 4},
        {"min": 16},
        [1, 2, 4],
        ["selective", "full"],
        True,
        "abc",
    ]


def test_parameter_counts_are_the_estimates_numeric_param_fields(page: Page, base_url: str) -> None:
    result = run(
        page,
        base_url,
        "plans.js",
        """return m.parameterCounts({total_parameters: 7e9, active_parameters: 1.3e9, num_gpus: 8,
          memory_gib: {parameters: 3.2}, mfu: 0.5});""",
    )
    assert result == [["total_parameters", 7e9], ["active_parameters", 1.3e9]]
