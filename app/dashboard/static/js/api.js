// The dashboard's only data source: the public /v1 REST API, as any client calls it.

export const ROOT = (document.body.dataset.root || "").replace(/\/$/, "");

/** An app-relative URL (the app may be served under a prefix). */
export function url(path) {
  return ROOT + path;
}

/** An API failure, in the service's error shape: {error: {code, message, details}}. */
export class ApiError extends Error {
  constructor(status, code, message, details = []) {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
  }
}

// The API key (bearer token) of this browser tab's user, when the server asks for one. Kept in
// sessionStorage: it ends with the tab and is never written into a URL or a page.
const KEY_STORAGE = "autopar.apiKey";

export function apiKey() {
  return sessionStorage.getItem(KEY_STORAGE);
}

export function setApiKey(key) {
  if (key) sessionStorage.setItem(KEY_STORAGE, key);
  else sessionStorage.removeItem(KEY_STORAGE);
  document.dispatchEvent(new CustomEvent("autopar:key-changed"));
}

/** Request headers that carry the key (for callers that fetch documents themselves). */
export function authHeaders() {
  const key = apiKey();
  return key ? { authorization: `Bearer ${key}` } : {};
}

async function request(method, path, body, { signal } = {}) {
  const headers = { accept: "application/json", ...authHeaders() };
  const init = { method, headers, signal };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(url(path), init);
  } catch (error) {
    if (error.name === "AbortError") throw error;
    throw new ApiError(0, "network", `The service did not answer (${error.message}).`);
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = response.ok ? text : null; // a text document (an export, a script) as it is
  }
  if (response.status === 401) {
    // The server wants a key (or refused this one): the top bar asks for it.
    document.dispatchEvent(new CustomEvent("autopar:unauthorized"));
  }
  if (!response.ok) {
    const info = data && data.error ? data.error : {};
    throw new ApiError(
      response.status,
      info.code || "http_error",
      info.message || `${response.status} ${response.statusText}`,
      info.details || [],
    );
  }
  return data;
}

export const get = (path, options) => request("GET", path, undefined, options);
export const post = (path, body, options) => request("POST", path, body ?? {}, options);

/** Every item of a paginated list (follows next_cursor; bounded). */
export async function listAll(path, { limit = 200, maxPages = 10 } = {}) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page += 1) {
    const sep = path.includes("?") ? "&" : "?";
    const query = `${sep}limit=${limit}` + (cursor ? `&cursor=${encodeURIComponent(cursor)}` : "");
    const data = await get(path + query);
    items.push(...data.items);
    cursor = data.next_cursor;
    if (!cursor) break;
  }
  return items;
}

/** GET that answers null on 404 instead of failing (probing optional endpoints). */
export async function probe(path) {
  try {
    return await get(path);
  } catch (error) {
    if (error instanceof ApiError && (error.status === 404 || error.status === 405)) return null;
    throw error;
  }
}
