// Calibration: stored calibrations, machine profiles and observed runs.

import * as api from "./api.js";
import { empty, failure, fill, h, link, loading } from "./dom.js";
import * as fmt from "./format.js";

function simpleTable(id, columns, rows) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      { id },
      h("thead", {}, h("tr", {}, columns.map(([label, num]) => h("th", { scope: "col", class: num ? "num" : "" }, label)))),
      h("tbody", {}, rows.map((cells) => h("tr", {}, cells.map((cell, i) => h("td", { class: columns[i][1] ? "num" : "" }, cell))))),
    ),
  );
}

async function section(id, path, render, emptyState) {
  const target = document.getElementById(id);
  fill(target, loading());
  try {
    const items = await api.listAll(path);
    fill(target, items.length ? render(items) : emptyState());
  } catch (error) {
    fill(target, failure("Could not load this list", error));
  }
}

section(
  "calibrations",
  "/v1/calibrations",
  (items) =>
    simpleTable(
      "calibrations-table",
      [["Calibration"], ["Created"], ["Points", true], ["Held-out error before", true], ["after", true], ["Parameters moved"]],
      items.map((c) => [
        link(`/calibrations/${c.id}`, c.ref),
        h("span", { title: fmt.dateTime(c.created_at) }, fmt.ago(c.created_at)),
        fmt.count(c.points),
        fmt.percent(c.held_out_mape_before),
        h("b", {}, fmt.percent(c.held_out_mape_after)),
        c.moved.length ? c.moved.join(", ") : h("span", { class: "muted" }, "none"),
      ]),
    ),
  () =>
    empty(
      "No calibrations yet",
      h("p", {}, "Fit the cost model to your own measurements: store profiles and observed runs, then"),
      h("pre", { style: "text-align:left" }, `curl -s localhost:8000/v1/calibrations -H 'content-type: application/json' \\\n  -d '{"name": "mycluster", "profile_ids": ["P"], "observation_sources": ["prod"]}'`),
    ),
);

section(
  "profiles",
  "/v1/profiles",
  (items) =>
    simpleTable(
      "profiles-table",
      [["Name"], ["Kind"], ["Device"], ["Priced as"], ["Samples", true], ["Created"]],
      items.map((p) => [
        p.name,
        p.kind,
        p.device,
        p.gpu,
        h("span", { title: `GEMM ${p.samples.gemm}, memory ${p.samples.memory}, attention ${p.samples.attention}, collectives ${p.samples.collectives}` }, fmt.count(p.samples.gemm + p.samples.memory + p.samples.attention + p.samples.collectives)),
        h("span", { title: fmt.dateTime(p.created_at) }, fmt.ago(p.created_at)),
      ]),
    ),
  () => empty("No profiles", h("p", {}, "Measure a machine with ", h("code", {}, "autopar profile --out profile.json"), " and POST it to /v1/profiles.")),
);

section(
  "observations",
  "/v1/observations",
  (items) =>
    simpleTable(
      "observations-table",
      [["Run"], ["Source"], ["Measured step", true], ["Predicted", true], ["Error", true]],
      items.map((o) => [
        o.plan_id ? link(`/plans/${o.plan_id}`, o.name || "planned run") : o.name || h("span", { class: "muted" }, o.id.slice(-8)),
        o.source || fmt.DASH,
        fmt.seconds(o.step_time_s),
        fmt.seconds(o.predicted_step_time_s),
        o.prediction_error === null ? fmt.DASH : `${o.prediction_error > 0 ? "+" : ""}${fmt.percent(o.prediction_error)}`,
      ]),
    ),
  () => empty("No observed runs", h("p", {}, "Report how a plan really ran: POST /v1/plans/{id}/observations with its step time.")),
);
