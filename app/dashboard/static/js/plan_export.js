// The plan's "Export" area: shown only once the API serves GET /v1/plans/{id}/export.

import * as api from "./api.js";
import { h } from "./dom.js";

/** Links to each format the export lists, or the export itself when it is one document. */
function content(planId, answer) {
  const formats = Array.isArray(answer) ? answer : answer?.formats || answer?.items || null;
  if (Array.isArray(formats) && formats.length) {
    return h(
      "ul",
      {},
      formats.map((format) => {
        const name = typeof format === "string" ? format : format.name || format.format || format.id;
        const href = typeof format === "object" && format.url ? format.url : api.url(`/v1/plans/${planId}/export?format=${encodeURIComponent(name)}`);
        const description = typeof format === "object" ? format.description || format.title || "" : "";
        return h("li", {}, h("a", { href }, name), description ? ` — ${description}` : "");
      }),
    );
  }
  const text = typeof answer === "string" ? answer : JSON.stringify(answer, null, 2);
  return h("pre", {}, text);
}

export async function renderExport(target, record) {
  let body;
  try {
    const answer = await api.probe(`/v1/plans/${record.id}/export`);
    if (answer === null) {
      target.hidden = true; // no export endpoint (yet)
      return;
    }
    body = content(record.id, answer);
  } catch (error) {
    // The endpoint exists but wants more than a bare GET: say what it asked for.
    body = h("p", { class: "alert alert-info" }, `GET /v1/plans/${record.id}/export: ${error.message}`);
  }
  target.replaceChildren(
    h("h2", { id: "export-title" }, "Export", h("span", { class: "panel-note" }, "launch this plan with a training framework")),
    body,
  );
  target.hidden = false;
}
