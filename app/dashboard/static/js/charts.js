// Chart.js (vendored UMD build, global `Chart`) with the dashboard's defaults and helpers.

import { h } from "./dom.js";

const Chart = window.Chart;

export const COLORS = {
  compute: "#2f6fde",
  recompute: "#7aa5f0",
  tp_comm: "#e07b39",
  cp_comm: "#f2a65a",
  ep_comm: "#c45d9a",
  pp_comm: "#d9534f",
  pipeline_bubble: "#9aa3b2",
  dp_comm_exposed: "#3aa676",
  optimizer: "#8c6bc8",
  other: "#c7ccd6",
  parameters: "#2f6fde",
  gradients: "#e07b39",
  optimizer_states: "#8c6bc8",
  activations: "#3aa676",
  forward: "#2f6fde",
  backward: "#e9954f",
  before: "#9aa3b2",
  after: "#2f6fde",
  capacity: "#b3261e",
};

/** Distinct colours for series (sources, node groups, plans). */
export const SERIES = ["#2f6fde", "#e07b39", "#3aa676", "#8c6bc8", "#d9534f", "#1f9bb5", "#b58a1f", "#c45d9a"];

if (Chart) {
  Chart.defaults.font.family = getComputedStyle(document.body).fontFamily;
  Chart.defaults.font.size = 12;
  Chart.defaults.color = "#4a5466";
  Chart.defaults.borderColor = "#e3e6ec";
  Chart.defaults.maintainAspectRatio = false;
  Chart.defaults.animation = false; // charts are read, not watched; and screenshots are stable
  Chart.defaults.plugins.legend.labels.boxWidth = 12;
  Chart.defaults.plugins.tooltip.mode = "nearest";
}

/**
 * A chart in `container` (replacing any chart there). `label` describes it for screen readers;
 * the canvas gets `data-chart` = `name` so tests and scripts can find it.
 */
export function chart(container, name, label, config) {
  const previous = container.querySelector("canvas");
  if (previous && Chart.getChart(previous)) Chart.getChart(previous).destroy();
  const canvas = h("canvas", { role: "img", "aria-label": label, "data-chart": name });
  container.replaceChildren(canvas);
  return new Chart(canvas, config);
}

/** A chart box: <div class="chart [size]"> to pass to `chart`. */
export function box(size = "") {
  return h("div", { class: `chart ${size}` });
}

/**
 * Plugin: a dashed capacity line across each bar of a (stacked) bar chart.
 * options.plugins.capacityLines = {values: [GiB per category], color}.
 */
export const capacityLines = {
  id: "capacityLines",
  afterDatasetsDraw(instance, _args, options) {
    const values = options && options.values;
    if (!values || !values.length) return;
    const meta = instance.getDatasetMeta(0);
    const { ctx } = instance;
    const y = instance.scales.y;
    ctx.save();
    ctx.strokeStyle = options.color || COLORS.capacity;
    ctx.lineWidth = 2;
    ctx.setLineDash([6, 4]);
    meta.data.forEach((bar, index) => {
      if (values[index] === undefined || values[index] === null) return;
      const half = (bar.width || 40) / 2 + 6;
      const top = y.getPixelForValue(values[index]);
      ctx.beginPath();
      ctx.moveTo(bar.x - half, top);
      ctx.lineTo(bar.x + half, top);
      ctx.stroke();
    });
    ctx.restore();
  },
};

/**
 * Plugin: micro-batch numbers inside Gantt bars wide enough to hold them.
 * Each data point may carry `label`.
 */
export const barLabels = {
  id: "barLabels",
  afterDatasetsDraw(instance) {
    const { ctx } = instance;
    ctx.save();
    ctx.font = `600 10px ${Chart.defaults.font.family}`;
    ctx.fillStyle = "#ffffff";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    instance.data.datasets.forEach((dataset, datasetIndex) => {
      const meta = instance.getDatasetMeta(datasetIndex);
      if (meta.hidden) return;
      meta.data.forEach((bar, index) => {
        const point = dataset.data[index];
        if (!point || point.label === undefined) return;
        const width = Math.abs(bar.x - bar.base);
        const text = String(point.label);
        if (width < ctx.measureText(text).width + 4) return;
        ctx.fillText(text, (bar.x + bar.base) / 2, bar.y);
      });
    });
    ctx.restore();
  },
};

/** A legend row: [[label, color], ...]. */
export function legend(items) {
  return h(
    "div",
    { class: "legend" },
    items.map(([label, color]) => h("span", {}, h("span", { class: "swatch", style: `background:${color}` }), label)),
  );
}
