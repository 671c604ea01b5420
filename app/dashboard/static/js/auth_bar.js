// The top bar's API-key control: shown once the server asks for a key (a 401) or a key is set.
// The key lives in this tab's sessionStorage (api.js) and goes with every API call.

import * as api from "./api.js";
import { h } from "./dom.js";

function maskedKey(key) {
  return `${key.slice(0, 11)}…`;
}

function signedIn(slot, key) {
  slot.replaceChildren(
    h("span", { class: "auth-key", title: "API key of this tab" }, maskedKey(key)),
    h("button", { type: "button", class: "auth-button", onclick: () => api.setApiKey(null) }, "Forget key"),
  );
}

function askForKey(slot) {
  const input = h("input", {
    type: "password",
    id: "api-key-input",
    name: "api-key",
    autocomplete: "off",
    placeholder: "ap_…",
    "aria-label": "API key",
  });
  const form = h(
    "form",
    {
      class: "auth-form",
      onsubmit: (event) => {
        event.preventDefault();
        const key = input.value.trim();
        if (key) {
          api.setApiKey(key);
          window.location.reload();
        }
      },
    },
    h("label", { for: "api-key-input" }, "This server needs an API key"),
    input,
    h("button", { type: "submit", class: "auth-button" }, "Use key"),
  );
  slot.replaceChildren(form);
  slot.hidden = false;
}

function render(slot) {
  const key = api.apiKey();
  if (key) {
    signedIn(slot, key);
    slot.hidden = false;
  } else {
    slot.replaceChildren();
    slot.hidden = true;
  }
}

const slot = document.getElementById("auth-slot");
if (slot) {
  render(slot);
  document.addEventListener("autopar:key-changed", () => render(slot));
  document.addEventListener("autopar:unauthorized", () => askForKey(slot));
}
