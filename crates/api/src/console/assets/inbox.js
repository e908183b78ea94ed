// The inbox: invoices waiting for a decision, oldest first (GET /v1/invoices?state=
// pending_approval), and the other states as filters, paged with the API's next_cursor.
// Overdue is not a state but a filter of its own (GET /v1/invoices?overdue=true: issued or
// partially paid, past the due date, a balance open).

import { api, loadDirectory } from "./api.js";
import { h, replace, notice, table } from "./dom.js";
import * as fmt from "./format.js";

const FILTERS = [
  ["pending_approval", "Pending approval"],
  ["draft", "Draft"],
  ["approved", "Approved"],
  ["issued", "Issued"],
  ["partially_paid", "Partially paid"],
  ["overdue", "Overdue"],
  ["paid", "Paid"],
  ["rejected", "Rejected"],
  ["cancelled", "Cancelled"],
  ["all", "All"],
];

const PAGE_SIZE = 25;

export async function render(main, { params }) {
  const state = FILTERS.some(([key]) => key === params.get("state")) ? params.get("state") : "pending_approval";
  const cursor = params.get("cursor");
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (state === "overdue") query.set("overdue", "true");
  else if (state !== "all") query.set("state", state);
  if (cursor) query.set("cursor", cursor);
  const [page, dir] = await Promise.all([api("GET", `/v1/invoices?${query}`), loadDirectory()]);
  const label = FILTERS.find(([key]) => key === state)[1];

  const filters = h(
    "nav",
    { class: "filters", "aria-label": "Invoice states" },
    h(
      "ul",
      {},
      FILTERS.map(([key, text]) =>
        h("li", {}, h("a", { href: `#/inbox?state=${key}`, "aria-current": key === state ? "page" : null }, text)),
      ),
    ),
  );

  const rows = page.items.map((invoice) => {
    const rev = invoice.current_revision;
    const customer = dir.customers.get(rev.customer_id);
    const agent = dir.agents.get(invoice.agent_id);
    const destination = dir.destinations.get(rev.payment_destination_id);
    const badges = [];
    if (invoice.state !== state || state === "all") badges.push(h("span", { class: `badge state-${invoice.state}` }, fmt.state(invoice.state)));
    if (destination && destination.state !== "active") {
      badges.push(h("span", { class: "badge badge-warn" }, `Destination ${destination.state}`));
    }
    // Tauros computes overdue (issued or partially paid, past due, a balance open).
    if (invoice.overdue && state !== "overdue") {
      badges.push(h("span", { class: "badge badge-warn" }, "Overdue"));
    }
    if (invoice.decision && invoice.state === "draft" && invoice.decision.decision === "changes_requested") {
      badges.push(h("span", { class: "badge" }, "Changes requested"));
    }
    if (invoice.revision_count > 1) badges.push(h("span", { class: "badge" }, `Revision ${rev.number}`));
    return {
      dataset: { invoiceId: invoice.id },
      cells: [
        h("a", { href: `#/invoices/${invoice.id}`, class: "row-link" }, customer ? customer.name : `Customer ${fmt.short(rev.customer_id, 8)}`),
        agent ? agent.name : `Agent ${fmt.short(invoice.agent_id, 8)}`,
        { value: fmt.money(rev.total, rev.currency), class: "num" },
        { value: h("time", { datetime: rev.due_date }, fmt.date(rev.due_date)), class: "num" },
        { value: h("time", { datetime: invoice.created_at, title: fmt.dateTime(invoice.created_at) }, fmt.age(invoice.created_at)), class: "num" },
        badges.length ? badges : "",
      ],
    };
  });

  const content = rows.length
    ? table(
        `${label} invoices${state === "pending_approval" ? ", oldest first" : ", newest first"}`,
        [
          { label: "Customer" },
          { label: "Agent" },
          { label: "Total", class: "num" },
          { label: "Due", class: "num" },
          { label: "Age", class: "num" },
          { label: "Notes" },
        ],
        rows,
        { class: "inbox", captionHidden: false },
      )
    : h("p", { class: "empty" }, state === "pending_approval" ? "Nothing is waiting for you. " : `No ${label.toLowerCase()} invoices. `);

  const pager = h(
    "nav",
    { class: "pager", "aria-label": "Pages" },
    cursor ? h("a", { href: `#/inbox?state=${state}`, class: "btn btn-small" }, "First page") : null,
    page.next_cursor
      ? h("a", { href: `#/inbox?state=${state}&cursor=${encodeURIComponent(page.next_cursor)}`, class: "btn btn-small", rel: "next" }, "Next page")
      : null,
  );

  replace(
    main,
    h("h1", {}, state === "pending_approval" ? "Waiting for approval" : `${label} invoices`),
    filters,
    state === "pending_approval"
      ? h("p", { class: "lede" }, "Open an invoice to read exactly what it asks for, then decide.")
      : null,
    content,
    pager,
    dir.users.size === 0 && dir.agents.size === 0 ? notice("info", "You own no agents yet: create one under Agents.") : null,
  );
}
