// Heterogeneous plans: which node group runs which pipeline stages, and what crosses zones.

import { SERIES } from "./charts.js";
import { h } from "./dom.js";
import * as fmt from "./format.js";
import { microBatches } from "./plans.js";

/** The node group of stage `stage` in pipeline (data-parallel replica) `replica`. */
function groupOf(stage, replica) {
  return stage.group ?? stage.replicas[replica % stage.replicas.length].group;
}

function gpusOf(stage, plan) {
  if (stage.replicas) return stage.replicas.reduce((sum, replica) => sum + replica.tp, 0) * plan.cp;
  return (stage.tp ?? plan.tp) * (stage.dp ?? plan.dp) * plan.cp;
}

/** Bytes of activations one micro-batch hands to the next stage (the gradient comes back). */
export function activationBytes(plan, training, model) {
  const width = ["fp32", "tf32"].includes(training.precision) ? 4 : 2;
  return plan.micro_batch_size * training.seq_length * model.hidden_size * width;
}

/** Pipeline boundaries whose two sides sit in different zones, with their traffic per step. */
export function zoneCrossings({ plan, cluster, training, model, globalBatch }) {
  const zoneOf = Object.fromEntries(cluster.groups.map((group) => [group.name, group.zone || "default"]));
  const perMicroBatch = activationBytes(plan, training, model);
  const crossings = [];
  for (let s = 0; s + 1 < plan.stages.length; s += 1) {
    const pairs = new Map();
    let bytes = 0;
    for (let replica = 0; replica < plan.dp; replica += 1) {
      const from = zoneOf[groupOf(plan.stages[s], replica)];
      const to = zoneOf[groupOf(plan.stages[s + 1], replica)];
      if (from === to) continue;
      const share = plan.batch_shares ? plan.batch_shares[replica] * plan.dp : 1;
      const m = (microBatches({ ...plan, batch_shares: null }, globalBatch) || 0) * share;
      bytes += m * perMicroBatch; // each way: activations forward, their gradients backward
      const name = [from, to].sort().join(" ↔ ");
      pairs.set(name, (pairs.get(name) || 0) + 1);
    }
    if (pairs.size) {
      const zones = [...pairs.keys()];
      const link = cluster.zone_links.find((candidate) => zones[0] === [...candidate.zones].sort().join(" ↔ "));
      crossings.push({ from: s, to: s + 1, zones, pipelines: [...pairs.values()].reduce((a, b) => a + b, 0), bytes, link });
    }
  }
  return crossings;
}

export function renderClusterMap(target, { plan, estimate, cluster, training, model, globalBatch }) {
  const groupColor = Object.fromEntries(cluster.groups.map((group, i) => [group.name, SERIES[i % SERIES.length]]));
  const stagesOn = new Map(cluster.groups.map((group) => [group.name, []]));
  plan.stages.forEach((stage, index) => {
    const names = stage.replicas ? [...new Set(stage.replicas.map((replica) => replica.group))] : [stage.group];
    for (const name of names) {
      const count = stage.replicas ? stage.replicas.filter((replica) => replica.group === name).length : null;
      stagesOn.get(name)?.push({ index, stage, replicas: count });
    }
  });
  const zones = [...new Set(cluster.groups.map((group) => group.zone || "default"))];
  const zoneBoxes = zones.map((zone) =>
    h(
      "div",
      { class: "zone", "data-zone": zone },
      h("div", { class: "zone-name" }, `zone ${zone}`),
      cluster.groups
        .filter((group) => (group.zone || "default") === zone)
        .map((group) => groupCard(group, stagesOn.get(group.name), groupColor[group.name], plan)),
    ),
  );
  const total = plan.stages.reduce((sum, stage) => sum + stage.num_layers, 0);
  const split = h(
    "div",
    { class: "layer-split", role: "img", "aria-label": "Layers per stage" },
    plan.stages.map((stage, index) =>
      h(
        "div",
        {
          style: `flex:${stage.num_layers};background:${groupColor[stage.group ?? stage.replicas[0].group]}`,
          title: `Stage ${index}: ${stage.num_layers} layers`,
        },
        `S${index} · ${stage.num_layers} L`,
      ),
    ),
  );
  const crossings = zoneCrossings({ plan, cluster, training, model, globalBatch });
  const crossingAt = new Map(crossings.map((crossing) => [crossing.from, crossing]));
  const path = h(
    "div",
    { class: "pipeline-path", "aria-label": "Pipeline order" },
    plan.stages.map((stage, index) => [
      index > 0
        ? h(
            "span",
            { class: `hop ${crossingAt.has(index - 1) ? "cross" : ""}` },
            crossingAt.has(index - 1) ? `→ crosses ${crossingAt.get(index - 1).zones.join(", ")} →` : "→",
          )
        : null,
      stageChip(index, stage.group ?? stage.replicas.map((replica) => replica.group).join("/"), groupColor[stage.group ?? stage.replicas[0].group]),
    ]),
  );
  target.replaceChildren(
    h("div", { class: "cluster-map" }, zoneBoxes),
    h("h3", {}, `Layer split (${total} layers)`),
    split,
    path,
    crossingTable(crossings, plan, estimate.step_time_s),
  );
}

function stageChip(index, title, color) {
  return h("span", { class: "stage-chip", style: `background:${color}`, title }, `S${index}`);
}

function groupCard(group, assigned, color, plan) {
  const size = group.num_nodes * group.gpus_per_node;
  const used = assigned.reduce((sum, entry) => {
    if (entry.replicas === null) return sum + gpusOf(entry.stage, plan);
    const tp = entry.stage.replicas.filter((replica) => replica.group === group.name).reduce((a, r) => a + r.tp, 0);
    return sum + tp * plan.cp;
  }, 0);
  const gpu = typeof group.gpu === "string" ? group.gpu : group.gpu.name;
  return h(
    "div",
    { class: `node-group ${assigned.length ? "" : "idle"}`, "data-group": group.name },
    h("div", { class: "title" }, h("span", { class: "swatch", style: `display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:6px;background:${color}` }), group.name),
    h(
      "div",
      { class: "small muted" },
      `${gpu} · ${group.num_nodes} × ${group.gpus_per_node} GPUs`,
      group.price_per_gpu_hour ? ` · ${fmt.usd(group.price_per_gpu_hour)}/GPU·h` : "",
    ),
    h("div", { class: "small" }, assigned.length ? `uses ${fmt.count(used)} of ${fmt.count(size)} GPUs` : "idle in this plan"),
    h(
      "div",
      {},
      assigned.map((entry) =>
        h(
          "span",
          { class: "stage-chip", style: `background:${color}`, title: `${entry.stage.num_layers} layers` },
          `S${entry.index} · ${entry.stage.num_layers} L` +
            (entry.replicas === null ? ` · tp ${entry.stage.tp ?? plan.tp} × dp ${entry.stage.dp ?? plan.dp}` : ` · ${entry.replicas} replicas`),
        ),
      ),
    ),
  );
}

function crossingTable(crossings, plan, stepTime) {
  if (!crossings.length) {
    return h("p", { class: "small muted" }, "No pipeline boundary crosses a zone: the zone links carry no activations.");
  }
  const busy = (crossing) => (crossing.link ? crossing.bytes / (crossing.link.bandwidth_GBps * 1e9) : null);
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "zone-crossings" },
      h(
        "thead",
        {},
        h("tr", {}, ["Boundary", "Zones", "Pipelines", "Traffic / step, each way", "Zone link", "Link busy / step"].map((t, i) => h("th", { class: i > 1 ? "num" : "" }, t))),
      ),
      h(
        "tbody",
        {},
        crossings.map((crossing) =>
          h(
            "tr",
            {},
            h("td", {}, `S${crossing.from} → S${crossing.to}`),
            h("td", {}, crossing.zones.join(", ")),
            h("td", { class: "num" }, `${crossing.pipelines} of ${plan.dp}`),
            h("td", { class: "num" }, `≈ ${fmt.bytes(crossing.bytes)}`),
            h("td", { class: "num" }, crossing.link ? `${fmt.sig(crossing.link.bandwidth_GBps)} GB/s · ${fmt.sig(crossing.link.latency_ms)} ms` : "—"),
            h("td", { class: "num" }, crossing.link ? `${fmt.seconds(busy(crossing))} (${fmt.percent(busy(crossing) / stepTime, 0)} of the step)` : "—"),
          ),
        ),
      ),
    ),
    h(
      "p",
      { class: "small muted" },
      "Activations go forward and their gradients come back: micro-batch × sequence × hidden × 2 bytes (4 for fp32) per micro-batch and pipeline, each way. The sends overlap compute; the estimate's PP comm counts what is left exposed.",
    ),
  );
}
