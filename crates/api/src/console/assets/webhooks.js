// Webhook endpoints (approvers): register one (its signing secret is shown once, here, and
// never again), rotate its secret (shown once too), delete it, and read its delivery attempts
// (GET /v1/webhook-endpoints/{id}/deliveries). No dead ends: a disabled endpoint (it failed
// without a success for the server's disable window) is marked, with Re-enable
// (POST …/enable), a failed delivery (its attempts used up) has Resend and a delivered one
// Send again, confirmed first (POST …/deliveries/{delivery_id}/resend).

import { api, listAll, ApiError, describe } from "./api.js";
import { h, replace, notice, table, field, copyButton, announce, pager, facts } from "./dom.js";
import * as fmt from "./format.js";

const PAGE_SIZE = 25;

/** The event types an endpoint may receive, as the API documents them (the WebhookEventType
 * schema of /openapi.json), so the page never offers one the API does not know. */
let eventTypes = null;
async function loadEventTypes() {
  if (eventTypes) return eventTypes;
  const doc = await api("GET", "/openapi.json");
  const values = doc?.components?.schemas?.WebhookEventType?.enum;
  if (!Array.isArray(values) || values.length === 0) throw new Error("the API documents no webhook event types");
  eventTypes = values;
  return eventTypes;
}

export async function render(main, context) {
  if (context.args[0]) return renderOne(main, context.args[0], context);
  return renderList(main, context);
}

/** The secret of a new or rotated endpoint: shown this once, with a copy button. */
function secretShownOnce(message, secret) {
  const code = h("code", { id: "webhook-secret", class: "secret", tabindex: "0" }, secret);
  announce(`${message} Its signing secret is shown once.`);
  return notice(
    "warn",
    h("p", {}, message),
    h(
      "p",
      {},
      h("strong", {}, "Signing secret, shown only this once: "),
      "store it in the receiving system now. Tauros cannot show it again; if it is lost, rotate it.",
    ),
    h("div", { class: "copy-row" }, code, copyButton(secret, "Copy secret", code)),
  );
}

async function renderList(main, context) {
  async function draw(flash) {
    const [endpoints, types] = await Promise.all([listAll("/v1/webhook-endpoints"), loadEventTypes()]);

    const url = field(
      "URL",
      h("input", { type: "url", id: "webhook-url", maxlength: "2000", required: true }),
      "Where deliveries are POSTed: an http or https URL whose host has public addresses only (unless the server's operator allow-lists it).",
    );
    const description = field("Description", h("input", { type: "text", id: "webhook-description", maxlength: "200" }), "A note for humans (optional).");
    const boxes = types.map((type) => {
      const input = h("input", { type: "checkbox", id: `event-${type.replace(/[^a-z0-9]+/g, "-")}`, value: type });
      return { type, input, el: h("div", { class: "check" }, input, h("label", { for: input.id, class: "mono" }, type)) };
    });
    const eventsError = h("p", { class: "field-error", id: "webhook-events-error", hidden: true });
    const result = h("div", {});
    const create = h("button", { type: "submit", class: "btn btn-primary", id: "create-webhook" }, "Register endpoint");
    const form = h(
      "form",
      { class: "inline-form", novalidate: true },
      url.field,
      h("fieldset", { "aria-describedby": eventsError.id }, h("legend", {}, "Events to deliver"), boxes.map((b) => b.el), eventsError),
      description.field,
      create,
      result,
    );
    form.addEventListener("submit", async (event) => {
      event.preventDefault();
      url.setError(null);
      description.setError(null);
      eventsError.hidden = true;
      replace(result);
      const body = { url: url.input.value.trim(), events: boxes.filter((b) => b.input.checked).map((b) => b.type) };
      const note = description.input.value.trim();
      if (note) body.description = note;
      let missing = false;
      if (!body.url) {
        url.setError("Enter the URL deliveries go to.");
        missing = true;
      }
      if (body.events.length === 0) {
        eventsError.textContent = "Choose at least one event type.";
        eventsError.hidden = false;
        missing = true;
      }
      if (missing) {
        (body.url ? boxes[0].input : url.input).focus();
        return;
      }
      create.disabled = true;
      try {
        const answer = await api("POST", "/v1/webhook-endpoints", body);
        await draw(secretShownOnce(`Endpoint ${answer.endpoint.url} registered.`, answer.secret));
      } catch (e) {
        create.disabled = false;
        if (e instanceof ApiError && e.status === 401) return;
        if (e instanceof ApiError) {
          url.setError(e.fieldError("url"));
          description.setError(e.fieldError("description"));
        }
        replace(result, notice("error", describe(e)));
      }
    });

    const rows = endpoints.map((endpoint) => ({
      dataset: { endpointId: endpoint.id, status: endpoint.status },
      cells: [
        h("a", { href: `#/webhooks/${endpoint.id}`, class: "row-link url" }, endpoint.url),
        statusBadge(endpoint),
        h("span", { class: "events" }, endpoint.events.join(", ")),
        endpoint.description || "",
        { value: fmt.dateTime(endpoint.secret_rotated_at || endpoint.created_at), class: "num" },
        controls(endpoint),
      ],
    }));

    function controls(endpoint) {
      const box = h("div", { class: "actions" });
      const rotate = h("button", { type: "button", class: "btn btn-small", "aria-label": `Rotate the secret of ${endpoint.url}` }, "Rotate secret");
      const remove = h("button", { type: "button", class: "btn btn-small", "aria-label": `Delete ${endpoint.url}` }, "Delete");
      const message = h("div", {});
      const confirmStep = (text, nowLabel, run) => {
        const now = h("button", { type: "button", class: "btn btn-danger btn-small" }, nowLabel);
        const keep = h("button", { type: "button", class: "btn btn-small" }, "Keep it");
        replace(box, h("p", { class: "hint" }, text), now, keep, message);
        now.focus();
        keep.addEventListener("click", () => draw(null));
        now.addEventListener("click", async () => {
          now.disabled = true;
          keep.disabled = true;
          try {
            await run();
          } catch (e) {
            if (e instanceof ApiError && e.status === 401) return;
            replace(message, notice("error", describe(e)));
            keep.disabled = false;
          }
        });
      };
      rotate.addEventListener("click", () =>
        confirmStep("The current secret stops signing at once: every later delivery is signed with the new one.", "Rotate now", async () => {
          const answer = await api("POST", `/v1/webhook-endpoints/${endpoint.id}/rotate-secret`);
          await draw(secretShownOnce(`New secret for ${answer.endpoint.url}; the old one no longer signs.`, answer.secret));
        }),
      );
      remove.addEventListener("click", () =>
        confirmStep(`Delete ${endpoint.url}? Its waiting deliveries are cancelled and its attempts forgotten.`, "Delete now", async () => {
          await api("DELETE", `/v1/webhook-endpoints/${endpoint.id}`);
          const text = "Endpoint deleted.";
          await draw(notice("ok", h("p", { id: "webhooks-flash" }, text)));
          announce(text);
        }),
      );
      if (endpoint.status === "disabled") {
        box.append(
          enableButton(endpoint, message, async (answer) => {
            const text = reEnabledText(answer, endpoint.held_deliveries);
            await draw(notice("ok", h("p", { id: "webhooks-flash" }, text)));
            announce(text);
          }),
        );
      }
      box.append(rotate, remove, message);
      return box;
    }

    replace(
      main,
      h("h1", {}, "Webhook endpoints"),
      flash || null,
      h(
        "p",
        { class: "lede" },
        "Every invoice event of a type an endpoint lists is POSTed to it, signed with its secret, and retried until it answers 2xx. An endpoint that keeps failing is disabled: its deliveries are held until you re-enable it.",
      ),
      rows.length
        ? table(
            "Your organisation's endpoints",
            [{ label: "URL" }, { label: "Status" }, { label: "Events" }, { label: "Description" }, { label: "Secret since", class: "num" }, { label: "Actions" }],
            rows,
            { class: "webhooks", rowHeader: true },
          )
        : h("p", { class: "empty" }, "No webhook endpoints yet."),
      h("section", { class: "card", "aria-labelledby": "new-webhook-h" }, h("h2", { id: "new-webhook-h" }, "New endpoint"), form),
    );
    const secret = main.querySelector("#webhook-secret");
    if (secret) secret.focus();
    else if (flash) context.focusHeading();
  }

  await draw(null);
  return null;
}

/** "Active", or "Disabled" with how many deliveries it holds. */
function statusBadge(endpoint) {
  if (endpoint.status !== "disabled") return h("span", { class: "badge badge-ok endpoint-status" }, "Active");
  const held = endpoint.held_deliveries;
  return h(
    "span",
    { class: "endpoint-status" },
    h("span", { class: "badge badge-warn" }, "Disabled"),
    " ",
    `${held} ${held === 1 ? "delivery" : "deliveries"} held`,
  );
}

function reEnabledText(answer, held) {
  const sent = held === 1 ? "1 held delivery goes out again" : `${held} held deliveries go out again`;
  return `${answer.url} is enabled again: ${sent}.`;
}

/** Re-enable (POST …/enable): a fresh failure window, and the held deliveries go out. */
function enableButton(endpoint, message, done) {
  const button = h(
    "button",
    { type: "button", class: "btn btn-primary btn-small", id: `enable-${endpoint.id}`, "aria-label": `Re-enable ${endpoint.url}` },
    "Re-enable",
  );
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const answer = await api("POST", `/v1/webhook-endpoints/${endpoint.id}/enable`);
      await done(answer);
    } catch (e) {
      button.disabled = false;
      if (e instanceof ApiError && e.status === 401) return;
      replace(message, notice("error", describe(e)));
    }
  });
  return button;
}

/** A delivery's status, as a badge. */
function deliveryBadge(status) {
  const label = { pending: "Pending", held: "Held", delivered: "Delivered", failed: "Failed" }[status] || status;
  const tone = status === "delivered" ? "badge-ok" : "badge-warn";
  return h("span", { class: `badge ${tone} delivery-status` }, label);
}

/** A 409 from a resend, in plain words. */
function resendRefusal(e) {
  if (e instanceof ApiError && e.code === "endpoint_disabled") {
    return "The endpoint is disabled: re-enable it first; that sends its held deliveries. (endpoint_disabled)";
  }
  return describe(e);
}

async function renderOne(main, id, { params, focusHeading }) {
  const cursor = params.get("cursor");
  const query = new URLSearchParams({ limit: String(PAGE_SIZE) });
  if (cursor) query.set("cursor", cursor);

  async function draw(flash) {
    const [endpoint, page] = await Promise.all([
      api("GET", `/v1/webhook-endpoints/${id}`),
      api("GET", `/v1/webhook-endpoints/${id}/deliveries?${query}`),
    ]);
    const message = h("div", { id: "webhook-message" });
    // The newest attempt of each delivery carries its Resend (the list is newest first).
    const offered = new Set();
    const rows = page.items.map((attempt) => {
      let action = null;
      const status = attempt.delivery_status;
      if ((status === "failed" || status === "delivered") && !offered.has(attempt.delivery_id)) {
        offered.add(attempt.delivery_id);
        // A delivered one is sent again only when its receiver lost it: the approver confirms.
        const label = status === "failed" ? "Resend" : "Send again";
        action = h(
          "button",
          {
            type: "button",
            class: "btn btn-small resend",
            "data-delivery-id": attempt.delivery_id,
            "aria-label": `${label} ${attempt.event_type} (event ${attempt.event_id})`,
          },
          label,
        );
        action.addEventListener("click", async () => {
          if (
            status === "delivered" &&
            !window.confirm(
              `The endpoint took ${attempt.event_type} already (it answered 2xx). Send it again with the same webhook-id? Do this only if the receiver lost it.`,
            )
          ) {
            return;
          }
          action.disabled = true;
          try {
            const answer = await api("POST", `/v1/webhook-endpoints/${id}/deliveries/${attempt.delivery_id}/resend`);
            const text = `${answer.event_type} resent with the same webhook-id (${answer.event_id}): attempt cycle ${answer.cycle} is ${answer.status}.`;
            await draw(notice("ok", h("p", { id: "webhooks-flash" }, text)));
            announce(text);
          } catch (e) {
            action.disabled = false;
            if (e instanceof ApiError && e.status === 401) return;
            replace(message, notice("error", resendRefusal(e)));
          }
        });
      }
      return {
        dataset: { attemptId: attempt.id, deliveryId: attempt.delivery_id },
        cells: [
          { value: fmt.dateTime(attempt.attempted_at), class: "num" },
          h("span", { class: "mono" }, attempt.event_type),
          { value: String(attempt.attempt), class: "num" },
          attempt.delivered
            ? h("span", { class: "badge badge-ok" }, `Delivered (${attempt.status_code})`)
            : h(
                "span",
                {},
                h("span", { class: "badge badge-warn" }, attempt.status_code !== null ? `HTTP ${attempt.status_code}` : attempt.error_kind || "failed"),
                attempt.error ? [" ", attempt.error] : null,
              ),
          { value: `${attempt.duration_ms} ms`, class: "num" },
          { value: attempt.next_retry_at ? fmt.dateTime(attempt.next_retry_at) : "", class: "num" },
          h("span", { class: "actions" }, deliveryBadge(attempt.delivery_status), action ? [" ", action] : null),
          h("a", { href: `#/jobs/${attempt.job_id}`, "aria-label": `The delivery job of attempt ${attempt.attempt} of ${attempt.event_type}` }, "Job"),
        ],
      };
    });
    const disabled = endpoint.status === "disabled";
    replace(
      main,
      h("p", { class: "crumbs" }, h("a", { href: "#/webhooks" }, "← Webhook endpoints")),
      h("h1", { class: "url" }, endpoint.url),
      flash || null,
      disabled
        ? notice(
            "warn",
            h(
              "p",
              { id: "endpoint-disabled" },
              `Disabled ${fmt.dateTime(endpoint.disabled_at)}: it failed without a single success since ${fmt.dateTime(endpoint.failing_since)}. `,
              `${endpoint.held_deliveries} ${endpoint.held_deliveries === 1 ? "delivery is" : "deliveries are"} held, not sent. `,
              "Fix the receiver, then re-enable it: the held deliveries go out again, each with a fresh budget of attempts.",
            ),
            h(
              "div",
              { class: "actions" },
              enableButton(endpoint, message, async (answer) => {
                const text = reEnabledText(answer, endpoint.held_deliveries);
                await draw(notice("ok", h("p", { id: "webhooks-flash" }, text)));
                announce(text);
              }),
            ),
          )
        : null,
      message,
      h(
        "section",
        { class: "card", "aria-labelledby": "endpoint-h" },
        h("h2", { id: "endpoint-h" }, "The endpoint"),
        facts([
          ["Status", statusBadge(endpoint)],
          ["Events", endpoint.events.join(", ")],
          ["Description", endpoint.description],
          ["Timeout", `${endpoint.timeout_seconds} s`],
          ["Registered", fmt.dateTime(endpoint.created_at)],
          ["Last success", endpoint.last_success_at ? fmt.dateTime(endpoint.last_success_at) : "none yet"],
          ["Failing since", endpoint.failing_since ? fmt.dateTime(endpoint.failing_since) : "—"],
          ["Secret rotated", endpoint.secret_rotated_at ? fmt.dateTime(endpoint.secret_rotated_at) : "never"],
        ]),
        h("p", { class: "hint" }, "The signing secret is never shown again: rotate it on the endpoints page for a new one."),
      ),
      rows.length
        ? table(
            "Delivery attempts, newest first",
            [
              { label: "Attempted", class: "num" },
              { label: "Event" },
              { label: "Attempt", class: "num" },
              { label: "Result" },
              { label: "Duration", class: "num" },
              { label: "Next retry", class: "num" },
              { label: "Delivery" },
              { label: "Job" },
            ],
            rows,
            { class: "deliveries" },
          )
        : h("p", { class: "empty" }, "No delivery attempts yet: they appear when an invoice event of a listed type happens."),
      h(
        "p",
        { class: "hint" },
        "A failed delivery used up its attempts (or its job was cancelled): Resend sends it again with the same webhook-id, so a receiver that got it after all drops the copy. Send again repeats a delivered one, for a receiver that lost it (restored from a backup).",
      ),
      pager(`#/webhooks/${id}`, cursor, page.next_cursor),
    );
    if (flash && focusHeading) focusHeading();
  }

  await draw(null);
  return null;
}
