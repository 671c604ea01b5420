// Small DOM helpers: build elements, show loading / empty / error states.

import { ApiError, url } from "./api.js";

/**
 * h("a", {href: "/x", class: "button"}, "text", child) -> element.
 * Attributes: class, text, dataset (object), on<event> handlers, boolean attributes (true sets
 * the attribute, false / null / undefined leave it out); strings among children become text.
 */
export function h(tag, attrs = {}, ...children) {
  const element = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") element.className = value;
    else if (key === "text") element.textContent = value;
    else if (key === "dataset") Object.assign(element.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") {
      element.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (value === true) element.setAttribute(key, "");
    else element.setAttribute(key, String(value));
  }
  append(element, children);
  return element;
}

export function append(element, children) {
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** Replace an element's content. */
export function fill(element, ...children) {
  element.replaceChildren();
  return append(element, children);
}

export const $ = (selector, root = document) => root.querySelector(selector);
export const $$ = (selector, root = document) => [...root.querySelectorAll(selector)];

/** An app link (the app may live under a prefix). */
export function link(path, text, attrs = {}) {
  return h("a", { href: url(path), ...attrs }, text);
}

export function loading(message = "Loading…") {
  return h("div", { class: "state state-loading", role: "status", "aria-live": "polite" }, message);
}

export function empty(title, ...detail) {
  return h("div", { class: "state state-empty" }, h("h2", { text: title }), ...detail);
}

/** An error box for a failed call: what failed, the API's message, what to do next. */
export function failure(what, error, ...actions) {
  const status = error instanceof ApiError && error.status ? ` (${error.status} ${error.code})` : "";
  return h(
    "div",
    { class: "state state-error", role: "alert" },
    h("h2", { text: what }),
    h("p", { class: "detail" }, (error && error.message) || String(error), h("span", { class: "muted" }, status)),
    actions.length ? h("p", {}, ...actions) : null,
  );
}

export function badge(text, kind = text) {
  return h("span", { class: `badge badge-${kind}` }, text);
}

export function progressBar(fraction, { label, indeterminate = false, className = "" } = {}) {
  const clamped = Math.max(0, Math.min(1, fraction || 0));
  const bar = h(
    "div",
    {
      class: `progress ${indeterminate ? "indeterminate" : ""} ${className}`,
      role: "progressbar",
      "aria-label": label,
      "aria-valuemin": indeterminate ? null : "0",
      "aria-valuemax": indeterminate ? null : "100",
      "aria-valuenow": indeterminate ? null : String(Math.round(clamped * 100)),
    },
    h("span"),
  );
  if (!indeterminate) bar.firstChild.style.width = `${clamped * 100}%`;
  return bar;
}

export function metricCard(label, value, sub) {
  return h(
    "div",
    { class: "metric" },
    h("div", { class: "label" }, label),
    h("div", { class: "value" }, value),
    sub ? h("div", { class: "sub" }, sub) : null,
  );
}

/** A <dl> of [label, value] pairs. */
export function keyValues(pairs) {
  return h(
    "dl",
    { class: "kv" },
    pairs.filter(Boolean).map(([key, value]) => [h("dt", {}, key), h("dd", {}, value)]),
  );
}

/** The page's <main> and the data-* values the server rendered into it. */
export function page() {
  const main = document.getElementById("main");
  return { main, data: main.dataset };
}
