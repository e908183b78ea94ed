// The agent → approver journey through a client generated from Tauros' OpenAPI document with
// openapi-typescript and openapi-fetch, with no hand edits. scripts/clients generates
// ./generated/schema.d.ts, type-checks this file with `tsc --strict` (the `@ts-expect-error`
// lines below must be errors) and runs it against a live `tauros serve --demo`:
//   node journey.js BASE_URL AGENT_KEY APPROVER_EMAIL PASSWORD
import createClient from "openapi-fetch";
import type { components, paths } from "./generated/schema.js";

// Node's `process`, declared here so that no @types package is needed (fetch, crypto and
// console come from the DOM library, which Node implements).
declare const process: { argv: string[]; exitCode?: number };

type Schemas = components["schemas"];
type CreateInvoice = Schemas["CreateInvoiceRequest"];
type Line = Schemas["LineRequest"];
type InvoiceState = Schemas["InvoiceState"];

const [baseUrl, agentKey, approverEmail, password] = process.argv.slice(2);
if (!baseUrl || !agentKey || !approverEmail || !password) {
  throw new Error("usage: node journey.js BASE_URL AGENT_KEY APPROVER_EMAIL PASSWORD");
}

function check(condition: boolean, what: string): asserts condition {
  if (!condition) throw new Error(`journey: ${what}`);
}

// Every state has a meaning for the agent: the switch must cover the document's enum.
function describe(state: InvoiceState): string {
  switch (state) {
    case "draft":
    case "pending_approval":
    case "approved":
    case "issued":
    case "partially_paid":
    case "paid":
    case "rejected":
    case "cancelled":
      return state;
    default: {
      const unknown: never = state;
      return unknown;
    }
  }
}

async function journey(): Promise<void> {
  const agent = createClient<paths>({ baseUrl, headers: { Authorization: `Bearer ${agentKey}` } });

  const destinations = await agent.GET("/v1/payment-destinations", {
    params: { query: { state: "active", limit: 100 } },
  });
  check(destinations.data !== undefined, `destinations: ${destinations.response.status}`);
  const eur = destinations.data.items.find((d) => d.currency === "EUR" && d.network === "iban");
  check(eur !== undefined, "an active EUR IBAN destination");
  const customers = await agent.GET("/v1/customers", { params: { query: { limit: 10 } } });
  check(customers.data !== undefined && customers.data.items.length > 0, "a customer");
  const customer = customers.data.items[0]!;

  const lines: Line[] = [
    { description: "Discovery workshop", quantity: "2", unit_amount: "400.00" },
    { description: "Report", quantity: "1", unit_amount_minor: 12050 },
    { description: "Travel", quantity: "1.5", unit_amount_minor: "10000" },
  ];
  const body: CreateInvoice = {
    customer_id: customer.id,
    payment_destination_id: eur.id,
    currency: "EUR",
    due_date: "2099-12-31",
    lines,
    reasoning: "Workshop delivered as agreed",
  };
  // A dry run first: no key, nothing written; what a create would seal, and warnings.
  const preview = await agent.POST("/v1/invoices/preview", { body });
  check(preview.data !== undefined, `preview: ${preview.response.status}`);
  const previewed = preview.data;
  check(previewed.total === "1070.50" && previewed.total_minor === 107050, `preview total ${previewed.total}`);
  const warned = previewed.warnings.map((w) => w.code);
  check(warned.includes("due_date_far"), `preview warnings ${warned.join(",")}`);

  const key = crypto.randomUUID();
  const created = await agent.POST("/v1/invoices", {
    params: { header: { "Idempotency-Key": key } },
    body,
  });
  check(created.response.status === 201, `create: ${created.response.status}`);
  check(created.data !== undefined && !created.data.replayed, "a new invoice");
  check(created.response.headers.get("Idempotent-Replayed") === "false", "Idempotent-Replayed: false");
  const invoice = created.data.invoice;
  check(invoice.current_revision.total === "1070.50", `total ${invoice.current_revision.total}`);
  check(invoice.current_revision.total_minor === 107050, "total_minor");
  check(invoice.current_revision.payload_hash === previewed.payload_hash, "the create sealed the previewed hash");

  const again = await agent.POST("/v1/invoices", { params: { header: { "Idempotency-Key": key } }, body });
  check(again.response.status === 200 && again.data?.replayed === true, "a replay");
  check(again.response.headers.get("Idempotent-Replayed") === "true", "Idempotent-Replayed: true");

  // Submit takes no body at all (or `{}`).
  const submitted = await agent.POST("/v1/invoices/{id}/submit", { params: { path: { id: invoice.id } } });
  check(submitted.data?.invoice.state === "pending_approval", `submit: ${submitted.response.status}`);

  const session = await createClient<paths>({ baseUrl }).POST("/v1/sessions", {
    body: { email: approverEmail, password },
  });
  check(session.data !== undefined, `sign in: ${session.response.status}`);
  const approver = createClient<paths>({
    baseUrl,
    headers: { Authorization: `Bearer ${session.data.token}` },
  });
  const inbox = await approver.GET("/v1/invoices", { params: { query: { state: "pending_approval" } } });
  check(inbox.data !== undefined, `inbox: ${inbox.response.status}`);
  const pending = inbox.data.items.find((i) => i.id === invoice.id);
  check(pending !== undefined, "the invoice is in the inbox");

  const approved = await approver.POST("/v1/invoices/{id}/approve", {
    params: { path: { id: pending.id } },
    body: {
      revision_id: pending.current_revision.id,
      payload_hash: pending.current_revision.payload_hash,
      reason: "Matches the contract",
    },
  });
  check(approved.data?.invoice.state === "approved", `approve: ${approved.response.status}`);

  const decisions = await agent.GET("/v1/invoices/{id}/decisions", { params: { path: { id: invoice.id } } });
  check(decisions.data?.items[0]?.decision === "approved", "the agent reads the decision");
  const events = await approver.GET("/v1/invoices/{id}/events", { params: { path: { id: invoice.id } } });
  const actions = events.data?.items.map((e) => `${e.action}:${e.actor_kind}:${e.interface}`);
  check(
    actions?.join(",") === "create_draft:agent:api,submit:agent:api,approve:human:api",
    `events ${actions?.join(",")}`,
  );

  // A refused command is a problem with the documented members.
  const twice = await agent.POST("/v1/invoices/{id}/submit", { params: { path: { id: invoice.id } }, body: {} });
  check(twice.response.status === 409, `submit again: ${twice.response.status}`);
  check(twice.error?.code === "invalid_transition", "invalid_transition");
  check(twice.error.from === "approved" && twice.error.action === "submit", "from and action");

  console.log(`typescript journey: invoice ${invoice.id} ${describe(approved.data.invoice.state)}`);
}

// Requests a client generated from the document must refuse at compile time. Never called.
export function mustNotCompile(agent: ReturnType<typeof createClient<paths>>, body: CreateInvoice): void {
  // @ts-expect-error: a create body without `lines`
  const noLines: CreateInvoice = { ...body, lines: undefined };
  // @ts-expect-error: a line names exactly one of `unit_amount` and `unit_amount_minor`
  const noAmount: Line = { description: "Workshop", quantity: "1" };
  // @ts-expect-error: `unit_amount_minor` is an integer or a string of digits, never a boolean
  const wrongMinor: Line = { description: "Workshop", quantity: "1", unit_amount_minor: true };
  // @ts-expect-error: a misspelt state
  void agent.GET("/v1/invoices", { params: { query: { state: "pending_aproval" } } });
  // @ts-expect-error: the Idempotency-Key header left out
  void agent.POST("/v1/invoices", { body });
  // @ts-expect-error: due_date is not nullable
  const nullDate: CreateInvoice = { ...body, due_date: null };
  // @ts-expect-error: submit takes `{}` or no body, never null
  void agent.POST("/v1/invoices/{id}/submit", { params: { path: { id: "x" } }, body: null });
  // @ts-expect-error: a network that does not exist
  void agent.POST("/v1/payment-destinations", { body: { label: "x", currency: "EUR", network: "swift", address: "x" } });
  void [noLines, noAmount, wrongMinor, nullDate];
}

journey().catch((error: unknown) => {
  console.error(error);
  process.exitCode = 1;
});
