// One calibration: error per source before and after, the parameters it moved, and predicted
// vs measured step time of the observed runs it was fitted to, before and after.

import * as api from "./api.js";
import { COLORS, SERIES, box, chart } from "./charts.js";
import { $, failure, fill, h, keyValues, link, loading, metricCard, page } from "./dom.js";
import * as fmt from "./format.js";

const { data } = page();
const body = document.getElementById("calibration-body");
const MAX_POINTS = 120;

function panel(id, title, note, ...content) {
  return h("section", { class: "panel", id, "aria-labelledby": `${id}-title` }, h("h2", { id: `${id}-title` }, title, note ? h("span", { class: "panel-note" }, note) : null), ...content);
}

function sourceErrors(target, result) {
  const sources = result.held_out.map((s) => s.source);
  const container = box();
  const inSample = Object.fromEntries(result.in_sample.map((s) => [s.source, s]));
  fill(
    target,
    container,
    h(
      "table",
      { class: "small", id: "source-errors" },
      h("thead", {}, h("tr", {}, ["Source", "Points", "Held-out before", "after", "In-sample before", "after"].map((t, i) => h("th", { class: i ? "num" : "" }, t)))),
      h(
        "tbody",
        {},
        result.held_out.map((s) =>
          h(
            "tr",
            {},
            h("td", {}, s.source, s.observed_runs ? h("span", { class: "muted" }, " (training runs)") : null),
            h("td", { class: "num" }, fmt.count(s.points)),
            h("td", { class: "num" }, fmt.percent(s.mape_before)),
            h("td", { class: "num" }, h("b", {}, fmt.percent(s.mape_after))),
            h("td", { class: "num" }, fmt.percent(inSample[s.source]?.mape_before)),
            h("td", { class: "num" }, fmt.percent(inSample[s.source]?.mape_after)),
          ),
        ),
      ),
    ),
  );
  chart(container, "source-errors", `Held-out error per source before and after calibration`, {
    type: "bar",
    data: {
      labels: sources,
      datasets: [
        { label: "before", data: result.held_out.map((s) => s.mape_before), backgroundColor: COLORS.before },
        { label: "after", data: result.held_out.map((s) => s.mape_after), backgroundColor: COLORS.after },
      ],
    },
    options: {
      scales: { y: { beginAtZero: true, title: { display: true, text: "held-out MAPE" }, ticks: { callback: (v) => fmt.percent(v, 0) } } },
      plugins: { tooltip: { callbacks: { label: (item) => `${item.dataset.label}: ${fmt.percent(item.parsed.y)}` } } },
    },
  });
}

function parameterTable(result) {
  const changes = [...result.changes].sort((a, b) => Number(b.moved) - Number(a.moved));
  return h(
    "div",
    {},
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { id: "parameters-table" },
        h("thead", {}, h("tr", {}, ["Parameter", "Before", "After", "Change"].map((t, i) => h("th", { class: i ? "num" : "" }, t)))),
        h(
          "tbody",
          {},
          changes.map((c) =>
            h(
              "tr",
              { class: c.moved ? "" : "muted" },
              h("td", {}, h(c.moved ? "b" : "span", {}, c.label), h("div", { class: "small muted mono" }, c.name)),
              h("td", { class: "num" }, fmt.sig(c.before, 4)),
              h("td", { class: `num ${c.moved ? "diff" : ""}` }, fmt.sig(c.after, 4)),
              h("td", { class: "num" }, c.before ? `${c.after >= c.before ? "+" : ""}${fmt.percent(c.after / c.before - 1)}` : fmt.DASH),
            ),
          ),
        ),
      ),
    ),
    result.not_identifiable.length ? h("p", { class: "small muted" }, `Not identifiable from this data: ${result.not_identifiable.join(", ")}.`) : null,
  );
}

/** Run `task` over `items`, `width` at a time. */
async function pool(items, width, task) {
  const results = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await task(items[index]).catch((error) => ({ error }));
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, worker));
  return results;
}

async function predictions(calibration) {
  const ids = (calibration.inputs.observation_ids || []).slice(0, MAX_POINTS);
  const base = calibration.inputs.base?.ref || null;
  return pool(ids, 4, async (id) => {
    const run = await api.get(`/v1/observations/${id}`);
    const scenario = { model: run.model, training: run.training, cluster: run.cluster, plan: run.plan };
    const [before, after] = await Promise.all([
      api.post("/v1/estimate", base ? { ...scenario, calibration: base } : scenario),
      api.post("/v1/estimate", { ...scenario, calibration: calibration.id }),
    ]);
    return { source: run.source || "observed", measured: run.step_time_s, before: before.step_time_s, after: after.step_time_s, name: run.name || id };
  });
}

async function scatter(target, calibration) {
  const count = (calibration.inputs.observation_ids || []).length;
  if (!count) {
    fill(target, h("p", { class: "muted" }, "This calibration was fitted to micro-benchmark profiles only: the API reports their error per source (above), not per point."));
    return;
  }
  fill(target, loading(`Pricing ${Math.min(count, MAX_POINTS)} observed runs before and after…`));
  const results = await predictions(calibration);
  const points = results.filter((r) => r && !r.error);
  const failed = results.length - points.length;
  if (!points.length) {
    fill(target, failure("Could not price the observed runs", results[0]?.error || new Error("no points")));
    return;
  }
  const sources = [...new Set(points.map((p) => p.source))];
  const values = points.flatMap((p) => [p.measured, p.before, p.after]);
  const low = Math.min(...values) * 0.8;
  const high = Math.max(...values) * 1.2;
  const logScale = high / low > 20;
  const datasets = sources.flatMap((source, i) => {
    const color = SERIES[i % SERIES.length];
    const mine = points.filter((p) => p.source === source);
    return [
      { label: `${source} · before`, data: mine.map((p) => ({ x: p.measured, y: p.before, name: p.name })), borderColor: color, backgroundColor: "rgba(255,255,255,0)", pointStyle: "circle", pointRadius: 5, borderWidth: 1.5 },
      { label: `${source} · after`, data: mine.map((p) => ({ x: p.measured, y: p.after, name: p.name })), borderColor: color, backgroundColor: color, pointStyle: "rectRot", pointRadius: 6 },
    ];
  });
  datasets.push({ label: "predicted = measured", data: [{ x: low, y: low }, { x: high, y: high }], showLine: true, borderColor: "#9aa3b2", borderDash: [5, 4], pointRadius: 0, borderWidth: 1 });
  const container = box("tall");
  fill(target, container, failed ? h("p", { class: "small muted" }, `${failed} run(s) could not be priced and are left out.`) : null);
  const axis = (title) => ({ type: logScale ? "logarithmic" : "linear", title: { display: true, text: title }, ticks: { callback: (v) => fmt.seconds(v) } });
  chart(container, "predicted-measured", `Predicted against measured step time of ${points.length} runs, before and after`, {
    type: "scatter",
    data: { datasets },
    options: {
      scales: { x: axis("measured step time"), y: axis("predicted step time") },
      plugins: {
        legend: { position: "bottom", labels: { usePointStyle: true } },
        tooltip: { callbacks: { label: (item) => `${item.raw.name ?? ""} ${item.dataset.label}: measured ${fmt.seconds(item.parsed.x)}, predicted ${fmt.seconds(item.parsed.y)}` } },
      },
    },
  });
}

async function render() {
  let calibration;
  try {
    calibration = await api.get(`/v1/calibrations/${encodeURIComponent(data.key)}`);
  } catch (error) {
    const what = error.status === 404 ? "No such calibration" : "Could not load the calibration";
    $("#calibration-title").textContent = what;
    fill(body, failure(what, error, link("/calibration", "All calibrations", { class: "button" })));
    return;
  }
  const result = calibration.result;
  $("#calibration-title").textContent = `Calibration ${calibration.ref}`;
  document.title = `${calibration.ref} · autopar`;
  $("#calibration-subtitle").textContent = `created ${fmt.dateTime(calibration.created_at)} · ${calibration.points} points · ${result.k_folds}-fold held out`;
  const errorsTarget = h("div");
  const scatterTarget = h("div", { id: "scatter" });
  const inputs = calibration.inputs;
  fill(
    body,
    h(
      "div",
      { class: "metrics" },
      metricCard("Held-out error", `${fmt.percent(calibration.held_out_mape_before)} → ${fmt.percent(calibration.held_out_mape_after)}`, "mean over sources"),
      metricCard("Points", fmt.count(calibration.points), `${result.held_out.length} sources`),
      metricCard("Moved", fmt.count(calibration.moved.length), `of ${result.fitted.length} fitted`),
      metricCard("Fit", result.converged ? "converged" : "not converged", `${result.iterations} iterations`),
    ),
    result.warnings.map((w) => h("div", { class: "alert alert-warn" }, w)),
    h(
      "div",
      { class: "grid grid-2" },
      panel("errors", "Error per source", "mean absolute % error of each source's points", errorsTarget),
      panel("params", "Parameters", "moved ones first", parameterTable(result)),
    ),
    h("div", { style: "height:1rem" }),
    panel("predictions", "Predicted vs measured", "observed runs it was fitted to, priced by POST /v1/estimate without and with it", scatterTarget),
    panel(
      "inputs",
      "Inputs",
      null,
      keyValues([
        ["Profiles", (inputs.profile_ids || []).length ? inputs.profile_ids.join(", ") : "none"],
        ["Observations", `${(inputs.observation_ids || []).length} runs`],
        ["Sources", (inputs.observation_sources || []).join(", ") || "—"],
        ["Base", inputs.base ? link(`/calibrations/${inputs.base.id}`, inputs.base.ref) : "uncalibrated defaults"],
      ]),
    ),
  );
  sourceErrors(errorsTarget, result);
  scatter(scatterTarget, calibration);
}

fill(body, loading("Loading the calibration…"));
render();
