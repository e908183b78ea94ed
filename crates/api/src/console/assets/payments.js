// The payments inbox: what settlement agents reported that Tauros could not simply count
// toward an invoice (GET /v1/payments?status=unmatched, overpaid, conflict), each with its way
// out, and one payment with every event reported about it (GET /v1/payments/{id}) and the
// form that resolves it (POST /v1/payments/{id}/resolve, approvers, with an Idempotency-Key
// drawn once per form: a double click or a retry resolves once).

import { api, listAll, ApiError, describe } from "./api.js";
import { h, replace, notice, table, filterNav, pager, facts, field, announce } from "./dom.js";
import * as fmt from "./format.js";

const FILTERS = [
  ["unmatched", "Unmatched"],
  ["overpaid", "Overpaid"],
  ["conflict", "Conflict"],
  ["all", "All payments"],
];

const PAGE_SIZE = 25;

const HOW =
  "An approver resolves what settlement cannot: accept a payment whose events disagree at the amount you know, allocate an unmatched one to an invoice, or void one so nothing of it counts. A payment that names an invoice not issued yet is matched when it is issued. Tauros never moves money: refunds happen at the bank or wallet.";

/** The actions that resolve a payment with this status (`domain::resolution`). */
export function waysOut(status) {
  switch (status) {
    case "conflict":
      return ["accept", "void"];
    case "unmatched":
      return ["allocate", "void"];
    case "overpaid":
    case "pending":
    case "applied":
      return ["void"];
    default:
      return [];
  }
}

const WAY_TEXT = {
  conflict: "Accept it at the amount you know, or void it.",
  unmatched: "Allocate it to an invoice, or void it.",
  overpaid: "Refund the rest outside Tauros; void it if it should not count at all.",
};

const RESOLUTION_STATES = {
  applied: "Applied",
  proposed: "Waiting for a second approver",
  rejected: "Rejected",
  expired: "Expired",
};

const ACTIONS = {
  accept: "Accept at an amount",
  allocate: "Allocate to an invoice",
  void: "Void: nothing of it counts",
};

/** The way out of a waiting payment, for the inbox. */
function wayOutCell(payment, approver) {
  const text = WAY_TEXT[payment.status];
  if (!text) return "";
  return h(
    "span",
    { class: "way-out" },
    text,
    " ",
    approver ? h("a", { href: `#/payments/${payment.id}`, class: "resolve-link" }, "Resolve…") : h("span", { class: "hint" }, "(an approver resolves it)"),
  );
}
/** Why a payment needs a human, in a sentence. */
export function why(payment) {
  switch (payment.status) {
    case "unmatched":
      return fmt.unmatchedReason(payment.unmatched_reason);
    case "overpaid":
      return `More than the invoice's balance: ${fmt.money(payment.allocated, payment.currency)} counts toward it, the rest does not.`;
    case "conflict":
      return "Its events disagree about the amount, the currency or the invoice: nothing of it counts until a human has looked.";
    case "failed":
      return payment.reversed ? "Confirmed once, then failed at its source: it no longer counts." : "It failed at its source: nothing of it counts.";
    case "pending":
      return "Seen at its source, not final yet.";
    case "applied":
      return "Confirmed and counted toward its invoice.";
    default:
      return "";
  }
}

/** The invoice a payment names: a link when it is matched, the name the source gave otherwise. */
function invoiceCell(payment) {
  const named = payment.invoice_number || (payment.invoice_id ? fmt.short(payment.invoice_id, 8) : "none");
  if (payment.matched_invoice_id) {
    return h("a", { href: `#/invoices/${payment.matched_invoice_id}` }, payment.invoice_number || "Open the invoice");
  }
  return h("span", {}, named, payment.invoice_number || payment.invoice_id ? h("span", { class: "hint" }, " (no such invoice here)") : null);
}

export async function render(main, context) {
  if (context.args[0]) return renderOne(main, context.args[0], context);
  const approver = context.me.role === "approver";
  const { params } = context;
  const status = FILTERS.some(([key]) => key === params.get("status")) ? params.get("status") : "unmatched";
  const cursor = params.get("cursor");
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (status !== "all") query.set("status", status);
  if (cursor) query.set("cursor", cursor);
  const page = await api("GET", `/v1/payments?${query}`);
  const label = FILTERS.find(([key]) => key === status)[1];

  const rows = page.items.map((payment) => ({
    dataset: { paymentId: payment.id },
    cells: [
      h("a", { href: `#/payments/${payment.id}`, class: "row-link" }, payment.payment_id),
      payment.source,
      { value: fmt.money(payment.amount, payment.currency), class: "num" },
      [h("span", { class: `badge status-${payment.status}` }, fmt.paymentStatus(payment.status)), " ", why(payment)],
      invoiceCell(payment),
      wayOutCell(payment, approver),
      { value: h("time", { datetime: payment.created_at, title: fmt.dateTime(payment.created_at) }, fmt.age(payment.created_at)), class: "num" },
    ],
  }));

  replace(
    main,
    h("h1", {}, "Payments"),
    filterNav(
      "Payment statuses",
      FILTERS.map(([key, text]) => [key, text, `#/payments?status=${key}`]),
      status,
    ),
    h("p", { class: "lede" }, "What settlement agents reported that Tauros could not simply count toward an invoice, newest first."),
    notice("info", h("p", { id: "payments-how" }, HOW)),
    rows.length
      ? table(
          `${label}${status === "all" ? "" : " payments"}, newest first`,
          [
            { label: "Payment" },
            { label: "Source" },
            { label: "Amount", class: "num" },
            { label: "Status and why" },
            { label: "Invoice" },
            { label: "Way out" },
            { label: "Age", class: "num" },
          ],
          rows,
          { class: "payments", rowHeader: true },
        )
      : h("p", { class: "empty" }, status === "all" ? "No payments have been reported." : `No ${label.toLowerCase()} payments.`),
    pager(`#/payments?status=${status}`, cursor, page.next_cursor),
  );
}

async function renderOne(main, id, context) {
  const approver = context.me.role === "approver";
  async function draw(flash) {
    // A payment keeps at most 100 events: one page of 100 is all of them.
    const { payment, events, resolutions } = await api("GET", `/v1/payments/${id}?limit=100`);
    const ways = approver ? waysOut(payment.status) : [];
    const form = ways.length ? await resolveForm(payment, ways, draw) : null;
    replace(
      main,
      ...page(payment, events, resolutions || [], form, flash),
    );
    if (flash) context.focusHeading();
  }
  await draw(null);
  return null;
}

function page(payment, events, resolutions, form, flash) {
  const rows = events.map((event) => ({
    dataset: { eventId: event.id },
    class: event.contradicts ? "contradicts" : null,
    cells: [
      event.event_id,
      fmt.paymentState(event.status),
      { value: fmt.money(event.amount, event.currency), class: "num" },
      event.invoice_number || (event.invoice_id ? fmt.short(event.invoice_id, 8) : ""),
      { value: fmt.dateTime(event.occurred_at), class: "num" },
      { value: fmt.dateTime(event.received_at), class: "num" },
      event.contradicts ? h("span", { class: "badge badge-warn" }, "Contradicts the payment") : "agrees",
    ],
  }));
  const resolved = resolutions.map((r) => ({
    dataset: { resolutionId: r.id },
    cells: [
      ACTIONS[r.action] || r.action,
      { value: r.amount ? fmt.money(r.amount, payment.currency) : "", class: "num" },
      r.invoice_id ? h("a", { href: `#/invoices/${r.invoice_id}` }, "Open the invoice") : "",
      r.reason,
      h("span", { class: `badge resolution-${r.state}` }, RESOLUTION_STATES[r.state] || r.state),
      { value: fmt.dateTime(r.created_at), class: "num" },
    ],
  }));
  return [
    h("p", { class: "crumbs" }, h("a", { href: "#/payments" }, "← Payments")),
    h("h1", {}, `Payment ${payment.payment_id}`),
    flash || null,
    h("p", { class: "summary", id: "payment-why" }, h("span", { class: `badge status-${payment.status}`, id: "payment-status" }, fmt.paymentStatus(payment.status)), " ", why(payment)),
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-h" },
      h("h2", { id: "payment-h" }, "The payment"),
      facts([
        ["Source", payment.source],
        ["Payment id at the source", h("span", { class: "mono" }, payment.payment_id)],
        ["Amount", fmt.money(payment.amount, payment.currency), { class: "num-inline", id: "payment-amount" }],
        ["Counts toward its invoice", fmt.money(payment.allocated, payment.currency), { class: "num-inline", id: "payment-allocated" }],
        ["State at the source", fmt.paymentState(payment.state) + (payment.reversed ? " (reversed)" : "")],
        ["Invoice it names", payment.invoice_number || payment.invoice_id || "none"],
        ["Matched invoice", payment.matched_invoice_id ? h("a", { href: `#/invoices/${payment.matched_invoice_id}`, id: "payment-matched" }, "Open the invoice") : "none"],
        ["Resolved", payment.resolution ? `${ACTIONS[payment.resolution] || payment.resolution}${payment.resolved_amount ? ` (${fmt.money(payment.resolved_amount, payment.currency)})` : ""}` : null, { id: "payment-resolution" }],
        ["First reported", fmt.dateTime(payment.created_at)],
        ["Last changed", fmt.dateTime(payment.updated_at)],
      ]),
    ),
    form,
    resolved.length
      ? h(
          "section",
          { class: "card", "aria-labelledby": "resolutions-h" },
          h("h2", { id: "resolutions-h" }, `Resolutions (${resolved.length})`),
          table(
            "Resolutions asked for on this payment, oldest first",
            [{ label: "Action" }, { label: "Amount", class: "num" }, { label: "Invoice" }, { label: "Reason" }, { label: "State" }, { label: "Asked", class: "num" }],
            resolved,
            { class: "payment-resolutions", captionHidden: true },
          ),
        )
      : null,
    h(
      "section",
      { class: "card", "aria-labelledby": "events-h" },
      h("h2", { id: "events-h" }, `Events (${events.length})`),
      table(
        "Events reported about this payment, in the order they arrived",
        [
          { label: "Event" },
          { label: "Said" },
          { label: "Amount", class: "num" },
          { label: "Invoice named" },
          { label: "Occurred", class: "num" },
          { label: "Received", class: "num" },
          { label: "Agrees?" },
        ],
        rows,
        { class: "payment-events", captionHidden: true, rowHeader: true },
      ),
    ),
    form ? null : notice("info", h("p", {}, HOW)),
  ];
}

/** The invoices a payment may be allocated to: issued or partially paid, in its currency. */
async function targets(payment) {
  const [issued, partly] = await Promise.all([
    listAll("/v1/invoices?state=issued", 5),
    listAll("/v1/invoices?state=partially_paid", 5),
  ]);
  return [...issued, ...partly].filter((i) => i.current_revision.currency === payment.currency);
}

/** The way out of one payment: an action, what it needs, a reason. */
async function resolveForm(payment, ways, redraw) {
  const invoices = ways.includes("allocate") ? await targets(payment) : [];
  // One key per form: a double click, or a retry after the network failed, resolves once. A
  // refusal wrote nothing, so the next try (with a corrected body) takes a new key.
  let key = crypto.randomUUID();
  let busy = false;
  const radios = ways.map((way, i) =>
    h(
      "label",
      { class: "choice" },
      h("input", { type: "radio", name: "resolve-action", value: way, id: `resolve-${way}`, checked: i === 0 }),
      " ",
      ACTIONS[way],
    ),
  );
  const amount = field(
    `Amount (${payment.currency})`,
    h("input", { type: "text", id: "resolve-amount", inputmode: "decimal", autocomplete: "off" }),
    "A decimal string with at most the currency's decimals, such as 400.00. To allocate, leave it empty to count the whole payment (never more than the invoice's open balance).",
  );
  const invoice = field(
    "Invoice",
    h(
      "select",
      { id: "resolve-invoice" },
      h("option", { value: "" }, invoices.length ? "Choose an invoice" : `No issued invoice in ${payment.currency}`),
      invoices.map((i) => h("option", { value: i.id }, `${i.number || fmt.short(i.id, 8)}: ${fmt.money(i.balance, payment.currency)} open`)),
    ),
    `Issued or partially paid invoices in ${payment.currency}: Tauros never converts.`,
  );
  const reason = field("Reason", h("textarea", { id: "resolve-reason", rows: "3", maxlength: "1000" }), "Why: kept on the payment and in the audit trail, and shown to a second approver under four eyes.");
  const message = h("div", { id: "resolve-message" });
  const submit = h("button", { type: "submit", class: "btn btn-primary", id: "resolve-submit" }, "Resolve");
  const chosen = () => radios.map((l) => l.querySelector("input")).find((i) => i.checked)?.value;
  const show = () => {
    const way = chosen();
    amount.field.hidden = way === "void";
    invoice.field.hidden = way !== "allocate";
  };
  for (const l of radios) l.querySelector("input").addEventListener("change", show);
  show();

  const form = h(
    "form",
    { class: "resolve", novalidate: true },
    h("fieldset", {}, h("legend", {}, "Way out"), ...radios),
    amount.field,
    invoice.field,
    reason.field,
    h("div", { class: "actions" }, submit),
    message,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (busy) return;
    const way = chosen();
    const body = { action: way, reason: reason.input.value };
    const typed = amount.input.value.trim();
    if (way !== "void" && typed) body.amount = typed;
    if (way === "allocate" && invoice.input.value) body.invoice_id = invoice.input.value;
    for (const f of [amount, invoice, reason]) f.setError(null);
    replace(message);
    busy = true;
    submit.disabled = true;
    try {
      const answer = await api("POST", `/v1/payments/${payment.id}/resolve`, body, { idempotencyKey: key });
      const text =
        answer.resolution.state === "proposed"
          ? "Proposed: four eyes is on, so another approver confirms it on the Organisation page. Nothing changed yet."
          : `${ACTIONS[way]}: done. The payment is now ${fmt.paymentStatus(answer.payment.status).toLowerCase()}${answer.invoice ? `, and its invoice ${answer.invoice.state.replace("_", " ")}` : ""}.`;
      await redraw(notice("ok", h("p", { id: "resolve-flash" }, text)));
      announce(text);
    } catch (e) {
      busy = false;
      submit.disabled = false;
      if (e instanceof ApiError && e.status === 401) return;
      if (e instanceof ApiError && e.status >= 400 && e.status < 500) key = crypto.randomUUID();
      if (e instanceof ApiError) {
        amount.setError(e.fieldError("amount") || e.fieldError("amount_minor"));
        invoice.setError(e.fieldError("invoice_id"));
        reason.setError(e.fieldError("reason"));
      }
      const text = describe(e);
      replace(message, notice("error", h("p", { id: "resolve-error" }, text)));
      announce(text);
    }
  });
  return h(
    "section",
    { class: "card decide", "aria-labelledby": "resolve-h" },
    h("h2", { id: "resolve-h" }, "Resolve it"),
    h("p", { class: "hint" }, WAY_TEXT[payment.status] || "Void it if it should not count."),
    form,
  );
}
