// Agents: the ones you own, their capabilities and keys. A new or rotated key is shown once,
// here, and never again: Tauros keeps only its hash.

import { api, listAll, ApiError, describe, forgetDirectory } from "./api.js";
import { h, replace, notice, table, field, copyButton, announce } from "./dom.js";
import * as fmt from "./format.js";

const CAPABILITIES = [
  ["invoicing", "Invoicing", "customers, destinations and invoices (the default)"],
  ["settlement", "Settlement", "may post settlement events (approvers only; never together with invoicing)"],
];

export async function render(main, context) {
  async function draw(flash) {
    const agents = await listAll("/v1/agents");
    const name = field("Name", h("input", { type: "text", id: "agent-name", maxlength: "160", required: true }));
    const boxes = CAPABILITIES.map(([key, label, hint]) => {
      const input = h("input", { type: "checkbox", id: `cap-${key}`, value: key, checked: key === "invoicing" });
      return { key, input, el: h("div", { class: "check" }, input, h("label", { for: input.id }, label), h("p", { class: "hint" }, hint)) };
    });
    const result = h("div", {});
    const create = h("button", { type: "submit", class: "btn btn-primary", id: "create-agent" }, "Create agent");
    const form = h(
      "form",
      { class: "inline-form", novalidate: true },
      name.field,
      h("fieldset", {}, h("legend", {}, "Capabilities"), boxes.map((b) => b.el)),
      create,
      result,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      name.setError(null);
      replace(result);
      const value = name.input.value.trim();
      if (!value) {
        name.setError("Give the agent a name.");
        name.input.focus();
        return;
      }
      create.disabled = true;
      try {
        const answer = await api("POST", "/v1/agents", {
          name: value,
          capabilities: boxes.filter((b) => b.input.checked).map((b) => b.key),
        });
        forgetDirectory();
        if (answer && answer.change) {
          // Four eyes: granting settlement waits for another approver; once confirmed, the
          // agent is yours without a key, and "Rotate key" here gives you its first one.
          const text = `Proposed: an agent with settlement needs a second approver. Once another approver confirms it, “${value}” appears here without a key; rotate its key to get one.`;
          await draw(notice("info", h("span", { id: "agent-flash" }, text)));
          announce(text);
          return;
        }
        await draw(keyShownOnce(`Agent “${answer.agent.name}” created.`, answer.api_key));
      } catch (e) {
        create.disabled = false;
        if (e instanceof ApiError && e.status === 401) return;
        const hint = e instanceof ApiError ? e.fieldError("name") : null;
        if (hint) name.setError(hint);
        replace(result, notice("error", describe(e)));
      }
    });

    const rows = agents.map((agent) => ({
      dataset: { agentId: agent.id },
      cells: [
        agent.name,
        agent.capabilities.join(", ") || "none",
        agent.key_expires_at ? fmt.dateTime(agent.key_expires_at) : "no key",
        agent.key_last_used_at ? fmt.dateTime(agent.key_last_used_at) : "never",
        rotateControl(agent),
      ],
    }));

    function rotateControl(agent) {
      const box = h("div", { class: "actions" });
      const rotate = h("button", { type: "button", class: "btn btn-small" }, "Rotate key");
      rotate.setAttribute("aria-label", `Rotate the key of ${agent.name}`);
      rotate.addEventListener("click", () => {
        const now = h("button", { type: "button", class: "btn btn-danger btn-small" }, "Rotate now");
        const keep = h("button", { type: "button", class: "btn btn-small" }, "Keep the key");
        const message = h("div", {});
        replace(box, h("p", { class: "hint" }, "The current key stops working at once."), now, keep, message);
        now.focus();
        keep.addEventListener("click", () => {
          replace(box, rotate);
          rotate.focus();
        });
        now.addEventListener("click", async () => {
          now.disabled = true;
          keep.disabled = true;
          try {
            const answer = await api("POST", `/v1/agents/${agent.id}/rotate-key`);
            await draw(keyShownOnce(`New key for “${answer.agent.name}”; every older key has stopped working.`, answer.api_key));
          } catch (e) {
            if (e instanceof ApiError && e.status === 401) return;
            replace(message, notice("error", describe(e)));
            keep.disabled = false;
          }
        });
      });
      box.append(rotate);
      return box;
    }

    replace(
      main,
      h("h1", {}, "Agents"),
      flash || null,
      rows.length
        ? table(
            "Your agents",
            [{ label: "Name" }, { label: "Capabilities" }, { label: "Key expires" }, { label: "Key last used" }, { label: "Key" }],
            rows,
            { class: "agents", rowHeader: true },
          )
        : h("p", { class: "empty" }, "You own no agents yet."),
      h("section", { class: "card", "aria-labelledby": "new-agent-h" }, h("h2", { id: "new-agent-h" }, "New agent"), form),
    );
    if (flash) {
      const key = main.querySelector("#api-key");
      if (key) key.focus();
    }
  }

  function keyShownOnce(message, key) {
    const code = h("code", { id: "api-key", class: "secret", tabindex: "0" }, key);
    announce(`${message} Its API key is shown once.`);
    return notice(
      "ok",
      h("p", {}, message),
      h("p", {}, h("strong", {}, "API key, shown only this once: "), "give it to the agent now. Tauros keeps only its hash and cannot show it again."),
      h("div", { class: "copy-row" }, code, copyButton(key, "Copy key", code)),
    );
  }

  await draw(null);
}
