// The pipeline timeline: a per-stage Gantt chart of one step's micro-batches.

import { COLORS, barLabels, chart, legend } from "./charts.js";
import { fill, h } from "./dom.js";
import * as fmt from "./format.js";
import { simulate, stageDurations } from "./pipeline.js";
import { microBatches, scheduleName } from "./plans.js";

// Lighter shades for later chunks of an interleaved schedule.
const SHADES = {
  F: ["#2f6fde", "#6f9be8", "#1d4fa8", "#9dbbf0"],
  B: ["#e9954f", "#f2b985", "#c26b22", "#f6cfa9"],
};

export function stageLabel(stage) {
  return `Stage ${stage.stage} · ${stage.group}`;
}

/**
 * Draw the timeline into `target` (a container it fills: notes, chart, legend). Returns the
 * simulation, or null when it cannot be drawn (the reason is shown instead).
 */
export function renderGantt(target, { plan, estimate, globalBatch }) {
  const stages = estimate.per_stage || [];
  const m = microBatches(plan, globalBatch);
  if (!stages.length || !m) {
    target.replaceChildren(h("p", { class: "muted" }, "No per-stage timing or batch size: nothing to draw."));
    return null;
  }
  const vpp = plan.pp > 1 ? plan.vpp : 1;
  const durations = stageDurations(stages, vpp);
  let result;
  try {
    result = simulate({ schedule: plan.schedule, microBatches: m, vpp, durations });
  } catch (error) {
    target.replaceChildren(h("p", { class: "alert alert-error" }, `Cannot lay out the schedule: ${error.message}`));
    return null;
  }
  const labels = stages.map(stageLabel);
  const point = (op) => ({
    x: [op.start, op.end],
    y: labels[op.stage],
    label: op.mb + 1,
    mb: op.mb,
    chunk: op.chunk,
  });
  // White separators between micro-batches only where bars are wide enough to keep colour.
  const separators = m * vpp <= 120 ? 1 : 0;
  const dataset = (kind, name) => {
    const ops = result.ops.filter((op) => op.kind === kind);
    return {
      label: name,
      data: ops.map(point),
      backgroundColor: ops.map((op) => SHADES[kind][op.chunk % SHADES[kind].length]),
      borderColor: "#ffffff",
      borderWidth: { left: separators, right: separators },
      borderSkipped: false,
      grouped: false,
      barPercentage: 0.86,
      categoryPercentage: 1,
    };
  };
  const box = h("div", { class: "chart", style: `height:${Math.max(150, 46 + labels.length * 38)}px` });
  const scaled = durations.every((d) => d.scaled);
  const notes = h(
    "p",
    { class: "small muted" },
    `${scheduleName(plan)} · ${fmt.count(m)} micro-batches of ${plan.micro_batch_size} per pipeline`,
    ` · pipeline time ${fmt.seconds(result.makespan)} · stages idle ${fmt.percent(result.bubbleFraction)} of the time (bubble, and waiting on the slowest stage)`,
    scaled ? "" : " · forward/backward split unknown: drawn 1:2",
  );
  const zoom = zoomButtons(plan.pp, m, result.makespan, () => instance);
  const keys = [["Forward", COLORS.forward], ["Backward", COLORS.backward]];
  if (vpp > 1) keys.push(["lighter: the device's later model chunks", SHADES.F[1]]);
  fill(target, notes, zoom, box, legend(keys)); // zoom is null for short pipelines: left out
  const instance = chart(box, "pipeline", `Pipeline timeline: ${labels.length} stages, ${m} micro-batches`, {
    type: "bar",
    data: { labels, datasets: [dataset("F", "Forward"), dataset("B", "Backward")] },
    options: {
      indexAxis: "y",
      parsing: { xAxisKey: "x", yAxisKey: "y" },
      scales: {
        x: {
          type: "linear",
          min: 0,
          max: result.makespan,
          title: { display: true, text: "time in the step" },
          ticks: { callback: (value) => fmt.seconds(value) },
        },
        y: { type: "category", labels, grid: { display: false } },
      },
      plugins: {
        legend: { display: false },
        tooltip: {
          callbacks: {
            title: (items) => items[0].raw.y,
            label: (item) => {
              const raw = item.raw;
              const chunk = vpp > 1 ? ` (chunk ${raw.chunk + 1} of ${vpp})` : "";
              return `${item.dataset.label} of micro-batch ${raw.mb + 1}${chunk}: ${fmt.seconds(raw.x[0])} → ${fmt.seconds(raw.x[1])}`;
            },
          },
        },
      },
    },
    plugins: [barLabels],
  });
  return result;
}

/** With many micro-batches, buttons to look at the warm-up and the cool-down up close. */
function zoomButtons(stages, microBatchCount, makespan, getChart) {
  if (stages < 2 || microBatchCount <= 3 * stages) return null;
  const window = makespan * Math.min(1, (3 * stages) / microBatchCount);
  const views = [
    ["Whole step", 0, makespan],
    ["Start (warm-up)", 0, window],
    ["End (cool-down)", makespan - window, makespan],
  ];
  const buttons = views.map(([label, min, max], index) =>
    h(
      "button",
      {
        type: "button",
        "aria-pressed": index === 0 ? "true" : "false",
        onclick: (event) => {
          const instance = getChart();
          instance.options.scales.x.min = min;
          instance.options.scales.x.max = max;
          instance.update();
          for (const button of buttons) button.setAttribute("aria-pressed", button === event.currentTarget ? "true" : "false");
        },
      },
      label,
    ),
  );
  return h("div", { class: "zoom", role: "group", "aria-label": "Timeline zoom" }, buttons);
}
