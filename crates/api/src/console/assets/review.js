// The review page: everything an approver needs to decide on one invoice, and the decision
// itself, bound to the exact revision_id and payload_hash on the screen. While the page is
// open it watches the invoice (every few seconds and whenever the tab comes back into view):
// when the agent revises it or someone else decides, the page says so and shows what is now
// current, before anyone can decide on what they did not read.

import { api, loadDirectory, getOrNull, ApiError, describe, forgetDirectory } from "./api.js";
import { h, add, replace, notice, table, copyButton, field, announce } from "./dom.js";
import { diffRevisions, otherSealedFacts } from "./diff.js";
import * as fmt from "./format.js";

const WATCH_INTERVAL_MS = 5000;

// Every item of a paginated history list (`limit` 100 a page, following `next_cursor`): an
// invoice has at most 100 revisions, so its revisions are one page; its events are read in
// pages of 100.
async function everyPage(path) {
  const items = [];
  let cursor = null;
  do {
    const query = cursor ? `?limit=100&cursor=${encodeURIComponent(cursor)}` : "?limit=100";
    const page = await api("GET", `${path}${query}`);
    items.push(...page.items);
    cursor = page.next_cursor;
  } while (cursor);
  return items;
}

export async function render(main, context) {
  const id = context.args[0];
  let shown = null; // {revisionId, hash, state, revisionNumber} of what is on the screen
  let busy = false;
  let stopped = false;

  async function load() {
    const [invoice, revisions, decisions, events, verify, org, dir] = await Promise.all([
      api("GET", `/v1/invoices/${id}`),
      everyPage(`/v1/invoices/${id}/revisions`),
      api("GET", `/v1/invoices/${id}/decisions`),
      everyPage(`/v1/invoices/${id}/events`),
      getOrNull(`/v1/invoices/${id}/verify`),
      api("GET", "/v1/organisation"),
      loadDirectory(),
    ]);
    const rev = invoice.current_revision;
    // The destination is read afresh every time: its state decides whether approving can work.
    const [destination, customer, agent] = await Promise.all([
      getOrNull(`/v1/payment-destinations/${rev.payment_destination_id}`),
      dir.customers.get(rev.customer_id) || getOrNull(`/v1/customers/${rev.customer_id}`),
      dir.agents.get(invoice.agent_id) || getOrNull(`/v1/agents/${invoice.agent_id}`),
    ]);
    return { invoice, revisions, decisions: decisions.items, events, verify, org, dir, destination, customer, agent };
  }

  async function refresh(flash) {
    const data = await load();
    if (stopped) return;
    draw(data, flash);
    // A change or an outcome moves the focus to the top, where it is announced.
    if (flash) context.focusHeading();
  }

  function draw(data, flash) {
    const { invoice, revisions, decisions, events, verify, org, dir, destination, customer, agent } = data;
    const rev = invoice.current_revision;
    shown = { revisionId: rev.id, hash: rev.payload_hash, state: invoice.state, revisionNumber: rev.number };
    const me = context.me;
    const sealed = parseCanonical(rev.canonical_payload);
    const network = destination ? destination.network : sealed?.destination?.network;
    const addressValue = destination ? destination.address : sealed?.destination?.address;
    const customerName = customer ? customer.name : `customer ${fmt.short(rev.customer_id, 8)}`;
    const agentName = agent ? agent.name : `Agent ${fmt.short(invoice.agent_id, 8)}`;
    const destinationInactive = destination && destination.state !== "active";
    const ownsAgent = agent && agent.owner_id === me.id;
    const fourEyesBlocks = org.four_eyes && ownsAgent;

    const names = {
      customer: (cid) => (dir.customers.get(cid) || (cid === rev.customer_id ? customer : null))?.name || fmt.short(cid, 8),
      destination: (did) => {
        const d = dir.destinations.get(did) || (did === rev.payment_destination_id ? destination : null);
        return d ? `${d.label}: ${fmt.destinationPhrase(d.network, d.currency, d.address)}` : fmt.short(did, 8);
      },
    };
    const who = (kind, actorId) => {
      if (kind === "system") return "Tauros";
      if (kind === "agent") return dir.agents.get(actorId)?.name || (actorId === invoice.agent_id ? agentName : `agent ${fmt.short(actorId, 8)}`);
      if (actorId === me.id) return `you (${me.email})`;
      return dir.users.get(actorId)?.email || `human ${fmt.short(actorId, 8)}`;
    };

    const summary = h(
      "p",
      { class: "summary", id: "summary" },
      h("strong", {}, agentName),
      " asks ",
      h("strong", {}, customerName),
      " to pay ",
      h("strong", { class: "amount" }, fmt.money(rev.total, rev.currency)),
      " by ",
      h("strong", {}, fmt.date(rev.due_date)),
      " into ",
      h("strong", { class: "address" }, network ? fmt.destinationPhrase(network, rev.currency, addressValue) : "an unknown destination"),
      ".",
    );

    const destinationBox = h(
      "section",
      { class: "card", "aria-labelledby": "dest-h" },
      h("h2", { id: "dest-h" }, "Where the money goes"),
      h(
        "dl",
        { class: "facts" },
        destination ? [h("dt", {}, "Label"), h("dd", {}, destination.label)] : null,
        h("dt", {}, "Network"),
        h("dd", {}, network ? fmt.network(network) : "unknown"),
        h("dt", {}, "Currency"),
        h("dd", {}, rev.currency),
        h("dt", {}, "Address"),
        h("dd", { class: "mono", id: "destination-address" }, addressValue ? fmt.address(network, addressValue) : "unknown"),
        h("dt", {}, "State"),
        h(
          "dd",
          {},
          destination
            ? h("span", { class: `badge ${destination.state === "active" ? "badge-ok" : "badge-warn"}`, id: "destination-state" }, destination.state)
            : "not visible to you (the agent has another owner); Tauros checks it when you approve",
        ),
      ),
      destinationInactive
        ? notice(
            "warn",
            `This destination is ${destination.state}: it no longer receives money, so this invoice cannot be approved. `,
            "Reject it, or request changes so that the agent proposes a new destination.",
          )
        : null,
    );

    const otherFacts = otherSealedFacts(rev.canonical_payload);
    const alsoSealed = otherFacts.length
      ? h(
          "section",
          { class: "card", "aria-labelledby": "also-h" },
          h("h2", { id: "also-h" }, "Also sealed"),
          h("dl", { class: "facts", id: "also-sealed" }, otherFacts.map(([label, text]) => [h("dt", {}, label), h("dd", { class: "pre" }, text)])),
        )
      : null;

    const lines = table(
      "Lines",
      [
        { label: "Description" },
        { label: "Quantity", class: "num" },
        { label: "Unit amount", class: "num" },
        { label: "Amount", class: "num" },
      ],
      rev.lines.map((line) => ({
        cells: [
          { value: line.description, class: "pre" },
          { value: fmt.quantity(line.quantity), class: "num" },
          { value: fmt.money(line.unit_amount, rev.currency), class: "num" },
          { value: fmt.money(line.amount, rev.currency), class: "num" },
        ],
      })),
      {
        class: "lines",
        foot: h(
          "tr",
          {},
          h("th", { scope: "row", colspan: "3" }, "Total"),
          h("td", { class: "num total", id: "total" }, fmt.money(rev.total, rev.currency)),
        ),
      },
    );

    const previous = revisions.find((r) => r.number === rev.number - 1);
    const changes = previous ? diffRevisions(previous, rev, names) : [];
    const revisionSection = h(
      "section",
      { class: "card", "aria-labelledby": "rev-h" },
      h("h2", { id: "rev-h" }, `Revision ${rev.number} of ${invoice.revision_count}`),
      previous
        ? changes.length
          ? table(
              `What changed since revision ${previous.number}`,
              [{ label: "Field" }, { label: `Revision ${previous.number}` }, { label: `Revision ${rev.number}` }],
              changes.map((c) => ({ cells: [c.field, { value: c.before, class: "before pre" }, { value: c.after, class: "after pre" }] })),
              { class: "diff" },
            )
          : h("p", {}, `Nothing changed since revision ${previous.number}.`)
        : h("p", {}, "This is the first revision."),
      revisions.length > 1
        ? h(
            "details",
            {},
            h("summary", {}, "All revisions"),
            h(
              "ol",
              { class: "revisions" },
              revisions.map((r) =>
                h("li", {}, `Revision ${r.number}, ${fmt.dateTime(r.created_at)}: ${fmt.money(r.total, r.currency)}, hash `, h("code", {}, fmt.short(r.payload_hash, 16))),
              ),
            ),
          )
        : null,
    );

    const reasoning = h(
      "section",
      { class: "card", "aria-labelledby": "why-h" },
      h("h2", { id: "why-h" }, "The agent's reasoning"),
      h("p", { class: "pre reasoning" }, rev.reasoning),
      h("p", { class: "hint" }, "The reasoning is not part of the sealed payload: it explains, it does not bind."),
    );

    const hashCode = h("code", { id: "payload-hash", class: "hash" }, rev.payload_hash);
    const bytes = h("pre", { id: "canonical-payload", class: "canonical", tabindex: "0" }, rev.canonical_payload);
    const seal = h(
      "section",
      { class: "card", "aria-labelledby": "seal-h" },
      h("h2", { id: "seal-h" }, "The seal"),
      h("p", {}, "A decision names this hash: the SHA-256 of the canonical bytes below. Tauros refuses it if the invoice changed."),
      h("div", { class: "copy-row" }, h("span", {}, "Payload hash "), hashCode, copyButton(rev.payload_hash, "Copy hash", hashCode)),
      h("div", { class: "copy-row" }, h("span", {}, "Canonical bytes"), copyButton(rev.canonical_payload, "Copy bytes", bytes)),
      bytes,
      verifyResult(verify, invoice),
    );

    const history = h(
      "section",
      { class: "card", "aria-labelledby": "hist-h" },
      h("h2", { id: "hist-h" }, "History"),
      decisions.length
        ? h(
            "ul",
            { class: "decisions", id: "decisions" },
            decisions.map((d) => {
              const number = revisions.find((r) => r.id === d.revision_id)?.number;
              return h(
                "li",
                {},
                h("strong", {}, fmt.decision(d.decision)),
                ` revision ${number ?? "?"} by ${who("human", d.approver_id)}, ${fmt.dateTime(d.decided_at)}`,
                d.reason ? [": ", h("q", { class: "pre" }, d.reason)] : "",
              );
            }),
          )
        : h("p", {}, "No decision yet."),
      table(
        "Events (hash-chained)",
        [{ label: "#", class: "num" }, { label: "When" }, { label: "What" }, { label: "Who" }, { label: "Via" }, { label: "Revision", class: "num" }],
        events.map((e) => ({
          cells: [
            { value: String(e.seq), class: "num" },
            h("time", { datetime: e.occurred_at }, fmt.dateTime(e.occurred_at)),
            [
              fmt.action(e.action),
              e.from_state ? ` (${fmt.state(e.from_state)} → ${fmt.state(e.to_state)})` : ` (${fmt.state(e.to_state)})`,
              e.note ? [": ", h("q", { class: "pre" }, e.note)] : "",
            ],
            who(e.actor_kind, e.actor_id),
            e.interface,
            { value: e.revision_id ? String(revisions.find((r) => r.id === e.revision_id)?.number ?? "") : "", class: "num" },
          ],
        })),
        { class: "events" },
      ),
    );

    const decide = decisionPanel({ invoice, rev, me, org, agentName, destinationInactive, fourEyesBlocks });
    const issuingBox = issuingCard(invoice);

    replace(
      main,
      h("p", { class: "crumbs" }, h("a", { href: "#/inbox" }, "← Invoices")),
      h(
        "h1",
        {},
        `Invoice for ${customerName} `,
        h("span", { class: `badge state-${invoice.state}`, id: "invoice-state" }, fmt.state(invoice.state)),
      ),
      flash || null,
      summary,
      h(
        "div",
        { class: "review-grid" },
        h("div", { class: "review-main" }, h("section", { class: "card", "aria-labelledby": "lines-h" }, h("h2", { id: "lines-h" }, "What it asks for"), lines), alsoSealed, revisionSection, reasoning, destinationBox),
        h("div", { class: "review-side" }, issuingBox, decide, seal),
      ),
      history,
    );
  }

  function verifyResult(verify, invoice) {
    if (!verify) return null;
    if (verify.ok) {
      return notice("ok", h("span", { id: "verify" }, `Verified: ${verify.revisions.length === 1 ? "the revision's seal" : `all ${verify.revisions.length} revision seals`} and the event chain hold.`));
    }
    const broken = verify.revisions.filter((r) => !r.ok).map((r) => `revision ${r.number}`);
    const chain = verify.events.ok ? null : `the event chain breaks at event ${verify.events.broken_at}`;
    return notice("error", h("span", { id: "verify" }, `Verification failed for invoice ${invoice.id}: ${[...broken.map((b) => `${b}'s seal does not match`), chain].filter(Boolean).join("; ")}. Do not approve; tell your operator.`));
  }

  /** The invoice's number and where its issuing stands (docs/EFFECTS.md, the runbook). */
  function issuingCard(invoice) {
    const issuing = invoice.issuing;
    if (!issuing && !invoice.number) return null;
    const waits = issuing && ["rejected", "conflict", "needs_review"].includes(issuing.status);
    const kind = !issuing ? "badge-ok" : issuing.status === "pending" ? "" : "badge-warn";
    return h(
      "section",
      { class: "card", "aria-labelledby": "issuing-h" },
      h("h2", { id: "issuing-h" }, "Issuing"),
      h(
        "dl",
        { class: "facts" },
        h("dt", {}, "Number"),
        h("dd", { class: "mono", id: "invoice-number" }, invoice.number ? `${invoice.number}${invoice.number_void ? " (void)" : ""}` : "not yet"),
        issuing ? [h("dt", {}, "Status"), h("dd", {}, h("span", { class: `badge ${kind}`, id: "issuing-status" }, fmt.issuing(issuing.status)))] : null,
        issuing && issuing.reason ? [h("dt", {}, "Why"), h("dd", { class: "pre", id: "issuing-reason" }, issuing.reason)] : null,
        issuing && issuing.job_id
          ? [h("dt", {}, "Job"), h("dd", {}, h("a", { href: `#/jobs/${issuing.job_id}`, id: "issuing-job" }, issuing.attempts ? `attempt ${issuing.attempts}` : "open"))]
          : null,
      ),
      waits
        ? h("p", { class: "hint" }, "Issuing stopped for a human. Fix the cause (or check the issuer), then issue it again under the same number, or cancel it: the number stays on the cancelled invoice, void.")
        : null,
    );
  }

  function decisionPanel({ invoice, rev, me, org, agentName, destinationInactive, fourEyesBlocks }) {
    const panel = h("section", { class: "card decide", "aria-labelledby": "decide-h" }, h("h2", { id: "decide-h" }, "Decide"));
    const message = h("div", { class: "decide-message", id: "decide-message" });
    if (me.role !== "approver") {
      add(panel, h("p", {}, "Only approvers decide on invoices; you are signed in as an operator."));
      return panel;
    }
    if (fourEyesBlocks && ["pending_approval", "approved"].includes(invoice.state)) {
      add(panel, fourEyesNotice(agentName));
      return panel;
    }
    if (invoice.state === "pending_approval") {
      const reason = field(
        "Reason",
        h("textarea", { id: "decision-reason", rows: "3", maxlength: "2000" }),
        "Optional to approve; required to reject or request changes. The agent reads it.",
      );
      const bound = h(
        "p",
        { class: "bound" },
        `Your decision applies to revision ${rev.number}, hash `,
        h("code", { title: rev.payload_hash }, fmt.short(rev.payload_hash, 16)),
        ".",
      );
      const buttons = [];
      const approve = destinationInactive
        ? null
        : h("button", { type: "button", class: "btn btn-primary", id: "approve" }, "Approve");
      const changes = h("button", { type: "button", class: "btn", id: "request-changes" }, "Request changes");
      const reject = h("button", { type: "button", class: "btn btn-danger", id: "reject" }, "Reject");
      if (approve) buttons.push(approve);
      buttons.push(changes, reject);
      const send = (action, needsReason) => async () => {
        if (busy) return; // a double click decides once
        const text = reason.input.value.trim();
        reason.setError(null);
        replace(message);
        if (needsReason && !text) {
          reason.setError("Write a reason: the agent needs to know why.");
          reason.input.focus();
          return;
        }
        const body = { revision_id: shown.revisionId, payload_hash: shown.hash };
        if (text) body.reason = text;
        await command(action, body, buttons, message, (e) => {
          const hint = e.fieldError("reason");
          if (hint) reason.setError(hint);
        });
      };
      approve?.addEventListener("click", send("approve", false));
      changes.addEventListener("click", send("request-changes", true));
      reject.addEventListener("click", send("reject", true));
      add(panel, 
        reason.field,
        bound,
        h("div", { class: "actions" }, buttons),
        destinationInactive ? h("p", { class: "hint" }, "Approve is not offered: the destination no longer receives money.") : null,
        message,
      );
      return panel;
    }
    if (invoice.state === "approved") {
      const reason = field(
        "Reason for cancelling",
        h("textarea", { id: "cancel-reason", rows: "3", maxlength: "2000" }),
        "Required. Cancelling an approved invoice cannot be undone.",
      );
      const cancel = h("button", { type: "button", class: "btn btn-danger", id: "cancel" }, "Cancel invoice");
      cancel.addEventListener("click", async () => {
        if (busy) return;
        const text = reason.input.value.trim();
        reason.setError(null);
        replace(message);
        if (!text) {
          reason.setError("Write why this approved invoice is cancelled.");
          reason.input.focus();
          return;
        }
        await command("cancel", { reason: text }, [cancel], message, (e) => {
          const hint = e.fieldError("reason");
          if (hint) reason.setError(hint);
        });
      });
      // Waiting for a human: a stop (rejected, conflict, needs_review), or pending with a job
      // that stopped (its reason says so; docs/EFFECTS.md, "Pending, but the job stopped").
      const issuing = invoice.issuing;
      const waits = issuing && (["rejected", "conflict", "needs_review"].includes(issuing.status) || (issuing.status === "pending" && issuing.reason));
      const again = waits ? h("button", { type: "button", class: "btn btn-primary", id: "issue-again" }, "Issue again") : null;
      again?.addEventListener("click", async () => {
        if (busy) return;
        busy = true;
        again.disabled = true;
        cancel.disabled = true;
        replace(message, h("p", {}, "Sending…"));
        try {
          const job = await api("POST", `/v1/invoices/${id}/issue`, {});
          const text = job.invoice ? "The invoice is issued." : (issuing.status === "pending" ? "Issuing again: the stopped issue job is queued again." : "Issuing again: the issue job is queued under a new operation version.");
          await refresh(notice("ok", h("span", { id: "flash" }, text)));
          announce(text);
        } catch (e) {
          if (e instanceof ApiError && e.status === 401) return;
          replace(message, notice("error", describe(e)));
        } finally {
          busy = false;
          again.disabled = false;
          cancel.disabled = false;
        }
      });
      const lead = waits
        ? "Issuing stopped for a human. Issue it again once the cause is fixed, or cancel it."
        : "This invoice is approved. You may still cancel it.";
      add(panel, h("p", {}, lead), reason.field, h("div", { class: "actions" }, again, cancel), message);
      return panel;
    }
    const why = {
      draft: "The agent has not submitted this revision for approval: there is nothing to decide yet.",
      rejected: "This invoice was rejected: it is final.",
      cancelled: "This invoice was cancelled: it is final.",
    };
    add(panel, h("p", {}, why[invoice.state] || `Nothing to decide: the invoice is ${fmt.state(invoice.state).toLowerCase()}.`));
    return panel;
  }

  function fourEyesNotice(agentName) {
    return notice(
      "warn",
      h("strong", {}, "Four eyes: another approver must decide. "),
      `Your organisation has four eyes on, and you own ${agentName}, the agent that proposed this invoice. `,
      "Tauros refuses decisions by the agent's owner, so that no one approves their own agent's proposal. ",
      "Ask another approver: with shared review on, every approver sees this invoice.",
    );
  }

  async function command(action, body, buttons, message, onValidation) {
    busy = true;
    for (const b of buttons) b.disabled = true;
    const sentRevision = shown.revisionNumber;
    replace(message, h("p", {}, "Sending…"));
    try {
      const answer = await api("POST", `/v1/invoices/${id}/${action}`, body);
      const inv = answer.invoice;
      const done = {
        approve: `Approved revision ${sentRevision}.`,
        reject: `Rejected revision ${sentRevision}.`,
        "request-changes": `Changes requested on revision ${sentRevision}; the invoice is back with the agent.`,
        cancel: "The invoice is cancelled.",
      }[action];
      const text = `${done}${answer.replayed ? " (It already was: nothing new was recorded.)" : ""}`;
      await refresh(notice("ok", h("span", { id: "flash" }, text), ` State: ${fmt.state(inv.state)}.`));
      announce(text);
    } catch (e) {
      if (!(e instanceof ApiError) || e.status === 401) {
        if (e instanceof ApiError && e.status === 401) return;
        replace(message, notice("error", describe(e)));
        return;
      }
      const changed = {
        stale_revision: `The invoice changed while you were reading it: revision ${sentRevision} is no longer the current one. Nothing was decided. The current revision is shown below, with what changed; read it, then decide.`,
        payload_mismatch: `The hash you saw no longer matches the invoice's current revision. Nothing was decided. The current revision is shown below; read it, then decide.`,
        invalid_transition: `The invoice is no longer waiting for this decision (it changed while the page was open: now ${fmt.state(e.problem.from || "")}). Nothing was decided by you.`,
        already_decided: `Revision ${sentRevision} was already decided by someone else. Nothing was decided by you; the current state is shown below.`,
        destination_inactive: "The destination was retired while the page was open: this invoice cannot be approved. Nothing was decided. Reject it or request changes.",
        payload_integrity: "Tauros found that this revision's stored payload no longer matches its seal: it was altered outside Tauros. Nothing was decided. Tell your operator.",
        revision_already_decided: "This revision was already decided. Nothing new was recorded.",
      }[e.code];
      if (changed) {
        forgetDirectory();
        await refresh(notice("warn", h("span", { id: "changed" }, changed)));
        announce(changed);
        return;
      }
      if (e.code === "four_eyes_required") {
        replace(message, fourEyesNotice(main.querySelector("#summary strong")?.textContent || "the agent"));
        const note = h("p", { class: "hint" }, `Tauros answered: ${describe(e)}`);
        add(message, note);
      } else {
        if (e.code === "validation_failed") onValidation(e);
        replace(message, notice("error", describe(e)));
      }
    } finally {
      busy = false;
      for (const b of buttons) if (b.isConnected) b.disabled = false;
    }
  }

  // Watching: a new revision or a new state shows up without a click.
  let checking = false;
  async function check() {
    if (stopped || busy || checking || !shown || document.hidden) return;
    checking = true;
    try {
      await compare();
    } catch {
      // The next tick tries again; a 401 has already ended the session.
    } finally {
      checking = false;
    }
  }

  async function compare() {
    const invoice = await api("GET", `/v1/invoices/${id}`);
    if (stopped || busy) return;
    const rev = invoice.current_revision;
    if (rev.id !== shown.revisionId || invoice.state !== shown.state) {
      const text =
        rev.id !== shown.revisionId
          ? `This invoice changed while the page was open: the agent sent revision ${rev.number} (you were reading revision ${shown.revisionNumber}). It is shown below with what changed.`
          : `This invoice changed while the page was open: it is now ${fmt.state(invoice.state).toLowerCase()}.`;
      forgetDirectory();
      await refresh(notice("warn", h("span", { id: "changed" }, text)));
      announce(text);
    }
  }

  await refresh(null);
  const timer = setInterval(check, WATCH_INTERVAL_MS);
  const onVisible = () => {
    if (!document.hidden) check();
  };
  document.addEventListener("visibilitychange", onVisible);
  return () => {
    stopped = true;
    clearInterval(timer);
    document.removeEventListener("visibilitychange", onVisible);
  };
}

function parseCanonical(text) {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
