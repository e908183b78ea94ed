// The console's shell: the hash router, the navigation bar, and what happens when the session
// ends. Each view is a module with `render(main, context)` that may return a cleanup function
// (the review page stops watching its invoice there).

import { api, currentSession, endSession, onSessionEnd, describe } from "./api.js";
import { h, replace, notice } from "./dom.js";
import * as signin from "./signin.js";
import * as inbox from "./inbox.js";
import * as review from "./review.js";
import * as settings from "./settings.js";
import * as agents from "./agents.js";
import * as customers from "./customers.js";
import * as payments from "./payments.js";
import * as jobs from "./jobs.js";
import * as webhooks from "./webhooks.js";

const main = document.getElementById("main");
const top = document.getElementById("top");
let cleanup = null;
let me = null;
// Each route change takes a ticket; a view that finishes loading after the reader moved on is
// dropped, never drawn over the newer page.
let ticket = 0;
// Why the last session ended, for the sign-in page to say.
let endedBecause = null;

const ROUTES = [
  { pattern: /^\/inbox$/, view: inbox, nav: "inbox" },
  { pattern: /^\/invoices\/([0-9a-fA-F-]{36})$/, view: review, nav: "inbox" },
  { pattern: /^\/organisation$/, view: settings, nav: "organisation" },
  { pattern: /^\/agents$/, view: agents, nav: "agents" },
  { pattern: /^\/customers$/, view: customers, nav: "customers" },
  { pattern: /^\/payments(?:\/([0-9a-fA-F-]{36}))?$/, view: payments, nav: "payments" },
  // The queue and the endpoints are the approvers' (the API answers operators 403 there): an
  // operator who opens one by its address is told so instead of the page.
  { pattern: /^\/jobs(?:\/([0-9a-fA-F-]{36}))?$/, view: jobs, nav: "jobs", approvers: ["Jobs", "Only approvers see the job queue."] },
  {
    pattern: /^\/webhooks(?:\/([0-9a-fA-F-]{36}))?$/,
    view: webhooks,
    nav: "webhooks",
    approvers: ["Webhook endpoints", "Only approvers manage webhook endpoints."],
  },
];

/** "#/invoices/ID?x=y" → {path: "/invoices/ID", params}. */
function parseHash() {
  const raw = location.hash.startsWith("#/") ? location.hash.slice(1) : "/inbox";
  const [path, query] = raw.split("?");
  return { path, params: new URLSearchParams(query || "") };
}

export function navigate(hash) {
  if (location.hash === hash) route();
  else location.hash = hash;
}

async function route() {
  const mine = ++ticket;
  if (cleanup) {
    try {
      cleanup();
    } catch {
      // A view's cleanup must not stop the next view.
    }
    cleanup = null;
  }
  const session = currentSession();
  if (!session) {
    me = null;
    top.hidden = true;
    replace(top);
    const message = endedBecause;
    endedBecause = null;
    signin.render(main, { message, onSignedIn: () => route() });
    document.title = "Sign in · Tauros console";
    return;
  }
  if (!me) {
    try {
      me = await api("GET", "/v1/me");
    } catch (e) {
      if (!currentSession() || mine !== ticket) return; // the 401 already sent us to sign-in
      replace(main, notice("error", describe(e)));
      return;
    }
    if (mine !== ticket) return;
  }
  const { path, params } = parseHash();
  const match = ROUTES.map((r) => ({ r, m: r.pattern.exec(path) })).find((x) => x.m);
  renderNav(match ? match.r.nav : null);
  if (!match) {
    replace(main, h("h1", { tabindex: "-1" }, "Not found"), h("p", {}, h("a", { href: "#/inbox" }, "Go to the inbox")));
    focusHeading();
    return;
  }
  if (match.r.approvers && me.role !== "approver") {
    const [title, why] = match.r.approvers;
    replace(main, h("h1", { tabindex: "-1" }, title), notice("info", why));
    focusHeading();
    return;
  }
  replace(main, h("p", { class: "loading" }, "Loading…"));
  // The view draws into its own element, which replaces the loading line once it is ready.
  const view = h("div", { class: "view" });
  try {
    const done = (await match.r.view.render(view, { me, params, args: match.m.slice(1), navigate, focusHeading })) || null;
    if (mine !== ticket) {
      if (done) done();
      return;
    }
    cleanup = done;
    replace(main, view);
  } catch (e) {
    if (!currentSession() || mine !== ticket) return;
    replace(main, h("h1", { tabindex: "-1" }, "Something went wrong"), notice("error", describe(e)));
  }
  focusHeading();
}

/** After a page change, focus goes to its heading, so keyboard and screen-reader users start
 * at the top of the new content. */
function focusHeading() {
  const heading = main.querySelector("h1");
  if (heading) {
    heading.setAttribute("tabindex", "-1");
    heading.focus({ preventScroll: false });
  }
}

function renderNav(current) {
  top.hidden = false;
  const link = (key, hash, label) =>
    h("li", {}, h("a", { href: hash, "aria-current": current === key ? "page" : null }, label));
  const signOut = h("button", { type: "button", class: "btn btn-quiet", id: "sign-out" }, "Sign out");
  signOut.addEventListener("click", async () => {
    signOut.disabled = true;
    try {
      await api("DELETE", "/v1/sessions/current");
    } catch {
      // Signed out here either way: the token is forgotten below.
    }
    endSession("signed_out");
  });
  const who = me.email || me.name || "";
  replace(
    top,
    h(
      "nav",
      { "aria-label": "Main" },
      h("a", { class: "brand", href: "#/inbox" }, "Tauros"),
      h(
        "ul",
        { class: "nav-links" },
        link("inbox", "#/inbox", "Invoices"),
        link("organisation", "#/organisation", "Organisation"),
        link("agents", "#/agents", "Agents"),
        link("customers", "#/customers", "Customers"),
        link("payments", "#/payments", "Payments"),
        // The queue and the endpoints are the approvers' (operators get 403 there).
        me.role === "approver" ? link("jobs", "#/jobs", "Jobs") : null,
        me.role === "approver" ? link("webhooks", "#/webhooks", "Webhooks") : null,
      ),
      h(
        "div",
        { class: "nav-user" },
        h("span", { class: "who" }, who, me.role ? h("span", { class: "role" }, ` (${me.role})`) : null),
        signOut,
      ),
    ),
  );
}

onSessionEnd((reason) => {
  endedBecause = reason;
  me = null;
  route();
});

document.getElementById("skip").addEventListener("click", (event) => {
  // The router owns the hash: move the focus without changing it.
  event.preventDefault();
  const heading = main.querySelector("h1");
  (heading || main).focus();
});

window.addEventListener("hashchange", route);
route();
