// Sign-in: email and password (and, for an email with accounts in several organisations, which
// one) → POST /v1/sessions → a session token for this tab. The device token this browser keeps
// for the email goes along (api.js, "Device tokens").

import { api, startSession, deviceToken, ApiError, describe } from "./api.js";
import { h, replace, notice, field } from "./dom.js";

const MESSAGES = {
  expired: "Your session has ended (it expired, or it was signed out elsewhere). Sign in again to continue.",
  signed_out: "You are signed out.",
};

export function render(main, { message, onSignedIn }) {
  const email = field("Email", h("input", { type: "email", name: "email", autocomplete: "username", required: true }));
  const password = field(
    "Password",
    h("input", { type: "password", name: "password", autocomplete: "current-password", required: true }),
  );
  const organisation = field(
    "Organisation (optional)",
    h("input", { type: "text", name: "organisation", autocomplete: "organization", maxlength: "160" }),
    "Only if your email has accounts in several organisations: the one to sign in to.",
  );
  const result = h("div", { id: "signin-result" });
  const submit = h("button", { type: "submit", class: "btn btn-primary" }, "Sign in");
  const form = h(
    "form",
    { class: "signin-form", novalidate: true },
    email.field,
    password.field,
    organisation.field,
    result,
    submit,
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    email.setError(null);
    password.setError(null);
    replace(result);
    const body = { email: email.input.value.trim(), password: password.input.value };
    const named = organisation.input.value.trim();
    if (named) body.organisation = named;
    const device = body.email ? deviceToken(body.email) : null;
    if (device) body.device_token = device;
    if (!body.email) email.setError("Enter your email.");
    if (!body.password) password.setError("Enter your password.");
    if (!body.email || !body.password) {
      (body.email ? password.input : email.input).focus();
      return;
    }
    submit.disabled = true;
    submit.textContent = "Signing in…";
    try {
      const answer = await api("POST", "/v1/sessions", body);
      startSession(answer);
      onSignedIn();
    } catch (e) {
      submit.disabled = false;
      submit.textContent = "Sign in";
      const text =
        e instanceof ApiError && e.code === "invalid_credentials"
          ? "That email and password do not match an active account."
          : describe(e);
      replace(result, notice("error", text));
      password.input.focus();
    }
  });
  replace(
    main,
    h(
      "section",
      { class: "signin" },
      h("h1", {}, "Sign in to Tauros"),
      h("p", { class: "lede" }, "Review what your agents propose, and decide."),
      message ? notice(message === "expired" ? "warn" : "info", MESSAGES[message] || message) : null,
      form,
    ),
  );
  email.input.focus();
}
