// Compare 2-4 plans side by side; cells that differ from the first plan are highlighted and the
// best value of each metric is marked.

import * as api from "./api.js";
import { COLORS, box, chart } from "./charts.js";
import { failure, fill, h, link, loading } from "./dom.js";
import * as fmt from "./format.js";
import { TIME_PARTS, layout, memoryUse, microBatches, planTitle, searchTitle } from "./plans.js";

const body = document.getElementById("compare-body");
const ids = (new URLSearchParams(location.search).get("plans") || "").split(",").map((id) => id.trim()).filter(Boolean);

// [label, value(record), format, better: "high" | "low" | undefined]
const SECTIONS = [
  [
    "Performance",
    [
      ["Tokens/s", (r) => r.estimate.tokens_per_s, fmt.tokensPerS, "high"],
      ["Tokens/s per GPU", (r) => r.estimate.tokens_per_s_per_gpu, fmt.short, "high"],
      ["MFU", (r) => r.estimate.mfu, fmt.percent, "high"],
      ["HFU", (r) => r.estimate.hfu, fmt.percent, "high"],
      ["Step time", (r) => r.estimate.step_time_s, fmt.seconds, "low"],
      ["Peak memory", (r) => r.estimate.peak_memory_gib, fmt.gib, "low"],
      ["Peak / HBM", (r) => memoryUse(r.estimate).fraction, (v) => fmt.percent(v, 0), "low"],
      ["GPUs used", (r) => r.estimate.num_gpus, fmt.count],
      ["$ / M tokens", (r) => r.estimate.usd_per_million_tokens, fmt.usd, "low"],
      ["$ / hour", (r) => r.estimate.usd_per_hour, fmt.usd, "low"],
      ["Time to train", (r) => r.estimate.time_to_train_s, fmt.seconds, "low"],
      ["Fits in memory", (r) => (r.estimate.feasible ? "yes" : "no"), String],
    ],
  ],
  [
    "Step time breakdown",
    TIME_PARTS.map(([key, label]) => [label, (r) => r.estimate.time_breakdown_s[key] || 0, fmt.seconds, "low"]),
  ],
  [
    "Layout",
    [
      ["dp", (r) => r.plan.dp, String],
      ["tp", (r) => r.plan.tp, String],
      ["pp", (r) => r.plan.pp, String],
      ["cp", (r) => r.plan.cp, String],
      ["ep", (r) => r.plan.ep, String],
      ["vpp", (r) => r.plan.vpp, String],
      ["Micro-batch size", (r) => r.plan.micro_batch_size, String],
      ["Micro-batches", (r) => microBatches(r.plan, r.global_batch_size), fmt.count],
      ["ZeRO stage", (r) => r.plan.zero_stage, String],
      ["Recompute", (r) => r.plan.recompute, String],
      ["Sequence parallel", (r) => ((r.plan.sequence_parallel ?? r.plan.tp > 1) ? "on" : "off"), String],
      ["Schedule", (r) => r.plan.schedule, String],
      ["Offload optimizer", (r) => (r.plan.offload_optimizer ? "yes" : "no"), String],
      ["Stages", (r) => (r.plan.stages ? r.plan.stages.map((s) => `${s.group ?? "mixed"}:${s.num_layers}`).join(" | ") : "uniform"), String],
      ["Global batch", (r) => r.global_batch_size, fmt.count],
    ],
  ],
];

const same = (a, b) => (typeof a === "number" && typeof b === "number" ? Math.abs(a - b) <= 1e-9 * Math.max(1, Math.abs(a)) : a === b);

function row(label, values, format, better) {
  const numeric = values.filter((v) => typeof v === "number" && !Number.isNaN(v));
  const bestValue = better && numeric.length > 1 ? (better === "high" ? Math.max(...numeric) : Math.min(...numeric)) : null;
  const allSame = values.every((v) => same(v, values[0]));
  return h(
    "tr",
    { "data-row": label },
    h("th", { scope: "row" }, label),
    values.map((value, index) => {
      const classes = ["num"];
      if (index > 0 && !same(value, values[0])) classes.push("diff");
      if (bestValue !== null && !allSame && same(value, bestValue)) classes.push("best");
      return h("td", { class: classes.join(" ") }, value === null || value === undefined ? fmt.DASH : format(value));
    }),
  );
}

function table(records, searches) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "compare-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", {}, ""),
          records.map((r, i) =>
            h(
              "th",
              { class: "num", scope: "col" },
              link(`/plans/${r.id}`, `${planTitle(r)} · ${layout(r.plan)}`),
              h("div", { class: "small muted", style: "text-transform:none" }, searches[i] ? searchTitle(searches[i]) : ""),
            ),
          ),
        ),
      ),
      SECTIONS.map(([title, rows]) =>
        h(
          "tbody",
          {},
          h("tr", { class: "section-row" }, h("th", { colspan: records.length + 1 }, title)),
          rows.map(([label, value, format, better]) => row(label, records.map((r) => value(r)), format, better)),
        ),
      ),
    ),
  );
}

function breakdownChart(container, records) {
  const labels = records.map((r) => `${planTitle(r)} · ${layout(r.plan)}`);
  chart(container, "compare-time", `Step time breakdown of ${records.length} plans`, {
    type: "bar",
    data: {
      labels,
      datasets: TIME_PARTS.filter(([key]) => records.some((r) => r.estimate.time_breakdown_s[key] > 0)).map(([key, label]) => ({
        label,
        data: records.map((r) => r.estimate.time_breakdown_s[key] || 0),
        backgroundColor: COLORS[key],
        stack: "time",
      })),
    },
    options: {
      indexAxis: "y",
      scales: { x: { stacked: true, ticks: { callback: (v) => fmt.seconds(v) }, title: { display: true, text: "seconds per step" } }, y: { stacked: true } },
      plugins: { legend: { position: "bottom" }, tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${fmt.seconds(item.parsed.x)}` } } },
    },
  });
}

async function render() {
  if (ids.length < 2 || ids.length > 4) {
    fill(
      body,
      h(
        "div",
        { class: "state state-empty" },
        h("h2", {}, "Pick two to four plans"),
        h("p", {}, "Select plans in a search's ranked table and press “Compare selected”, or open /compare?plans=ID,ID."),
        h("p", {}, link("/", "Go to the searches", { class: "button" })),
      ),
    );
    return;
  }
  let records;
  try {
    records = await Promise.all(ids.map((id) => api.get(`/v1/plans/${encodeURIComponent(id)}`)));
  } catch (error) {
    fill(body, failure("Could not load the plans", error, link("/", "Back to searches", { class: "button" })));
    return;
  }
  const missing = records.filter((r) => !r.estimate);
  if (missing.length) {
    fill(body, failure("A plan has no estimate", new Error(missing.map((r) => r.id).join(", "))));
    return;
  }
  const searchIds = [...new Set(records.map((r) => r.search_id))];
  const searchList = await Promise.all(searchIds.map((id) => api.get(`/v1/searches/${id}`).catch(() => null)));
  const byId = Object.fromEntries(searchIds.map((id, i) => [id, searchList[i]]));
  const container = box();
  container.style.height = `${120 + records.length * 50}px`;
  fill(
    body,
    h("section", { class: "panel" }, table(records, records.map((r) => byId[r.search_id]))),
    h("section", { class: "panel", "aria-labelledby": "compare-time-title" }, h("h2", { id: "compare-time-title" }, "Where the time goes"), container),
  );
  breakdownChart(container, records);
}

fill(body, loading("Loading the plans…"));
render();
