// The only way the console talks to Tauros: the public REST API under /v1/, with the session
// token as a Bearer credential. Nothing here is private to the console.
//
// The session token lives in sessionStorage: it survives a reload of this tab and ends with
// the tab (or at sign-out, or at its expiry), and no other tab or later visit sees it. A token
// held only in memory would sign the approver out at every reload, and would be no safer
// against a script running in the page (which could call the API with it either way); the
// page's Content-Security-Policy is what keeps foreign scripts out.

const STORAGE_KEY = "tauros.session";

// Device tokens: the one each email signed in with here last, in localStorage, so they outlive
// the tab on purpose. A later sign-in from this browser sends it and is known as that human's
// device: wrong guesses at the email from elsewhere cannot stop it (docs/SECURITY.md, "Nobody
// can lock a human out"). A device token signs nobody in by itself; the password is still
// checked.
const DEVICES_KEY = "tauros.devices";
const DEVICES_KEPT = 20;

function readDevices() {
  try {
    const stored = JSON.parse(localStorage.getItem(DEVICES_KEY) || "{}");
    if (stored && typeof stored === "object" && !Array.isArray(stored)) return stored;
  } catch {
    // A damaged entry is no device token.
  }
  return {};
}

/** The device token this browser holds for `email`, or null. */
export function deviceToken(email) {
  const token = readDevices()[email.trim().toLowerCase()];
  return typeof token === "string" ? token : null;
}

function rememberDevice(email, token) {
  const key = email.trim().toLowerCase();
  const devices = readDevices();
  delete devices[key];
  devices[key] = token;
  const emails = Object.keys(devices);
  for (const old of emails.slice(0, Math.max(0, emails.length - DEVICES_KEPT))) delete devices[old];
  localStorage.setItem(DEVICES_KEY, JSON.stringify(devices));
}

let session = readSession();
const listeners = new Set();

function readSession() {
  try {
    const stored = JSON.parse(sessionStorage.getItem(STORAGE_KEY) || "null");
    if (stored && typeof stored.token === "string") return stored;
  } catch {
    // A damaged entry is no session.
  }
  return null;
}

/** {token, expires_at, user} or null. */
export function currentSession() {
  return session;
}

export function startSession(answer) {
  if (typeof answer.device_token === "string") rememberDevice(answer.user.email, answer.device_token);
  session = { token: answer.token, expires_at: answer.expires_at, user: answer.user };
  sessionStorage.setItem(STORAGE_KEY, JSON.stringify(session));
  clearDirectory();
}

/** Forgets the session here; `reason` ("signed_out", "expired") tells the sign-in page what
 * to say. */
export function endSession(reason) {
  const had = session !== null;
  session = null;
  sessionStorage.removeItem(STORAGE_KEY);
  clearDirectory();
  if (had) for (const listener of listeners) listener(reason);
}

export function onSessionEnd(listener) {
  listeners.add(listener);
}

/** A refusal from the API: its status and its problem details (code, detail, errors…). */
export class ApiError extends Error {
  constructor(status, problem, retryAfter) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
    this.code = problem.code || "";
    this.retryAfter = retryAfter;
  }

  /** The first error of a field, or null. */
  fieldError(name) {
    const hit = (this.problem.errors || []).find((e) => e.field === name);
    return hit ? hit.detail || hit.code : null;
  }
}

/** One request. Answers parsed JSON (null for 204). Throws ApiError otherwise; a 401 on a
 * signed-in request ends the session (expired, signed out elsewhere, or deactivated).
 * `options.idempotencyKey` is sent as `Idempotency-Key` (a keyed command: the same key and
 * body again is answered without doing it twice). */
export async function api(method, path, body, options = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (options.idempotencyKey) headers["Idempotency-Key"] = options.idempotencyKey;
  const token = session?.token;
  if (token) headers.Authorization = `Bearer ${token}`;
  let response;
  try {
    response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      redirect: "error",
    });
  } catch {
    throw new ApiError(0, {
      code: "network",
      detail: "Tauros did not answer. Check the connection and try again.",
    });
  }
  if (response.status === 204) return null;
  const text = await response.text();
  let data = null;
  try {
    data = text ? JSON.parse(text) : null;
  } catch {
    data = null;
  }
  if (!response.ok) {
    const error = new ApiError(response.status, data || {}, response.headers.get("Retry-After"));
    if (response.status === 401 && token && session?.token === token) endSession("expired");
    throw error;
  }
  return data;
}

/** Every item of a list route, following `next_cursor` (at most `maxPages` pages of 100). */
export async function listAll(path, maxPages = 20) {
  const items = [];
  let cursor = null;
  for (let page = 0; page < maxPages; page++) {
    const sep = path.includes("?") ? "&" : "?";
    const url = `${path}${sep}limit=100${cursor ? `&cursor=${encodeURIComponent(cursor)}` : ""}`;
    const answer = await api("GET", url);
    items.push(...answer.items);
    cursor = answer.next_cursor;
    if (!cursor) break;
  }
  return items;
}

// Names for ids. Invoices carry ids only (agent, customer, destination); the console looks the
// names up in the lists a human may read, once, and keeps them for a short while. Records a
// human cannot read (another owner's agent, seen through shared review) stay ids.
let directory = null;
let directoryAt = 0;
const DIRECTORY_TTL_MS = 30000;

function clearDirectory() {
  directory = null;
  directoryAt = 0;
}

export function forgetDirectory() {
  clearDirectory();
}

async function optional(promise) {
  try {
    return await promise;
  } catch (e) {
    if (e instanceof ApiError && (e.status === 403 || e.status === 404)) return [];
    throw e;
  }
}

/** {agents, customers, destinations, users}: Maps by id. */
export async function loadDirectory() {
  if (directory && Date.now() - directoryAt < DIRECTORY_TTL_MS) return directory;
  const [agents, customers, destinations, users] = await Promise.all([
    optional(listAll("/v1/agents")),
    optional(listAll("/v1/customers")),
    optional(listAll("/v1/payment-destinations")),
    // Approvers only; operators see emails of nobody but themselves.
    optional(listAll("/v1/users")),
  ]);
  const byId = (items) => new Map(items.map((item) => [item.id, item]));
  directory = {
    agents: byId(agents),
    customers: byId(customers),
    destinations: byId(destinations),
    users: byId(users),
  };
  directoryAt = Date.now();
  return directory;
}

/** One record by id, or null when it is not visible (404). */
export async function getOrNull(path) {
  try {
    return await api("GET", path);
  } catch (e) {
    if (e instanceof ApiError && (e.status === 404 || e.status === 403)) return null;
    throw e;
  }
}

/** A sentence for a refusal nobody planned for on the page. */
export function describe(error) {
  if (!(error instanceof ApiError)) return `Something went wrong in the page: ${error}`;
  if (error.status === 429) {
    return `Too many requests: try again in ${error.retryAfter || "a few"} seconds.`;
  }
  if (error.status === 503) return "Tauros is unavailable for a moment: try again.";
  const detail = error.problem.detail || error.message;
  return error.code ? `${detail} (${error.code})` : detail;
}
