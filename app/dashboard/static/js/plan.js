// Plan detail: where the step time goes, where the memory goes, the pipeline timeline, the
// cluster map of heterogeneous plans, parameter counts and exports when the API has them.

import * as api from "./api.js";
import { COLORS, box, capacityLines, chart, legend } from "./charts.js";
import { renderClusterMap } from "./cluster_map.js";
import { $, failure, fill, h, link, loading, metricCard, page } from "./dom.js";
import * as fmt from "./format.js";
import { renderGantt, stageLabel } from "./gantt.js";
import { goodputContent } from "./goodput.js";
import { renderExport } from "./plan_export.js";
import {
  MEMORY_PARTS,
  TIME_PARTS,
  feasibleBadge,
  layout,
  memoryUse,
  microBatches,
  options,
  parameterCounts,
  planTitle,
  scheduleName,
  searchTitle,
} from "./plans.js";

const { data } = page();
const planId = data.planId;
const body = document.getElementById("plan-body");

function panel(id, title, note, ...content) {
  return h(
    "section",
    { class: "panel", id, "aria-labelledby": `${id}-title` },
    h("h2", { id: `${id}-title` }, title, note ? h("span", { class: "panel-note" }, note) : null),
    ...content,
  );
}

function headline(record, search) {
  const estimate = record.estimate;
  $("#plan-crumbs").replaceChildren(link("/", "Searches"), " / ", link(`/searches/${record.search_id}`, search ? searchTitle(search) : "search"), " /");
  $("#plan-title").replaceChildren(`${planTitle(record)}: ${layout(record.plan)}`, " ", feasibleBadge(estimate));
  document.title = `${planTitle(record)} ${layout(record.plan)} · autopar`;
  $("#plan-subtitle").textContent = `${options(record.plan)} · ${scheduleName(record.plan)}` + (record.calibration_id ? " · calibrated" : "");
  fill(
    $("#plan-actions"),
    search?.progress?.best?.plan_id && search.progress.best.plan_id !== record.id
      ? link(`/compare?plans=${record.id},${search.progress.best.plan_id}`, "Compare with the best", { class: "button" })
      : null,
    link(`/searches/${record.search_id}`, "All plans of the search", { class: "button" }),
  );
}

function metrics(record) {
  const e = record.estimate;
  const memory = memoryUse(e);
  return h(
    "div",
    { class: "metrics" },
    metricCard("Tokens/s", fmt.short(e.tokens_per_s), `${fmt.short(e.tokens_per_s_per_gpu)} per GPU`),
    metricCard("MFU", fmt.percent(e.mfu), `HFU ${fmt.percent(e.hfu)} · ${fmt.tflops(e.model_tflops_per_gpu)}`),
    metricCard("Step time", fmt.seconds(e.step_time_s), record.global_batch_size ? `${fmt.count(record.global_batch_size)} sequences` : null),
    metricCard("Peak memory", fmt.gib(memory.used), memory.capacity ? `${fmt.percent(memory.fraction, 0)} of ${fmt.gib(memory.capacity)}` : null),
    metricCard("$ / M tokens", fmt.usd(e.usd_per_million_tokens), e.usd_per_hour !== null ? `${fmt.usd(e.usd_per_hour)} / hour` : "no price"),
    metricCard("Time to train", fmt.seconds(e.time_to_train_s), e.usd_to_train ? `${fmt.usd(e.usd_to_train)} · goodput included` : null),
    metricCard("GPUs", fmt.count(e.num_gpus), `${e.per_stage.length} stage${e.per_stage.length === 1 ? "" : "s"}`),
  );
}

function planChips(record) {
  const plan = record.plan;
  const m = microBatches(plan, record.global_batch_size);
  const items = [
    ["dp", plan.dp], ["tp", plan.tp], ["pp", plan.pp], ["cp", plan.cp], ["ep", plan.ep], ["vpp", plan.vpp],
    ["micro-batch", plan.micro_batch_size], ["micro-batches", m ?? "—"], ["ZeRO", plan.zero_stage],
    ["recompute", plan.recompute], ["sequence parallel", (plan.sequence_parallel ?? plan.tp > 1) ? "on" : "off"],
    ["schedule", plan.schedule], ["offload optimizer", plan.offload_optimizer ? "yes" : "no"],
    ["overlap grad reduce", plan.overlap_grad_reduce ? "yes" : "no"], ["TP comm overlap", plan.tp_comm_overlap ? "yes" : "no"],
  ];
  if (plan.dp_shard) items.push(["dp shard", plan.dp_shard]);
  if (plan.group) items.push(["group", plan.group]);
  return h("div", { class: "chips" }, items.map(([key, value]) => h("span", { class: "chip" }, h("span", { class: "k" }, key), h("b", {}, String(value)))));
}

function timeBreakdown(target, estimate) {
  const parts = TIME_PARTS.map(([key, label]) => ({ key, label, value: estimate.time_breakdown_s[key] || 0 })).filter((p) => p.value > 0);
  const container = box();
  const total = estimate.step_time_s;
  const table = h(
    "table",
    { class: "small" },
    h("tbody", {}, parts.map((p) => h("tr", {}, h("td", {}, h("span", { class: "swatch", style: `display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:${COLORS[p.key]}` }), p.label), h("td", { class: "num" }, fmt.seconds(p.value)), h("td", { class: "num" }, fmt.percent(p.value / total))))),
  );
  fill(target, h("div", { class: "grid grid-2" }, container, h("div", {}, table, h("p", { class: "small muted" }, `Step ${fmt.seconds(total)}: the parts on the critical path add up to it.`))));
  chart(container, "time-breakdown", `Step time breakdown: ${parts.map((p) => `${p.label} ${fmt.seconds(p.value)}`).join(", ")}`, {
    type: "bar",
    data: {
      labels: parts.map((p) => p.label),
      datasets: [{ label: "seconds per step", data: parts.map((p) => p.value), backgroundColor: parts.map((p) => COLORS[p.key]) }],
    },
    options: {
      indexAxis: "y",
      scales: { x: { ticks: { callback: (v) => fmt.seconds(v) } }, y: { grid: { display: false } } },
      plugins: { legend: { display: false }, tooltip: { callbacks: { label: (item) => `${fmt.seconds(item.parsed.x)} (${fmt.percent(item.parsed.x / total)} of the step)` } } },
    },
  });
}

function memoryChart(target, estimate) {
  const stages = estimate.per_stage;
  const container = box("tall");
  fill(
    target,
    container,
    legend([...MEMORY_PARTS.map(([key, label]) => [label, COLORS[key]]), ["HBM capacity", COLORS.capacity]]),
  );
  const capacities = stages.map((s) => s.capacity_gib);
  chart(container, "memory", `Memory per GPU of ${stages.length} stages against HBM capacity`, {
    type: "bar",
    data: {
      labels: stages.map((s) => [`S${s.stage} · ${s.group}`, `${s.num_layers} layers`]),
      datasets: MEMORY_PARTS.map(([key, label]) => ({
        label,
        data: stages.map((s) => s.memory_gib[key] || 0),
        backgroundColor: COLORS[key === "other" ? "other" : key],
        stack: "memory",
        maxBarThickness: 90,
      })),
    },
    options: {
      scales: {
        x: { stacked: true, grid: { display: false } },
        y: { stacked: true, beginAtZero: true, suggestedMax: Math.max(...capacities) * 1.05, title: { display: true, text: "GiB per GPU" } },
      },
      plugins: {
        legend: { display: false },
        capacityLines: { values: capacities },
        tooltip: {
          mode: "index",
          callbacks: {
            label: (item) => `${item.dataset.label}: ${fmt.gib(item.parsed.y)}`,
            title: (items) => {
              const s = stages[items[0].dataIndex];
              return `${stageLabel(s)} (${s.gpu}, ${s.num_layers} layers)`;
            },
            footer: (items) => {
              const s = stages[items[0].dataIndex];
              return `peak ${fmt.gib(s.peak_memory_gib)} of ${fmt.gib(s.capacity_gib)} (${fmt.percent(s.peak_memory_gib / s.capacity_gib, 0)})`;
            },
          },
        },
      },
    },
    plugins: [capacityLines],
  });
}

function stageTable(estimate) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "stages-table" },
      h("thead", {}, h("tr", {}, ["Stage", "Group", "GPU", "Layers", "tp × dp", "Per micro-batch", "Forward", "Backward", "Peak memory"].map((t, i) => h("th", { class: i >= 3 ? "num" : "" }, t)))),
      h(
        "tbody",
        {},
        estimate.per_stage.map((s) =>
          h(
            "tr",
            {},
            h("td", {}, `S${s.stage}`),
            h("td", {}, s.group),
            h("td", {}, s.gpu),
            h("td", { class: "num" }, s.num_layers),
            h("td", { class: "num" }, `${s.tp} × ${s.dp}`),
            h("td", { class: "num" }, fmt.seconds(s.time_per_microbatch_s)),
            h("td", { class: "num" }, fmt.seconds(s.forward_s)),
            h("td", { class: "num" }, fmt.seconds(s.backward_s)),
            h("td", { class: "num" }, `${fmt.gib(s.peak_memory_gib)} / ${fmt.gib(s.capacity_gib)}`),
          ),
        ),
      ),
    ),
  );
}

function goodputPanel(estimate) {
  const content = goodputContent(estimate);
  return content ? panel("goodput", "Goodput", "failures, checkpoints and restarts priced", content) : null;
}

function parameters(estimate) {
  const counts = parameterCounts(estimate);
  if (!counts.length) return null;
  return panel(
    "parameters",
    "Parameters",
    null,
    h("div", { class: "metrics" }, counts.map(([key, value]) => metricCard(key.replaceAll("_", " "), fmt.params(value), fmt.count(value)))),
  );
}

async function render() {
  let record;
  try {
    record = await api.get(`/v1/plans/${planId}`);
  } catch (error) {
    const what = error.status === 404 ? "No such plan" : "Could not load the plan";
    $("#plan-title").textContent = what;
    fill(body, failure(what, error, link("/", "Back to searches", { class: "button" })));
    return;
  }
  const search = await api.get(`/v1/searches/${record.search_id}`).catch(() => null);
  headline(record, search);
  const estimate = record.estimate;
  if (!estimate) {
    fill(body, failure("This plan has no estimate", new Error("the search stored the plan without pricing it")));
    return;
  }
  const timeTarget = h("div");
  const memoryTarget = h("div");
  const ganttTarget = h("div", { id: "gantt" });
  const mapTarget = h("div", { id: "cluster-map" });
  const exportTarget = h("section", { class: "panel", id: "export", hidden: true, "aria-labelledby": "export-title" });
  const heterogeneous = Boolean(record.plan.stages);
  fill(
    body,
    estimate.feasible
      ? null
      : h("div", { class: "alert alert-error", role: "alert" }, h("b", {}, "Does not fit: "), h("ul", {}, estimate.reasons.map((r) => h("li", {}, r)))),
    metrics(record),
    panel("layout", "Layout", record.calibration_id ? "priced with a calibration" : "uncalibrated cost model", planChips(record), record.calibration_id ? h("p", { class: "small" }, link(`/calibrations/${record.calibration_id}`, "the calibration")) : null),
    parameters(estimate),
    goodputPanel(estimate),
    h(
      "div",
      { class: "grid grid-2" },
      panel("time", "Where the time goes", `step ${fmt.seconds(estimate.step_time_s)}`, timeTarget),
      panel("memory-panel", "Where the memory goes", "per GPU, by stage", memoryTarget),
    ),
    h("div", { style: "height:1rem" }),
    panel("pipeline", "Pipeline timeline", "one step, per stage", ganttTarget),
    heterogeneous ? panel("cluster", "Cluster map", "which node group runs which stages", mapTarget) : null,
    panel("stages", "Stages", null, stageTable(estimate)),
    exportTarget,
  );
  timeBreakdown(timeTarget, estimate);
  memoryChart(memoryTarget, estimate);
  renderGantt(ganttTarget, { plan: record.plan, estimate, globalBatch: record.global_batch_size || search?.request?.training?.global_batch_size });
  if (heterogeneous && search?.request) {
    renderClusterMap(mapTarget, {
      plan: record.plan,
      estimate,
      cluster: search.request.cluster,
      training: search.request.training,
      model: search.request.model,
      globalBatch: record.global_batch_size || search.request.training.global_batch_size,
    });
  } else if (heterogeneous) {
    fill(mapTarget, h("p", { class: "muted" }, "The search's cluster could not be loaded."));
  }
  renderExport(exportTarget, record).catch(() => {});
}

fill(body, loading("Loading the plan…"));
render();
