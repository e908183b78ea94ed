// Customers of the agents you own: create, correct, delete.

import { api, listAll, ApiError, describe, forgetDirectory } from "./api.js";
import { h, replace, notice, table, field, announce } from "./dom.js";

export async function render(main, context) {
  async function draw(flash) {
    const [customers, agents] = await Promise.all([listAll("/v1/customers"), listAll("/v1/agents")]);
    const agentName = new Map(agents.map((a) => [a.id, a.name]));

    const agent = field(
      "Agent",
      h("select", { id: "customer-agent", required: true }, agents.map((a) => h("option", { value: a.id }, a.name))),
      "The agent that bills this customer.",
    );
    const name = field("Name", h("input", { type: "text", id: "customer-name", maxlength: "160", required: true }));
    const email = field("Email", h("input", { type: "email", id: "customer-email", maxlength: "254", required: true }));
    const result = h("div", {});
    const create = h("button", { type: "submit", class: "btn btn-primary", id: "create-customer" }, "Add customer");
    const form = h("form", { class: "inline-form", novalidate: true }, agent.field, name.field, email.field, create, result);
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      for (const f of [agent, name, email]) f.setError(null);
      replace(result);
      const body = { agent_id: agent.input.value, name: name.input.value.trim(), email: email.input.value.trim() };
      let missing = false;
      if (!body.name) {
        name.setError("Enter the customer's name.");
        missing = true;
      }
      if (!body.email) {
        email.setError("Enter the customer's billing email.");
        missing = true;
      }
      if (missing) return;
      create.disabled = true;
      try {
        const created = await api("POST", "/v1/customers", body);
        forgetDirectory();
        const text = `Customer “${created.name}” added.`;
        await draw(notice("ok", h("span", { id: "customers-flash" }, text)));
        announce(text);
      } catch (e) {
        create.disabled = false;
        if (e instanceof ApiError && e.status === 401) return;
        if (e instanceof ApiError) {
          for (const [key, f] of [["agent_id", agent], ["name", name], ["email", email]]) f.setError(e.fieldError(key));
        }
        replace(result, notice("error", describe(e)));
      }
    });

    const rows = customers.map((customer) => ({
      dataset: { customerId: customer.id },
      cells: [customer.name, customer.email, agentName.get(customer.agent_id) || customer.agent_id, controls(customer)],
    }));

    function controls(customer) {
      const box = h("div", { class: "actions" });
      const edit = h("button", { type: "button", class: "btn btn-small", "aria-label": `Edit ${customer.name}` }, "Edit");
      const remove = h("button", { type: "button", class: "btn btn-small", "aria-label": `Delete ${customer.name}` }, "Delete");
      const message = h("div", {});
      edit.addEventListener("click", () => {
        const n = field("Name", h("input", { type: "text", maxlength: "160", value: customer.name }));
        const m = field("Email", h("input", { type: "email", maxlength: "254", value: customer.email }));
        const save = h("button", { type: "submit", class: "btn btn-primary btn-small" }, "Save");
        const back = h("button", { type: "button", class: "btn btn-small" }, "Cancel");
        const f = h("form", { class: "edit-form", novalidate: true }, n.field, m.field, h("div", { class: "actions" }, save, back), message);
        back.addEventListener("click", () => draw(null));
        f.addEventListener("submit", async (event) => {
          event.preventDefault();
          save.disabled = true;
          try {
            await api("PATCH", `/v1/customers/${customer.id}`, { name: n.input.value.trim(), email: m.input.value.trim() });
            forgetDirectory();
            await draw(notice("ok", h("span", { id: "customers-flash" }, "Customer saved.")));
          } catch (e) {
            save.disabled = false;
            if (e instanceof ApiError && e.status === 401) return;
            if (e instanceof ApiError) {
              n.setError(e.fieldError("name"));
              m.setError(e.fieldError("email"));
            }
            replace(message, notice("error", describe(e)));
          }
        });
        replace(box, f);
        n.input.focus();
      });
      remove.addEventListener("click", () => {
        const now = h("button", { type: "button", class: "btn btn-danger btn-small" }, "Delete now");
        const keep = h("button", { type: "button", class: "btn btn-small" }, "Keep");
        replace(box, h("p", { class: "hint" }, `Delete ${customer.name}?`), now, keep, message);
        now.focus();
        keep.addEventListener("click", () => draw(null));
        now.addEventListener("click", async () => {
          now.disabled = true;
          try {
            await api("DELETE", `/v1/customers/${customer.id}`);
            forgetDirectory();
            await draw(notice("ok", h("span", { id: "customers-flash" }, "Customer deleted.")));
          } catch (e) {
            now.disabled = false;
            if (e instanceof ApiError && e.status === 401) return;
            const text = e instanceof ApiError && e.code === "has_dependents" ? "An invoice names this customer, so it stays." : describe(e);
            replace(message, notice("error", text));
          }
        });
      });
      box.append(edit, remove, message);
      return box;
    }

    replace(
      main,
      h("h1", {}, "Customers"),
      flash || null,
      rows.length
        ? table("Customers of your agents", [{ label: "Name" }, { label: "Email" }, { label: "Agent" }, { label: "Actions" }], rows, {
            class: "customers",
            rowHeader: true,
          })
        : h("p", { class: "empty" }, "No customers yet."),
      agents.length
        ? h("section", { class: "card", "aria-labelledby": "new-cust-h" }, h("h2", { id: "new-cust-h" }, "New customer"), form)
        : notice("info", "Create an agent first: every customer belongs to an agent."),
    );
    if (flash) context.focusHeading();
  }

  await draw(null);
}
