// The plan's "Export" area: one link per launch format of GET /v1/plans/{id}/export, each
// enabled when a framework that can run the plan writes it (estimate.launchable_by).

import * as api from "./api.js";
import { h } from "./dom.js";

// Format -> the framework whose launch table it needs (slurm/kubernetes wrap any of them).
const FORMATS = [
  ["megatron", "megatron", "Megatron-LM / Megatron-Core flags and a torchrun line"],
  ["nemo", "megatron", "NeMo 2 recipe overrides"],
  ["deepspeed", "deepspeed", "ds_config.json and the deepspeed launcher"],
  ["torchtitan", "torchtitan", "job-config TOML"],
  ["slurm", null, "an sbatch script (hetjob across node groups)"],
  ["kubernetes", null, "Kubeflow PyTorchJob and TrainJob"],
];

// With an API key, a plain link would arrive without it (401): fetch the document with the key
// and open it from memory instead.
async function openWithKey(event, href) {
  if (!api.apiKey()) return;
  event.preventDefault();
  const response = await fetch(href, { headers: api.authHeaders() });
  const blob = new Blob([await response.text()], { type: "text/plain" });
  window.open(URL.createObjectURL(blob), "_blank");
}

function link(planId, format, description, launchable) {
  const href = api.url(`/v1/plans/${planId}/export?format=${encodeURIComponent(format)}`);
  const item = launchable
    ? h("a", { href, "data-format": format, onclick: (event) => openWithKey(event, href) }, format)
    : h("span", { class: "muted", "data-format": format, title: "no framework that can run this plan writes it" }, format);
  return h("li", {}, item, ` — ${description}`);
}

export async function renderExport(target, record) {
  // The area appears only where the API serves exports (an older server answers 404).
  const probe = await api.probe(`/v1/plans/${record.id}/export?format=slurm`).catch(() => true);
  if (probe === null) {
    target.hidden = true;
    return;
  }
  const launchable = record.estimate?.launchable_by || [];
  const items = FORMATS.map(([format, framework, description]) =>
    link(record.id, format, description, framework ? launchable.includes(framework) : launchable.length > 0),
  );
  const note = launchable.length
    ? `launchable by ${launchable.join(", ")}`
    : "no framework's launch table can run this plan (see the estimate's reasons)";
  target.replaceChildren(
    h("h2", { id: "export-title" }, "Export", h("span", { class: "panel-note" }, note)),
    h("ul", { class: "export-formats" }, items),
  );
  target.hidden = false;
}
