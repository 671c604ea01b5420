// Goodput panel of a plan: the share of wall time spent on kept steps once failures,
// checkpoints and restarts are priced (costmodel.goodput), the checkpoint interval, the
// interruptions over the run and where the lost time goes.

import { h, metricCard } from "./dom.js";
import * as fmt from "./format.js";

export const LOST_PARTS = [
  ["checkpoint_writes", "Checkpoint writes"],
  ["recomputed", "Recomputed steps"],
  ["restarts", "Restarts"],
];

/** Rows of the lost-time table: label, share of wall time, seconds over the run (or null). */
export function lostRows(goodput) {
  return LOST_PARTS.map(([key, label]) => [label, goodput.lost_share[key], goodput.lost_time_s ? goodput.lost_time_s[key] : null]);
}

/** One sentence about the checkpoint: strategy, size, write and stall. */
export function checkpointSummary(goodput) {
  const stall = goodput.checkpoint_exposed_s < goodput.checkpoint_write_s ? `, stalls training ${fmt.seconds(goodput.checkpoint_exposed_s)}` : "";
  return `${goodput.checkpoint_strategy} checkpoint of ${fmt.gib(goodput.checkpoint_total_gib)} (${fmt.gib(goodput.checkpoint_gib_per_gpu)} per GPU): written in ${fmt.seconds(goodput.checkpoint_write_s)}${stall}, loaded in ${fmt.seconds(goodput.checkpoint_load_s)}.`;
}

/** The panel's content, or null for an estimate priced before goodput existed. */
export function goodputContent(estimate) {
  const goodput = estimate.goodput;
  if (!goodput) return null;
  const spares = `${fmt.count(goodput.hot_spare_nodes)} hot spare node${goodput.hot_spare_nodes === 1 ? "" : "s"}`;
  return h(
    "div",
    { id: "goodput-body" },
    h(
      "div",
      { class: "metrics" },
      metricCard("Goodput", fmt.percent(goodput.goodput), `${fmt.short(estimate.effective_tokens_per_s)} effective tokens/s`),
      metricCard("Checkpoint every", fmt.seconds(goodput.checkpoint_interval_s), goodput.mtbf_s ? `job MTBF ${fmt.seconds(goodput.mtbf_s)}` : "no failures"),
      metricCard("Interruptions", goodput.interruptions !== null && goodput.interruptions < 10 ? fmt.sig(goodput.interruptions, 2) : fmt.count(goodput.interruptions), goodput.interruptions === null ? "no train_tokens" : "over the run"),
      metricCard("Per failure", fmt.seconds(goodput.restart_s), `restart · redo ${fmt.seconds(goodput.lost_work_per_failure_s)} · ${spares}`),
    ),
    h(
      "table",
      { class: "small", id: "goodput-lost" },
      h("thead", {}, h("tr", {}, h("th", {}, "Lost time"), h("th", { class: "num" }, "share of wall time"), h("th", { class: "num" }, "over the run"))),
      h("tbody", {}, lostRows(goodput).map(([label, share, seconds]) => h("tr", {}, h("td", {}, label), h("td", { class: "num" }, fmt.percent(share, 2)), h("td", { class: "num" }, fmt.seconds(seconds))))),
    ),
    h("p", { class: "small muted" }, checkpointSummary(goodput)),
  );
}
