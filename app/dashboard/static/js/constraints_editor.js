// Search constraints as rows of (dimension, value): "8", "2..8", "..4", "1,2,4", "selective,full".

import { h } from "./dom.js";

export const DIMENSIONS = [
  "dp", "tp", "pp", "cp", "ep", "vpp", "micro_batch_size", "zero_stage", "num_gpus",
  "recompute", "sequence_parallel", "offload_optimizer",
];

function scalar(text) {
  const trimmed = text.trim();
  if (/^-?\d+$/.test(trimmed)) return Number(trimmed);
  if (trimmed === "true" || trimmed === "false") return trimmed === "true";
  return trimmed; // the API says what is wrong with anything else
}

/** The text of a constraint cell as the API's Constraint: a value, a list or {min, max}. */
export function parseConstraint(text) {
  const range = text.trim().match(/^(-?\d*)\s*\.\.\s*(-?\d*)$/);
  if (range && (range[1] || range[2])) {
    const bounds = {};
    if (range[1]) bounds.min = Number(range[1]);
    if (range[2]) bounds.max = Number(range[2]);
    return bounds;
  }
  if (text.includes(",")) return text.split(",").filter((part) => part.trim()).map(scalar);
  return scalar(text);
}

export class ConstraintsEditor {
  constructor(table) {
    this.table = table;
    this.rows = [];
    this.render();
  }

  add(dim = "tp", value = "") {
    this.rows.push({ dim, value });
    this.render();
    this.table.querySelector("tbody tr:last-child input")?.focus();
  }

  /** {dim: Constraint} for the request (rows without a value left out). */
  value() {
    const constraints = {};
    for (const row of this.rows) if (row.value.trim()) constraints[row.dim] = parseConstraint(row.value);
    return constraints;
  }

  render() {
    if (!this.rows.length) {
      this.table.replaceChildren(h("caption", { class: "small muted", style: "text-align:left" }, "No constraints: every valid plan is a candidate."));
      return;
    }
    this.table.replaceChildren(
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Dimension"), h("th", { scope: "col" }, "Allowed"), h("th", {}))),
      h("tbody", {}, this.rows.map((row, index) => this.row(row, index))),
    );
  }

  row(row, index) {
    const select = h(
      "select",
      { "aria-label": `Constraint ${index + 1} dimension` },
      DIMENSIONS.map((dim) => h("option", { value: dim, selected: dim === row.dim }, dim)),
    );
    const input = h("input", {
      type: "text",
      value: row.value,
      placeholder: "e.g. 2..8",
      "aria-label": `Constraint ${index + 1} allowed values`,
      "data-field": `constraints.${row.dim}`,
    });
    select.addEventListener("change", () => {
      row.dim = select.value;
      input.dataset.field = `constraints.${row.dim}`;
    });
    input.addEventListener("input", () => {
      row.value = input.value;
    });
    const remove = h("button", { type: "button", class: "danger", "aria-label": `Remove constraint ${index + 1}` }, "Remove");
    remove.addEventListener("click", () => {
      this.rows.splice(index, 1);
      this.render();
    });
    return h("tr", {}, h("td", {}, select), h("td", {}, input), h("td", {}, remove));
  }
}
