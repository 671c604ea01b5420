// API validation errors ({field, reason} details) shown next to the form fields they name.

import { $$, h } from "./dom.js";

const visible = (element) => !element.closest("[hidden]") && element.getClientRects().length > 0;
const tokens = (value) => (value || "").split(/\s+/).filter(Boolean);

/** "cluster.groups[0].gpu" -> "cluster.groups[0]" -> "cluster.groups" -> "cluster" -> "". */
function parentPath(path) {
  const match = path.match(/^(.*)(\.[^.[\]]+|\[\d+\])$/);
  return match ? match[1] : "";
}

/** The visible control a field path names, else the section that owns it. */
export function findTarget(form, field) {
  let path = field || "";
  while (path) {
    const control = $$("[data-field]", form).find((el) => tokens(el.dataset.field).includes(path) && visible(el));
    if (control) return control;
    const group = $$("[data-field-group]", form).find((el) => tokens(el.dataset.fieldGroup).includes(path));
    if (group) return group;
    path = parentPath(path);
  }
  return null;
}

/** Messages like "constraints.tp: expected integers" name a deeper field than their detail. */
function refine(detail) {
  const match = (detail.reason || "").match(/^([A-Za-z_][\w.[\]]*): (.+)$/);
  if (match && (!detail.field || match[1].startsWith(detail.field))) {
    return { field: match[1], reason: match[2] };
  }
  return { field: detail.field, reason: detail.reason };
}

export function clearErrors(form, summary) {
  for (const element of $$(".field-error", form)) element.remove();
  for (const element of $$("[aria-invalid]", form)) {
    element.removeAttribute("aria-invalid");
    element.removeAttribute("aria-describedby");
  }
  if (summary) {
    summary.hidden = true;
    summary.replaceChildren();
  }
}

let counter = 0;

function place(target, message) {
  const id = `field-error-${(counter += 1)}`;
  const note = h("p", { class: "field-error", id }, message);
  if (target.matches("fieldset")) {
    target.querySelector("legend").after(note);
    return note;
  }
  const holder = target.closest(".field, td, .choice-cards, .check") || target;
  if (holder.matches(".check, .choice-cards")) holder.after(note);
  else holder.append(note);
  if (target.matches("input, select, textarea")) {
    target.setAttribute("aria-invalid", "true");
    target.setAttribute("aria-describedby", id);
  }
  return note;
}

/** Show each detail beside its field and all of them in `summary`; focus the first field. */
export function showErrors(form, summary, error, { title = "The search was not started" } = {}) {
  clearErrors(form, summary);
  const details = error.details && error.details.length ? error.details : [{ field: null, reason: error.message }];
  const items = [];
  let first = null;
  for (const detail of details.map(refine)) {
    const target = findTarget(form, detail.field);
    if (target) {
      place(target, detail.field ? `${detail.reason}` : detail.reason);
      first = first || target;
    }
    const text = detail.field ? `${detail.field}: ${detail.reason}` : detail.reason;
    items.push(
      h(
        "li",
        {},
        target && target.focus
          ? h("button", { type: "button", class: "link", onclick: () => focusTarget(target) }, text)
          : text,
      ),
    );
  }
  summary.replaceChildren(h("h2", {}, title), h("ul", {}, items));
  summary.hidden = false;
  if (first) focusTarget(first);
  else summary.focus();
}

function focusTarget(target) {
  const control = target.matches("fieldset") ? target.querySelector("input, select, textarea") : target;
  control?.scrollIntoView({ block: "center" });
  control?.focus({ preventScroll: true });
}
