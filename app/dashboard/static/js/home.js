// Home: recent searches with status, progress and their best plan's throughput and cost.

import * as api from "./api.js";
import { badge, empty, failure, fill, h, link, loading, progressBar } from "./dom.js";
import * as fmt from "./format.js";
import { FINISHED, searchProgress, searchTitle } from "./plans.js";

const list = document.getElementById("searches");
const note = document.getElementById("searches-note");
const bestPlans = new Map(); // plan id -> plan record (its estimate prices the best)
const REFRESH_MS = 2000;

async function bestPlan(search) {
  const id = search.progress?.best?.plan_id;
  if (!id) return null;
  if (!bestPlans.has(id)) bestPlans.set(id, api.get(`/v1/plans/${id}`).catch(() => null));
  return bestPlans.get(id);
}

function row(search, plan) {
  const progress = searchProgress(search);
  const running = !FINISHED.includes(search.status);
  const estimate = plan?.estimate;
  const best = search.progress?.best;
  const throughput = estimate ? estimate.tokens_per_s : best?.metric === "tokens_per_s" ? best.value : null;
  return h(
    "tr",
    { "data-search": search.id },
    h("td", {}, link(`/searches/${search.id}`, searchTitle(search)), h("div", { class: "small muted" }, `${search.objective} · ${search.sampler}`)),
    h("td", {}, badge(search.status)),
    h(
      "td",
      {},
      h(
        "div",
        { class: "membar" },
        progressBar(progress.fraction ?? 0, { label: "Progress", indeterminate: running && progress.fraction === null }),
        h("span", { class: "small nowrap" }, progress.label),
      ),
    ),
    h("td", { class: "num" }, fmt.tokensPerS(throughput)),
    h("td", { class: "num" }, estimate ? fmt.usd(estimate.usd_per_million_tokens) : fmt.DASH),
    h("td", { class: "nowrap small", title: fmt.dateTime(search.created_at) }, fmt.ago(search.created_at)),
  );
}

function table(rows) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id: "searches-table" },
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          h("th", { scope: "col" }, "Search"),
          h("th", { scope: "col" }, "Status"),
          h("th", { scope: "col" }, "Progress"),
          h("th", { scope: "col", class: "num" }, "Best tokens/s"),
          h("th", { scope: "col", class: "num" }, "$ / M tokens"),
          h("th", { scope: "col" }, "Created"),
        ),
      ),
      h("tbody", {}, rows),
    ),
  );
}

async function refresh(first) {
  let page;
  try {
    page = await api.get("/v1/searches?limit=25");
  } catch (error) {
    if (first) fill(list, failure("Could not load the searches", error, h("button", { onclick: () => refresh(true) }, "Retry")));
    else note.textContent = `(refresh failed: ${error.message})`;
    return;
  }
  const searches = page.items;
  if (!searches.length) {
    fill(
      list,
      empty(
        "No searches yet",
        h("p", {}, "A search tries the parallel layouts of a model on a cluster and ranks them."),
        h("p", {}, link("/searches/new", "Start a search", { class: "button primary" })),
      ),
    );
    return;
  }
  const plans = await Promise.all(searches.map(bestPlan));
  fill(list, table(searches.map((search, index) => row(search, plans[index]))));
  const active = searches.filter((search) => !FINISHED.includes(search.status)).length;
  note.textContent = active ? `${active} in progress · updating` : `${searches.length} shown`;
  if (active) setTimeout(() => refresh(false), REFRESH_MS);
}

async function presets() {
  const box = document.getElementById("presets");
  fill(box, loading());
  try {
    const data = await api.get("/v1/presets");
    const group = (title, names, param) =>
      h(
        "div",
        {},
        h("h3", {}, title),
        h("div", { class: "chips" }, names.map((name) => link(`/searches/new?${param}=${encodeURIComponent(name)}`, name, { class: "chip" }))),
      );
    fill(box, group("Models", data.model, "preset"), group("Clusters", data.cluster, "cluster"), group("Trainings", data.training, "training"));
  } catch (error) {
    fill(box, failure("Could not load the presets", error));
  }
}

fill(list, loading("Loading searches…"));
refresh(true);
presets();
