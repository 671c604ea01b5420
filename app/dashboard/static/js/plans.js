// What a plan and its estimate say, in words and small widgets shared by several pages.

import { h, progressBar } from "./dom.js";
import * as fmt from "./format.js";

/** "dp 8 · tp 4 · pp 3" plus the non-default degrees. */
export function layout(plan) {
  const parts = [`dp ${plan.dp}`, `tp ${plan.tp}`, `pp ${plan.pp}`];
  if (plan.cp > 1) parts.push(`cp ${plan.cp}`);
  if (plan.ep > 1) parts.push(`ep ${plan.ep}`);
  if (plan.vpp > 1) parts.push(`vpp ${plan.vpp}`);
  return parts.join(" · ");
}

/** "mbs 1 · ZeRO-1 · selective recompute" */
export function options(plan) {
  const parts = [`mbs ${plan.micro_batch_size}`];
  if (plan.zero_stage > 0) parts.push(`ZeRO-${plan.zero_stage}`);
  if (plan.recompute !== "none") parts.push(`${plan.recompute} recompute`);
  if (plan.offload_optimizer) parts.push("offload");
  if (plan.schedule === "gpipe") parts.push("GPipe");
  if (plan.stages) parts.push("heterogeneous");
  return parts.join(" · ");
}

/** The schedule the pipeline runs: GPipe, 1F1B or interleaved 1F1B. */
export function scheduleName(plan) {
  if (plan.pp === 1) return "no pipeline";
  if (plan.schedule === "gpipe") return "GPipe";
  return plan.vpp > 1 ? `interleaved 1F1B (vpp ${plan.vpp})` : "1F1B";
}

/** Micro-batches per step of one pipeline: global batch / (dp × micro-batch size). */
export function microBatches(plan, globalBatch) {
  if (!globalBatch) return null;
  if (plan.batch_shares && plan.batch_shares.length) {
    return Math.max(1, Math.round((globalBatch * plan.batch_shares[0]) / plan.micro_batch_size));
  }
  return Math.max(1, Math.round(globalBatch / (plan.dp * plan.micro_batch_size)));
}

/** Peak memory against the tightest stage's capacity: {used, capacity, fraction}. */
export function memoryUse(estimate) {
  let worst = { used: estimate.peak_memory_gib, capacity: null, fraction: null };
  for (const stage of estimate.per_stage || []) {
    const fraction = stage.peak_memory_gib / stage.capacity_gib;
    if (worst.fraction === null || fraction > worst.fraction) {
      worst = { used: stage.peak_memory_gib, capacity: stage.capacity_gib, fraction };
    }
  }
  return worst;
}

export function memoryBar(estimate) {
  const use = memoryUse(estimate);
  const level = use.fraction > 1 ? "over" : use.fraction > 0.9 ? "high" : "";
  return h(
    "div",
    { class: "membar", title: `${fmt.gib(use.used)} of ${fmt.gib(use.capacity)} HBM (${fmt.percent(use.fraction, 0)})` },
    progressBar(use.fraction, { label: "Peak memory of HBM", className: level }),
    h("span", { class: "small nowrap" }, `${fmt.gib(use.used)} / ${fmt.gib(use.capacity)}`),
  );
}

export function feasibleBadge(estimate) {
  const ok = estimate && estimate.feasible;
  return h("span", { class: `badge badge-${ok ? "feasible" : "infeasible"}` }, ok ? "fits" : "does not fit");
}

/** Parameter counts, when the estimate carries them (fields named *param*, numbers). */
export function parameterCounts(estimate) {
  return Object.entries(estimate || {}).filter(
    ([key, value]) => /param/i.test(key) && typeof value === "number",
  );
}

export const TIME_PARTS = [
  ["compute", "Compute"],
  ["recompute", "Recompute"],
  ["tp_comm", "TP comm"],
  ["cp_comm", "CP comm"],
  ["ep_comm", "EP comm"],
  ["pp_comm", "PP comm"],
  ["pipeline_bubble", "Pipeline bubble"],
  ["dp_comm_exposed", "DP comm (exposed)"],
  ["optimizer", "Optimizer"],
  ["other", "Other"],
];

export const MEMORY_PARTS = [
  ["parameters", "Parameters"],
  ["gradients", "Gradients"],
  ["optimizer_states", "Optimizer states"],
  ["activations", "Activations"],
  ["other", "Other"],
];

/** The plan's search-given title: "Plan #1" or "Plan (unranked)". */
export function planTitle(record) {
  return record.rank ? `Plan #${record.rank}` : "Plan (unranked)";
}

/** A search's label: its name, else "model on cluster". */
export function searchTitle(search) {
  if (search.name) return search.name;
  const request = search.request || {};
  const model = request.model?.name || "model";
  const cluster = request.cluster?.name || "cluster";
  return `${model} on ${cluster}`;
}

export const FINISHED = ["succeeded", "failed", "cancelled"];

/** Fraction done and a label for a search's progress. */
export function searchProgress(search) {
  const progress = search.progress || {};
  if (search.status === "succeeded") return { fraction: 1, label: `${fmt.count(progress.trials_done)} done` };
  if (progress.trials_budget) {
    return {
      fraction: progress.trials_done / progress.trials_budget,
      label: `${fmt.count(progress.trials_done)} / ${fmt.count(progress.trials_budget)}`,
    };
  }
  return { fraction: null, label: `${fmt.count(progress.trials_done)} trials` };
}
