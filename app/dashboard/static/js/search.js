// Search detail: live progress, best so far, the ranked plans, the Pareto front, cancel.

import * as api from "./api.js";
import { COLORS, box, chart } from "./charts.js";
import { $, badge, failure, fill, h, keyValues, link, loading, metricCard, page, progressBar } from "./dom.js";
import * as fmt from "./format.js";
import { FINISHED, layout, options, searchProgress, searchTitle } from "./plans.js";
import { plansTable } from "./plans_table.js";

const { data } = page();
const searchId = data.searchId;
const body = document.getElementById("search-body");
const POLL_MS = 1000;
const historyKey = `autopar.best-history.${searchId}`;

const view = {}; // panels filled once, updated on each poll
let plansShown = false;

function history() {
  try {
    return JSON.parse(sessionStorage.getItem(historyKey) || "[]");
  } catch {
    return [];
  }
}

function record(search) {
  const best = search.progress?.best;
  if (!best) return history();
  const points = history();
  const last = points.at(-1);
  if (!last || last[0] !== search.progress.trials_done || last[1] !== best.value) {
    points.push([search.progress.trials_done, best.value]);
    sessionStorage.setItem(historyKey, JSON.stringify(points.slice(-2000)));
  }
  return points;
}

function layoutPage() {
  view.metrics = h("div", { class: "metrics", id: "search-metrics" });
  view.alerts = h("div", { id: "search-alerts" });
  view.progress = h("div");
  view.chart = box("short");
  view.chartNote = h("p", { class: "small muted" });
  view.setup = h("div");
  view.plans = h("div", { id: "plans" }, loading("Waiting for the ranking…"));
  view.pareto = h("section", { class: "panel", hidden: true, "aria-labelledby": "pareto-title" });
  fill(
    body,
    view.metrics,
    view.alerts,
    h(
      "div",
      { class: "grid grid-2" },
      h("section", { class: "panel", "aria-labelledby": "progress-title" }, h("h2", { id: "progress-title" }, "Progress"), view.progress, h("h3", {}, "Best so far"), view.chart, view.chartNote),
      h("section", { class: "panel", "aria-labelledby": "setup-title" }, h("h2", { id: "setup-title" }, "Setup"), view.setup),
    ),
    h("div", { style: "height:1rem" }),
    view.pareto,
    h("section", { class: "panel", "aria-labelledby": "plans-title" }, h("h2", { id: "plans-title" }, "Ranked plans"), view.plans),
  );
}

function renderHead(search) {
  $("#search-title").replaceChildren(searchTitle(search), " ", badge(search.status));
  document.title = `${searchTitle(search)} · autopar`;
  $("#search-subtitle").textContent = `${search.objective} · sampler ${search.outcome?.sampler || search.sampler} · created ${fmt.dateTime(search.created_at)}`;
  const actions = $("#search-actions");
  const cancellable = !FINISHED.includes(search.status);
  const existing = $("#cancel", actions);
  if (cancellable && !existing) {
    const button = h("button", { id: "cancel", class: "danger" }, search.cancel_requested ? "Cancelling…" : "Cancel search");
    button.disabled = search.cancel_requested;
    button.addEventListener("click", () => cancel(button));
    actions.replaceChildren(button, link(`/searches/new`, "New search", { class: "button" }));
  } else if (!cancellable) {
    actions.replaceChildren(link(`/searches/new`, "New search", { class: "button" }));
  }
}

async function cancel(button) {
  button.disabled = true;
  button.textContent = "Cancelling…";
  try {
    const search = await api.post(`/v1/searches/${searchId}/cancel`);
    update(search);
  } catch (error) {
    button.disabled = false;
    button.textContent = "Cancel search";
    view.alerts.replaceChildren(h("div", { class: "alert alert-error", role: "alert" }, `Could not cancel: ${error.message}`));
  }
}

function renderMetrics(search) {
  const p = search.progress || {};
  const progress = searchProgress(search);
  const best = p.best;
  fill(
    view.metrics,
    metricCard("Status", badge(search.status), search.worker ? `worker ${search.worker}` : search.attempts > 1 ? `${search.attempts} attempts` : null),
    metricCard("Trials", progress.label, search.outcome?.space_size ? `space: ${fmt.count(search.outcome.space_size)} plans` : null),
    metricCard("Plans priced", fmt.count(p.evaluated), p.feasible !== null && p.feasible !== undefined ? `${fmt.count(p.feasible)} fit in memory` : null),
    metricCard(`Best ${best ? fmt.METRIC_LABELS[best.metric] || best.metric : ""}`, best ? fmt.metric(best.metric, best.value) : fmt.DASH, best?.plan_id ? link(`/plans/${best.plan_id}`, "open the best plan") : null),
    metricCard("Elapsed", fmt.seconds(p.elapsed_s), !FINISHED.includes(search.status) && p.eta_s ? `about ${fmt.seconds(p.eta_s)} left` : null),
  );
}

function renderProgress(search) {
  const progress = searchProgress(search);
  const running = search.status === "running";
  fill(
    view.progress,
    progressBar(progress.fraction ?? 0, { label: "Search progress", indeterminate: running && progress.fraction === null }),
    h("p", { class: "small muted" }, search.status === "queued" ? "Queued: waiting for a worker." : progress.label),
  );
  const points = record(search);
  if (points.length >= 2 || !FINISHED.includes(search.status)) {
    bestChart(points, search.progress?.best?.metric, "What this page saw while the search ran.");
  } else if (!view.fromPlans) {
    bestChart(points, search.progress?.best?.metric, "");
  }
}

/** Best so far among the stored plans, by the trial that found each (searches seen finished). */
function bestFromPlans(search, plans) {
  if (history().length >= 2) return;
  const direction = search.outcome?.directions?.[0] || "maximize";
  const found = plans.filter((p) => p.trial_number !== null && p.objective_values?.length).sort((a, b) => a.trial_number - b.trial_number);
  if (search.outcome?.sampler === "exhaustive") {
    fill(view.chart, h("p", { class: "muted small" }, `The space was enumerated: all ${fmt.count(search.outcome.space_size)} plans priced at once, so there is no trial-by-trial history. Best: ${fmt.metric(search.progress?.best?.metric, search.progress?.best?.value)}.`));
    view.chart.style.height = "auto";
    view.chartNote.textContent = "";
    return;
  }
  if (found.length < 2) {
    view.chartNote.textContent = "Opened after the search finished: only the final best is known.";
    return;
  }
  const points = [];
  for (const plan of found) {
    const value = plan.objective_values[0];
    const best = points.at(-1)?.[1];
    if (best === undefined || (direction === "maximize" ? value > best : value < best)) points.push([plan.trial_number + 1, value]);
  }
  const last = search.progress?.trials_done;
  if (last && points.at(-1)[0] < last) points.push([last, points.at(-1)[1]]);
  view.fromPlans = true;
  bestChart(points, search.progress?.best?.metric, "Drawn from the kept plans and the trial that found each (this page did not watch the run).");
}

function bestChart(points, metricName, note) {
  view.chartNote.textContent = note;
  if (!points.length) {
    fill(view.chart, h("p", { class: "muted small" }, "No feasible plan yet."));
    view.chart.style.height = "auto";
    return;
  }
  view.chart.style.height = "";
  const label = fmt.METRIC_LABELS[metricName] || metricName || "best";
  const maximize = metricName === "tokens_per_s";
  chart(view.chart, "best-so-far", "Best objective value over trials", {
    type: "line",
    data: {
      datasets: [
        {
          label,
          data: points.map(([x, y]) => ({ x, y })),
          stepped: true,
          borderColor: COLORS.compute,
          backgroundColor: COLORS.compute,
          pointRadius: points.length > 40 ? 0 : 3,
        },
      ],
    },
    options: {
      scales: {
        x: { type: "linear", title: { display: true, text: "trials done" }, ticks: { callback: (v) => fmt.short(v) } },
        y: { title: { display: true, text: `${label} (${maximize ? "higher" : "lower"} is better)` }, ticks: { callback: (v) => fmt.short(v) } },
      },
      plugins: { legend: { display: false }, tooltip: { callbacks: { label: (item) => fmt.metric(metricName, item.parsed.y) } } },
    },
  });
}

function renderSetup(search) {
  const request = search.request || {};
  const constraints = Object.entries(request.constraints || {}).map(([dim, value]) => `${dim} = ${JSON.stringify(value)}`);
  const budget = [request.trials ? `${fmt.count(request.trials)} trials` : null, request.timeout_s ? `${fmt.seconds(request.timeout_s)} timeout` : null].filter(Boolean);
  const study = search.study_name;
  fill(
    view.setup,
    keyValues([
      ["Model", request.model ? `${request.model.name} (${request.model.num_layers} layers, hidden ${fmt.count(request.model.hidden_size)})` : fmt.DASH],
      ["Cluster", request.cluster ? `${request.cluster.name}: ${request.cluster.groups.map((g) => `${g.num_nodes * g.gpus_per_node} × ${typeof g.gpu === "string" ? g.gpu : g.gpu.name}`).join(" + ")}` : fmt.DASH],
      ["Training", request.training ? `sequence ${fmt.count(request.training.seq_length)}, batch ${fmt.count(request.training.global_batch_size)}, ${request.training.precision}` : fmt.DASH],
      ["Budget", search.outcome?.sampler === "exhaustive" ? "the whole space (enumerated)" : budget.join(", ") || "the whole space"],
      ["Constraints", constraints.join(", ") || "none"],
      ["Memory limit", fmt.percent(request.max_memory_fraction ?? 0.9, 0) + " of HBM"],
      ["Calibration", search.calibration_id ? link(`/calibrations/${search.calibration_id}`, "fitted parameters") : "uncalibrated"],
    ]),
    h("h3", {}, "Optuna study"),
    study
      ? h(
          "div",
          {},
          h("p", { class: "small" }, "Open the study in optuna-dashboard, on the database the service uses (AUTOPAR_DATABASE_URL):"),
          h("pre", { id: "optuna-command" }, `pip install optuna-dashboard\noptuna-dashboard "$AUTOPAR_DATABASE_URL"   # e.g. sqlite:///autopar.db\n# then pick study ${study}`),
          search.outcome && search.outcome.sampler === "exhaustive" ? h("p", { class: "small muted" }, "This run enumerated the space: the study holds no trials.") : null,
        )
      : h("p", { class: "small muted" }, "No Optuna study: the space was small enough to enumerate."),
  );
}

function renderAlerts(search) {
  const items = [];
  if (search.status === "failed") items.push(h("div", { class: "alert alert-error", role: "alert" }, h("b", {}, "The search failed: "), search.error || "no reason recorded"));
  if (search.status === "cancelled") items.push(h("div", { class: "alert alert-warn" }, "Cancelled. The plans found before that are kept below."));
  const outcome = search.outcome;
  if (outcome?.gain_over_single_type !== null && outcome?.gain_over_single_type !== undefined) {
    items.push(
      h(
        "div",
        { class: "alert alert-info" },
        `Mixing GPU types gains ${fmt.percent(outcome.gain_over_single_type)} over the best single-type plan`,
        outcome.single_type_best_plan_id ? [" (", link(`/plans/${outcome.single_type_best_plan_id}`, "that plan"), ")."] : ".",
      ),
    );
  }
  for (const note of outcome?.notes || []) items.push(h("div", { class: "alert alert-info" }, note));
  fill(view.alerts, items);
}

// The front's axes: raw tokens/s and $/M tokens, or (pareto_goodput) the tokens kept once
// failures, checkpoints and restarts are priced, and $ per million of those.
function paretoPoint(plan, effective) {
  const e = plan.estimate;
  const goodput = effective && e.goodput ? e.goodput.goodput : 1;
  return { x: effective ? e.effective_tokens_per_s : e.tokens_per_s, y: e.usd_per_million_tokens / goodput, id: plan.id, rank: plan.rank, plan: plan.plan };
}

function renderPareto(plans, effective = false) {
  const points = plans
    .filter((plan) => plan.estimate && plan.estimate.usd_per_million_tokens !== null)
    .map((plan) => paretoPoint(plan, effective));
  if (!points.length) {
    fill(view.pareto, h("h2", { id: "pareto-title" }, "Throughput vs cost"), h("p", { class: "muted" }, "The cluster has no prices: no cost to plot."));
    view.pareto.hidden = false;
    return;
  }
  const front = [...points].sort((a, b) => a.x - b.x);
  const container = box("tall");
  fill(
    view.pareto,
    h("h2", { id: "pareto-title" }, "Throughput vs cost", h("span", { class: "panel-note" }, "the Pareto front: no plan is both faster and cheaper; click a point to open it")),
    container,
  );
  view.pareto.hidden = false;
  chart(container, "pareto", `Pareto front of ${points.length} plans: tokens per second against dollars per million tokens`, {
    type: "scatter",
    data: {
      datasets: [
        { label: "Plans on the front", data: points, backgroundColor: COLORS.compute, pointRadius: 6, pointHoverRadius: 8 },
        { label: "front", data: front, showLine: true, borderColor: "rgba(47,111,222,0.35)", pointRadius: 0, fill: false },
      ],
    },
    options: {
      onClick: (_event, elements) => {
        const hit = elements.find((element) => element.datasetIndex === 0);
        if (hit) location.assign(api.url(`/plans/${points[hit.index].id}`));
      },
      scales: {
        x: { title: { display: true, text: `${effective ? "effective " : ""}tokens/s (higher is better)` }, ticks: { callback: (v) => fmt.short(v) } },
        y: { title: { display: true, text: "$ per million tokens (lower is better)" }, ticks: { callback: (v, _i, ticks) => fmt.axisTick(v, ticks, "$") } },
      },
      plugins: {
        legend: { display: false },
        tooltip: {
          filter: (item) => item.datasetIndex === 0,
          callbacks: {
            label: (item) => {
              const point = points[item.dataIndex];
              return `#${point.rank} ${layout(point.plan)} · ${options(point.plan)}: ${fmt.tokensPerS(point.x)}, ${fmt.usd(point.y)}/M tokens`;
            },
          },
        },
      },
    },
  });
}

async function loadPlans(search) {
  plansShown = true;
  try {
    const result = await api.get(`/v1/searches/${searchId}/plans`);
    if (!result.items.length) {
      fill(view.plans, h("div", { class: "state state-empty" }, h("h2", {}, "No plans"), h("p", {}, search.status === "failed" ? "The search failed before it ranked any plan." : "No plan fits this cluster under these constraints.")));
      return;
    }
    fill(view.plans, plansTable(result.items));
    bestFromPlans(search, result.items);
    if (search.objective === "pareto" || search.objective === "pareto_goodput") renderPareto(result.items, search.objective === "pareto_goodput");
  } catch (error) {
    plansShown = false;
    fill(view.plans, failure("Could not load the plans", error, h("button", { onclick: () => loadPlans(search) }, "Retry")));
  }
}

function update(search) {
  renderHead(search);
  renderMetrics(search);
  renderProgress(search);
  renderAlerts(search);
  if (view.setupFor !== search.status) {
    renderSetup(search); // again once finished: the outcome names the sampler that ran
    view.setupFor = search.status;
  }
  const finished = FINISHED.includes(search.status);
  if (finished && !plansShown) loadPlans(search);
  if (!finished) {
    fill(view.plans, loading(search.status === "queued" ? "Queued: the ranking appears when the search finishes." : "Searching: the ranking appears when the search finishes."));
  }
  return finished;
}

async function poll(first = false) {
  let search;
  try {
    search = await api.get(`/v1/searches/${searchId}`);
  } catch (error) {
    if (first) {
      const what = error.status === 404 ? "No such search" : "Could not load the search";
      fill(body, failure(what, error, link("/", "Back to searches", { class: "button" })));
      $("#search-title").textContent = what;
      return;
    }
    setTimeout(poll, POLL_MS * 3);
    return;
  }
  if (first) layoutPage();
  if (!update(search)) setTimeout(poll, POLL_MS);
}

fill(body, loading("Loading the search…"));
poll(true);
