// The organisation: its settings (four eyes, shared review) and the proposals that wait for a
// second approver. While four eyes is on, turning it off is a proposal (202): a different
// approver confirms it here (POST /v1/organisation/changes/{id}/confirm) or rejects it.

import { api, loadDirectory, ApiError, describe, forgetDirectory } from "./api.js";
import { h, replace, notice, table, announce } from "./dom.js";
import * as fmt from "./format.js";

export async function render(main, context) {
  const { me } = context;
  const approver = me.role === "approver";

  async function draw(flash) {
    const [org, pending, dir] = await Promise.all([
      api("GET", "/v1/organisation"),
      approver ? api("GET", "/v1/organisation/changes?state=pending&limit=100") : Promise.resolve({ items: [] }),
      loadDirectory(),
    ]);
    const fourEyes = h("input", { type: "checkbox", id: "four-eyes", checked: org.four_eyes, disabled: !approver });
    const shared = h("input", { type: "checkbox", id: "shared-review", checked: org.shared_review, disabled: !approver });
    const result = h("div", { id: "settings-result" });
    const save = h("button", { type: "submit", class: "btn btn-primary", id: "save-settings" }, "Save settings");
    const form = h(
      "form",
      { class: "settings", novalidate: true },
      h(
        "fieldset",
        {},
        h("legend", {}, "Separation of duties"),
        h(
          "div",
          { class: "check" },
          fourEyes,
          h("label", { for: "four-eyes" }, h("strong", {}, "Four eyes")),
          h(
            "p",
            { class: "hint" },
            "An approver may not decide on invoices proposed by an agent they own. Turning it on is immediate; turning it off while it is on needs a second approver to confirm.",
          ),
        ),
        h(
          "div",
          { class: "check" },
          shared,
          h("label", { for: "shared-review" }, h("strong", {}, "Shared review")),
          h(
            "p",
            { class: "hint" },
            "Approvers see and decide on the invoices of every agent in the organisation, not only their own agents'. With four eyes on, this is how another approver gets to decide.",
          ),
        ),
      ),
      approver ? save : h("p", { class: "hint" }, "Only approvers change settings."),
      result,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      const body = {};
      if (fourEyes.checked !== org.four_eyes) body.four_eyes = fourEyes.checked;
      if (shared.checked !== org.shared_review) body.shared_review = shared.checked;
      if (!Object.keys(body).length) {
        replace(result, notice("info", "Nothing changed."));
        return;
      }
      save.disabled = true;
      try {
        const answer = await api("PATCH", "/v1/organisation", body);
        if (answer && answer.change) {
          const text =
            "Proposed: turning four eyes off needs a second approver. Nothing changes until another approver confirms this proposal.";
          await draw(notice("info", h("span", { id: "settings-flash" }, text)));
          announce(text);
        } else {
          const text = "Settings saved.";
          await draw(notice("ok", h("span", { id: "settings-flash" }, text)));
          announce(text);
        }
      } catch (e) {
        save.disabled = false;
        if (e instanceof ApiError && e.status === 401) return;
        replace(result, notice("error", describe(e)));
      }
    });

    const proposals = approver
      ? h(
          "section",
          { class: "card", "aria-labelledby": "prop-h" },
          h("h2", { id: "prop-h" }, "Proposals waiting for a second approver"),
          pending.items.length
            ? table(
                "Pending proposals",
                [{ label: "Proposal" }, { label: "Proposed by" }, { label: "Expires" }, { label: "Action" }],
                pending.items.map((change) => ({
                  dataset: { changeId: change.id },
                  cells: [describeChange(change, dir), proposer(change, me, dir), fmt.dateTime(change.expires_at), actions(change)],
                })),
                { class: "proposals" },
              )
            : h("p", { id: "no-proposals" }, "No proposal is waiting."),
        )
      : null;

    function actions(change) {
      const own = change.proposed_by === me.id;
      const out = h("div", { class: "actions" });
      const message = h("div", {});
      const confirm = own ? null : h("button", { type: "button", class: "btn btn-primary btn-small" }, "Confirm");
      const reject = h("button", { type: "button", class: "btn btn-small" }, own ? "Withdraw" : "Reject");
      const decide = (verb) => async () => {
        for (const b of [confirm, reject]) if (b) b.disabled = true;
        try {
          await api("POST", `/v1/organisation/changes/${change.id}/${verb}`);
          forgetDirectory();
          const text = verb === "confirm" ? "Proposal confirmed: the change is in force." : "Proposal rejected: nothing changed.";
          await draw(notice("ok", h("span", { id: "settings-flash" }, text)));
          announce(text);
        } catch (e) {
          for (const b of [confirm, reject]) if (b) b.disabled = false;
          if (e instanceof ApiError && e.status === 401) return;
          replace(message, notice("error", describe(e)));
        }
      };
      confirm?.addEventListener("click", decide("confirm"));
      reject.addEventListener("click", decide("reject"));
      if (own) out.append(h("p", { class: "hint" }, "You proposed this: another approver must confirm it."));
      if (confirm) out.append(confirm);
      out.append(reject, message);
      return out;
    }

    replace(
      main,
      h("h1", {}, `Organisation: ${org.name}`),
      flash || null,
      h("section", { class: "card", "aria-labelledby": "set-h" }, h("h2", { id: "set-h" }, "Settings"), form),
      proposals,
    );
    if (flash) context.focusHeading();
  }

  await draw(null);
}

function describeChange(change, dir) {
  if (change.kind === "settings") {
    const parts = [];
    if (change.four_eyes !== null && change.four_eyes !== undefined) parts.push(`four eyes ${change.four_eyes ? "on" : "off"}`);
    if (change.shared_review !== null && change.shared_review !== undefined) parts.push(`shared review ${change.shared_review ? "on" : "off"}`);
    return `Settings: ${parts.join(", ") || "(no change)"}`;
  }
  if (change.kind === "payment_resolution") {
    // What it would do (action, amount, invoice, reason) is on the payment's page.
    return h("span", {}, "Resolve a payment: ", h("a", { href: `#/payments/${change.payment_id}`, class: "change-payment" }, "see what it asks for"));
  }
  if (change.kind === "settlement_agent") {
    return `Create the settlement agent “${change.agent_name}”` + (change.agent_id ? " (created)" : "");
  }
  if (change.kind === "approver_deactivation") {
    return `Deactivate the approver ${dir.users.get(change.user_id)?.email || fmt.short(change.user_id, 8)}`;
  }
  return `Invite ${change.email} as ${change.role}`;
}

function proposer(change, me, dir) {
  if (change.proposed_by === me.id) return `you (${me.email})`;
  return dir.users.get(change.proposed_by)?.email || fmt.short(change.proposed_by, 8);
}
