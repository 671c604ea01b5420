// The ranked plans of a search: sortable columns, and a selection of 2-4 plans to compare.

import * as api from "./api.js";
import { h } from "./dom.js";
import * as fmt from "./format.js";
import { feasibleBadge, layout, memoryBar, memoryUse, options } from "./plans.js";

const COLUMNS = [
  { key: "rank", label: "Rank", value: (p) => p.rank ?? Infinity, show: (p) => (p.rank ? `#${p.rank}` : "—") },
  { key: "layout", label: "Layout", sortable: false, show: (p) => [h("div", {}, layout(p.plan)), h("div", { class: "small muted" }, options(p.plan))] },
  { key: "gpus", label: "GPUs", num: true, value: (p) => p.estimate?.num_gpus, show: (p) => fmt.count(p.estimate?.num_gpus) },
  { key: "tokens", label: "Tokens/s", num: true, value: (p) => p.estimate?.tokens_per_s, show: (p) => fmt.short(p.estimate?.tokens_per_s), desc: true },
  { key: "mfu", label: "MFU", num: true, value: (p) => p.estimate?.mfu, show: (p) => fmt.percent(p.estimate?.mfu), desc: true },
  { key: "cost", label: "$ / M tokens", num: true, value: (p) => p.estimate?.usd_per_million_tokens, show: (p) => fmt.usd(p.estimate?.usd_per_million_tokens) },
  { key: "memory", label: "Peak memory / HBM", value: (p) => (p.estimate ? memoryUse(p.estimate).fraction : null), show: (p) => (p.estimate ? memoryBar(p.estimate) : "—") },
  { key: "step", label: "Step time", num: true, value: (p) => p.estimate?.step_time_s, show: (p) => fmt.seconds(p.estimate?.step_time_s) },
];

export function plansTable(plans) {
  const state = { key: "rank", dir: 1, selected: new Set() };
  const tbody = h("tbody");
  const headRow = h("tr");
  const compare = h("a", { class: "button primary", id: "compare-selected", href: "#", "aria-disabled": "true" }, "Compare selected");
  const hint = h("span", { class: "small muted", "aria-live": "polite" }, "Select 2 to 4 plans to compare them.");

  const updateCompare = () => {
    const ids = [...state.selected];
    const ok = ids.length >= 2 && ids.length <= 4;
    compare.setAttribute("aria-disabled", ok ? "false" : "true");
    compare.href = ok ? api.url(`/compare?plans=${ids.join(",")}`) : "#";
    compare.textContent = `Compare selected (${ids.length})`;
    hint.textContent = ids.length > 4 ? "At most 4 plans." : ok ? "" : "Select 2 to 4 plans to compare them.";
  };
  compare.addEventListener("click", (event) => {
    if (compare.getAttribute("aria-disabled") === "true") event.preventDefault();
  });

  const renderHead = () => {
    headRow.replaceChildren(
      h("th", { scope: "col" }, h("span", { class: "sr-only" }, "Select")),
      ...COLUMNS.map((column) => {
        const sorted = state.key === column.key;
        const th = h("th", { scope: "col", class: column.num ? "num" : "", "aria-sort": sorted ? (state.dir > 0 ? "ascending" : "descending") : null });
        if (column.sortable === false) th.append(column.label);
        else {
          th.append(
            h(
              "button",
              {
                class: "sort",
                type: "button",
                "data-sort": column.key,
                onclick: () => {
                  state.dir = state.key === column.key ? -state.dir : column.desc ? -1 : 1;
                  state.key = column.key;
                  render();
                },
              },
              column.label,
            ),
          );
        }
        return th;
      }),
    );
  };

  const renderBody = () => {
    const column = COLUMNS.find((c) => c.key === state.key);
    const sorted = [...plans].sort((a, b) => {
      const x = column.value(a) ?? Infinity;
      const y = column.value(b) ?? Infinity;
      return x === y ? (a.rank ?? 1e9) - (b.rank ?? 1e9) : (x < y ? -1 : 1) * state.dir;
    });
    tbody.replaceChildren(
      ...sorted.map((plan) => {
        const box = h("input", { type: "checkbox", "aria-label": `Select plan ${plan.rank ?? plan.id} to compare`, checked: state.selected.has(plan.id) });
        box.addEventListener("change", () => {
          if (box.checked) state.selected.add(plan.id);
          else state.selected.delete(plan.id);
          updateCompare();
        });
        const cells = COLUMNS.map((c) => h("td", { class: c.num ? "num" : "" }, c.show(plan)));
        cells[0].replaceChildren(h("a", { href: api.url(`/plans/${plan.id}`) }, c0(plan)));
        if (plan.estimate && !plan.estimate.feasible) cells[1].append(" ", feasibleBadge(plan.estimate));
        return h("tr", { "data-plan": plan.id }, h("td", {}, box), cells);
      }),
    );
  };

  const render = () => {
    renderHead();
    renderBody();
  };
  render();
  updateCompare();
  return h(
    "div",
    {},
    h("div", { class: "table-wrap" }, h("table", { id: "plans-table" }, h("thead", {}, headRow), tbody)),
    h("div", { style: "display:flex;gap:0.8rem;align-items:center;margin-top:0.7rem" }, compare, hint),
  );
}

function c0(plan) {
  return plan.rank ? `#${plan.rank}` : "open";
}
