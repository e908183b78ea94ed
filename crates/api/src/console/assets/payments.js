// The payments inbox: what settlement agents reported that Tauros could not simply count
// toward an invoice (GET /v1/payments?status=unmatched, overpaid, conflict), and one payment
// with every event reported about it (GET /v1/payments/{id}). Read-only: the API has no
// route to resolve a payment.

import { api } from "./api.js";
import { h, replace, notice, table, filterNav, pager, facts } from "./dom.js";
import * as fmt from "./format.js";

const FILTERS = [
  ["unmatched", "Unmatched"],
  ["overpaid", "Overpaid"],
  ["conflict", "Conflict"],
  ["all", "All payments"],
];

const PAGE_SIZE = 25;

const READ_ONLY =
  "This page only shows payments: the API has no route to resolve one. A payment that names an invoice not issued yet is matched when it is issued; anything else is corrected at its source, which reports a new event.";

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
  if (context.args[0]) return renderOne(main, context.args[0]);
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
    notice("info", h("p", { id: "payments-read-only" }, READ_ONLY)),
    rows.length
      ? table(
          `${label}${status === "all" ? "" : " payments"}, newest first`,
          [
            { label: "Payment" },
            { label: "Source" },
            { label: "Amount", class: "num" },
            { label: "Status and why" },
            { label: "Invoice" },
            { label: "Age", class: "num" },
          ],
          rows,
          { class: "payments", rowHeader: true },
        )
      : h("p", { class: "empty" }, status === "all" ? "No payments have been reported." : `No ${label.toLowerCase()} payments.`),
    pager(`#/payments?status=${status}`, cursor, page.next_cursor),
  );
}

async function renderOne(main, id) {
  const { payment, events } = await api("GET", `/v1/payments/${id}`);
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
  replace(
    main,
    h("p", { class: "crumbs" }, h("a", { href: "#/payments" }, "← Payments")),
    h("h1", {}, `Payment ${payment.payment_id}`),
    h("p", { class: "summary", id: "payment-why" }, h("span", { class: `badge status-${payment.status}`, id: "payment-status" }, fmt.paymentStatus(payment.status)), " ", why(payment)),
    h(
      "section",
      { class: "card", "aria-labelledby": "payment-h" },
      h("h2", { id: "payment-h" }, "The payment"),
      facts([
        ["Source", payment.source],
        ["Payment id at the source", h("span", { class: "mono" }, payment.payment_id)],
        ["Amount", fmt.money(payment.amount, payment.currency), { class: "num-inline", id: "payment-amount" }],
        ["Counts toward its invoice", fmt.money(payment.allocated, payment.currency), { class: "num-inline" }],
        ["State at the source", fmt.paymentState(payment.state) + (payment.reversed ? " (reversed)" : "")],
        ["Invoice it names", payment.invoice_number || payment.invoice_id || "none"],
        ["Matched invoice", payment.matched_invoice_id ? h("a", { href: `#/invoices/${payment.matched_invoice_id}` }, "Open the invoice") : "none"],
        ["First reported", fmt.dateTime(payment.created_at)],
        ["Last changed", fmt.dateTime(payment.updated_at)],
      ]),
    ),
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
    notice("info", h("p", {}, READ_ONLY)),
  );
}
