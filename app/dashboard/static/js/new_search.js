// New search: the form behind POST /v1/searches (and POST /v1/models/import-hf).

import * as api from "./api.js";
import { ClusterEditor } from "./cluster_editor.js";
import { ConstraintsEditor } from "./constraints_editor.js";
import { $, $$, h } from "./dom.js";
import { clearErrors, showErrors } from "./form_errors.js";
import * as fmt from "./format.js";

const form = document.getElementById("search-form");
const summary = document.getElementById("form-errors");
const submitButtons = [document.getElementById("submit"), document.getElementById("submit-top")];
const submitStatus = document.getElementById("submit-status");
const query = new URLSearchParams(location.search);

const clusterEditor = new ClusterEditor({
  groupsTable: document.getElementById("groups-editor"),
  linksTable: document.getElementById("links-editor"),
  nameInput: document.getElementById("f-cluster-name"),
});
const constraints = new ConstraintsEditor(document.getElementById("constraints-editor"));
let imported = null; // {text, name, record}: the Hugging Face config last imported

// ---- modes (preset / fields / ...) ---------------------------------------------------------
function mode(kind) {
  return form.querySelector(`input[name="${kind}_mode"]:checked`).value;
}

function showMode(kind) {
  const current = mode(kind);
  for (const panel of $$(`[data-mode-panel^="${kind}:"]`, form)) {
    panel.hidden = panel.dataset.modePanel !== `${kind}:${current}`;
  }
}

function setMode(kind, value) {
  form.querySelector(`input[name="${kind}_mode"][value="${value}"]`).checked = true;
  showMode(kind);
}

for (const kind of ["model", "cluster", "training"]) {
  for (const radio of $$(`input[name="${kind}_mode"]`, form)) radio.addEventListener("change", () => showMode(kind));
}

// ---- choices from the API ------------------------------------------------------------------
function options(select, groups, selected) {
  select.replaceChildren(
    ...groups
      .filter((group) => group.items.length)
      .map((group) =>
        h(
          "optgroup",
          { label: group.label },
          group.items.map((item) => h("option", { value: item.value, selected: item.value === selected }, item.text)),
        ),
      ),
  );
}

function describeModel(spec) {
  const parts = [`${spec.num_layers} layers`, `hidden ${fmt.count(spec.hidden_size)}`, `${spec.num_attention_heads} heads`];
  if (spec.num_kv_heads) parts.push(`${spec.num_kv_heads} KV heads`);
  if (spec.moe) parts.push(`${spec.moe.num_experts} experts (top-${spec.moe.top_k})`);
  parts.push(`vocab ${fmt.count(spec.vocab_size)}`);
  return parts.join(" · ");
}

function describeCluster(spec) {
  return spec.groups
    .map((group) => {
      const gpu = typeof group.gpu === "string" ? group.gpu : group.gpu.name;
      const price = group.price_per_gpu_hour ? `, ${fmt.usd(group.price_per_gpu_hour)}/GPU·h` : "";
      return `${fmt.count(group.num_nodes * group.gpus_per_node)} × ${gpu} (${group.num_nodes} × ${group.gpus_per_node}, zone ${group.zone}${price})`;
    })
    .join(" + ");
}

function describeTraining(spec) {
  return `sequence ${fmt.count(spec.seq_length)} · batch ${fmt.count(spec.global_batch_size)} · ${spec.precision} · ${spec.optimizer}`;
}

async function hint(element, load, describe) {
  element.textContent = "";
  try {
    element.textContent = describe(await load());
  } catch (error) {
    element.textContent = `(${error.message})`;
  }
}

const modelSelect = $("#f-model-ref");
const clusterSelect = $("#f-cluster-ref");
const trainingSelect = $("#f-training-ref");

function modelHint() {
  const [kind, key] = modelSelect.value.split(/:(.*)/s);
  if (!key) return;
  const path = kind === "preset" ? `/v1/presets/model/${encodeURIComponent(key)}` : `/v1/models/${encodeURIComponent(key)}`;
  hint($("#model-ref-hint"), () => api.get(path).then((record) => record.spec), describeModel);
}

function clusterHint() {
  if (!clusterSelect.value) return;
  hint($("#cluster-ref-hint"), () => api.get(`/v1/clusters/${encodeURIComponent(clusterSelect.value)}`).then((r) => r.spec), describeCluster);
}

function trainingHint() {
  if (!trainingSelect.value) return;
  hint($("#training-ref-hint"), () => api.get(`/v1/presets/training/${encodeURIComponent(trainingSelect.value)}`).then((r) => r.spec), describeTraining);
}

modelSelect.addEventListener("change", modelHint);
clusterSelect.addEventListener("change", clusterHint);
trainingSelect.addEventListener("change", trainingHint);

async function loadChoices() {
  const [presets, models, clusters, gpus, calibrations] = await Promise.all([
    api.get("/v1/presets"),
    api.listAll("/v1/models?preset=false").catch(() => []),
    api.listAll("/v1/clusters?preset=false").catch(() => []),
    api.listAll("/v1/gpus"),
    api.listAll("/v1/calibrations").catch(() => []),
  ]);
  const wantedModel = query.get("preset") ? `preset:${query.get("preset")}` : query.get("model_id") ? `model:${query.get("model_id")}` : "preset:gpt-1.7b";
  options(
    modelSelect,
    [
      { label: "Presets", items: presets.model.map((name) => ({ value: `preset:${name}`, text: name })) },
      { label: "Stored models", items: models.map((m) => ({ value: `model:${m.id}`, text: m.name })) },
    ],
    wantedModel,
  );
  options(
    clusterSelect,
    [
      { label: "Presets", items: presets.cluster.map((name) => ({ value: name, text: name })) },
      { label: "Stored clusters", items: clusters.map((c) => ({ value: c.id, text: c.name })) },
    ],
    query.get("cluster") || "dgx-a100-1n",
  );
  options(
    trainingSelect,
    [{ label: "Presets", items: presets.training.map((name) => ({ value: name, text: name })) }],
    query.get("training") || "gpt3-2k",
  );
  const calibration = $("#f-calibration");
  calibration.replaceChildren(
    h("option", { value: "" }, "Uncalibrated model"),
    ...calibrations.map((c) =>
      h("option", { value: c.ref }, `${c.ref} · held-out error ${fmt.percent(c.held_out_mape_before)} → ${fmt.percent(c.held_out_mape_after)}`),
    ),
  );
  clusterEditor.setGpus(gpus);
  modelHint();
  clusterHint();
  trainingHint();
}

// ---- editors -----------------------------------------------------------------------------
$("#group-add").addEventListener("click", () => clusterEditor.addGroup({ zone: clusterEditor.groups.at(-1)?.zone || "default" }));
$("#link-add").addEventListener("click", () => clusterEditor.addLink());
$("#constraint-add").addEventListener("click", () => constraints.add());
$("#cluster-edit").addEventListener("click", async () => {
  try {
    const record = await api.get(`/v1/clusters/${encodeURIComponent(clusterSelect.value)}`);
    clusterEditor.load({ ...record.spec, name: `${record.spec.name}-custom` });
    setMode("cluster", "groups");
    $("#f-cluster-name").focus();
  } catch (error) {
    showErrors(form, summary, error, { title: "Could not load the cluster" });
  }
});

// ---- Hugging Face import -------------------------------------------------------------------
const hfConfig = $("#f-hf-config");
const hfName = $("#f-hf-name");
const hfResult = $("#hf-result");

async function importHf() {
  clearErrors(form, summary);
  let config;
  try {
    config = JSON.parse(hfConfig.value);
  } catch (error) {
    showErrors(form, summary, { details: [{ field: "hf_config", reason: `not valid JSON: ${error.message}` }] }, { title: "Cannot import the config" });
    return null;
  }
  const name = hfName.value.trim();
  const path = "/v1/models/import-hf" + (name ? `?name=${encodeURIComponent(name)}` : "");
  try {
    const record = await api.post(path, config);
    imported = { text: hfConfig.value, name, record };
    modelSelect.querySelector('optgroup[label="Stored models"]')?.append(h("option", { value: `model:${record.id}` }, record.name));
    hfResult.replaceChildren(h("span", { class: "note-ok" }, `Imported as “${record.name}”: ${describeModel(record.spec)}`));
    return record;
  } catch (error) {
    const details = (error.details || []).map((detail) => ({
      field: detail.field === "name" || error.status === 409 ? "hf_name" : "hf_config",
      reason: detail.field && detail.field !== "name" ? `${detail.field}: ${detail.reason}` : detail.reason,
    }));
    if (!details.length) details.push({ field: error.status === 409 ? "hf_name" : "hf_config", reason: error.message });
    showErrors(form, summary, { details }, { title: "Cannot import the config" });
    return null;
  }
}

$("#hf-import").addEventListener("click", importHf);

// ---- the request ---------------------------------------------------------------------------
const text = (field) => form.querySelector(`[data-field="${field}"]`).value.trim();
const checked = (field) => form.querySelector(`[data-field="${field}"]`).checked;
const number = (field) => {
  const value = text(field);
  return value === "" ? undefined : Number(value);
};

function collect(fields) {
  const spec = {};
  for (const [key, field] of Object.entries(fields)) {
    const value = typeof field === "function" ? field() : number(field);
    if (value !== undefined && value !== "") spec[key] = value;
  }
  return spec;
}

function modelFields() {
  const model = collect({
    name: () => text("model.name") || "custom",
    num_layers: "model.num_layers",
    hidden_size: "model.hidden_size",
    num_attention_heads: "model.num_attention_heads",
    num_kv_heads: "model.num_kv_heads",
    ffn_hidden_size: "model.ffn_hidden_size",
    vocab_size: "model.vocab_size",
    activation: () => text("model.activation"),
    tie_embeddings: () => checked("model.tie_embeddings"),
  });
  const moe = collect({
    num_experts: "model.moe.num_experts",
    top_k: "model.moe.top_k",
    expert_ffn_hidden_size: "model.moe.expert_ffn_hidden_size",
  });
  if (Object.keys(moe).length) model.moe = moe;
  return model;
}

function trainingFields() {
  return collect({
    seq_length: "training.seq_length",
    global_batch_size: "training.global_batch_size",
    precision: () => text("training.precision"),
    optimizer: () => text("training.optimizer"),
    train_tokens: "training.train_tokens",
    flash_attention: () => checked("training.flash_attention"),
    fused_cross_entropy: () => checked("training.fused_cross_entropy"),
    dropout: () => checked("training.dropout"),
  });
}

const list = (value, convert) => (value ? value.split(",").map((part) => convert(part.trim())).filter((part) => part !== "") : undefined);
const integerOrText = (part) => (/^\d+$/.test(part) ? Number(part) : part);

async function requestBody() {
  const body = {};
  const modelMode = mode("model");
  if (modelMode === "preset") {
    const [kind, key] = modelSelect.value.split(/:(.*)/s);
    body[kind === "preset" ? "preset" : "model_id"] = key;
  } else if (modelMode === "hf") {
    const record = imported && imported.text === hfConfig.value ? imported.record : await importHf();
    if (!record) return null;
    body.model_id = record.id;
  } else {
    body.model = modelFields();
  }
  if (mode("cluster") === "preset") body.cluster_id = clusterSelect.value;
  else body.cluster = clusterEditor.spec();
  body.training = mode("training") === "preset" ? trainingSelect.value : trainingFields();
  body.objective = form.querySelector('input[name="objective"]:checked').value;
  body.sampler = text("sampler");
  body.constraints = constraints.value();
  Object.assign(
    body,
    collect({
      max_memory_fraction: "max_memory_fraction",
      global_batch_sizes: () => list(text("global_batch_sizes"), integerOrText),
      groups: () => list(text("groups"), (part) => part),
      warm_start: () => checked("warm_start"),
      trials: "trials",
      timeout_s: "timeout_s",
      seed: "seed",
      top_k: "top_k",
      calibration: () => text("calibration") || undefined,
      name: () => text("name") || undefined,
      priority: "priority",
    }),
  );
  return body;
}

form.addEventListener("submit", async (event) => {
  event.preventDefault();
  clearErrors(form, summary);
  for (const button of submitButtons) button.disabled = true;
  submitStatus.textContent = "Starting…";
  try {
    const body = await requestBody();
    if (!body) return;
    const search = await api.post("/v1/searches", body);
    submitStatus.textContent = "Queued; opening…";
    location.assign(api.url(`/searches/${search.id}`));
  } catch (error) {
    showErrors(form, summary, error);
  } finally {
    for (const button of submitButtons) button.disabled = false;
    if (submitStatus.textContent === "Starting…") submitStatus.textContent = "";
  }
});

loadChoices().catch((error) => showErrors(form, summary, error, { title: "Could not load the form's choices" }));
