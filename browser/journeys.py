"""The approver console in a real browser: journeys of a human at the page while an agent
works through the REST API, against a live `tauros serve --demo` (scripts/browser starts it).

Each journey gets a fresh browser context (so a fresh tab session) and fails on any failed
expectation, any script error and any Content-Security-Policy violation the page reports.

    python journeys.py --url URL --agent-key KEY --email E --password P --label sqlite
    python journeys.py ... --screenshots DIR     # only the pictures for docs/
"""

import argparse
import datetime
import json
import re
import sys
import time
import traceback
import urllib.error
import urllib.request
import uuid

from playwright.sync_api import Browser, Page, expect, sync_playwright

CHROMIUM = "/usr/bin/chromium"
expect.set_options(timeout=10_000)


class Api:
    """The REST API, as the agent or as a human: what the tests do behind the page's back."""

    def __init__(self, base: str):
        self.base = base

    def call(self, method, path, token=None, body=None, headers=None):
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(self.base + path, data=data, method=method)
        if body is not None:
            request.add_header("Content-Type", "application/json")
        if token:
            request.add_header("Authorization", f"Bearer {token}")
        for name, value in (headers or {}).items():
            request.add_header(name, value)
        try:
            with urllib.request.urlopen(request) as response:
                text = response.read().decode()
                return response.status, (json.loads(text) if text else None)
        except urllib.error.HTTPError as error:
            text = error.read().decode()
            return error.code, (json.loads(text) if text else None)

    def ok(self, method, path, token=None, body=None, headers=None):
        status, answer = self.call(method, path, token, body, headers)
        assert 200 <= status < 300, f"{method} {path}: {status} {answer}"
        return answer

    def sign_in(self, email, password):
        return self.ok("POST", "/v1/sessions", body={"email": email, "password": password})["token"]


class World:
    """The demo server and what the journeys share."""

    def __init__(self, args):
        self.url = args.url
        self.console = args.url + "/console/"
        self.api = Api(args.url)
        self.agent_key = args.agent_key
        self.email = args.email
        self.password = args.password
        self.label = args.label
        self.approver = self.api.sign_in(self.email, self.password)
        customers = self.api.ok("GET", "/v1/customers", self.agent_key)["items"]
        self.customers = {c["name"]: c for c in customers}
        destinations = self.api.ok("GET", "/v1/payment-destinations?state=active", self.agent_key)["items"]
        self.eur = next(d for d in destinations if d["currency"] == "EUR")
        self.usdc = next(d for d in destinations if d["currency"] == "USDC")
        self.due = (datetime.datetime.now(datetime.timezone.utc).date() + datetime.timedelta(days=30)).isoformat()

    def propose(self, customer="Acme Inc", destination=None, lines=None, submit=True):
        """The demo agent drafts (and submits) an invoice, EUR unless the destination says
        otherwise; returns it."""
        destination = destination or self.eur
        body = {
            "customer_id": self.customers[customer]["id"],
            "payment_destination_id": destination["id"],
            "currency": destination["currency"],
            "due_date": self.due,
            "lines": lines or [{"description": "Consulting", "quantity": "3", "unit_amount": "400.00"}],
            "reasoning": "Agreed in the statement of work.",
        }
        key = f"browser-{uuid.uuid4()}"
        invoice = self.api.ok("POST", "/v1/invoices", self.agent_key, body, {"Idempotency-Key": key})["invoice"]
        if submit:
            invoice = self.api.ok("POST", f"/v1/invoices/{invoice['id']}/submit", self.agent_key)["invoice"]
        return invoice

    def revise(self, invoice_id, lines, submit):
        body = {"reasoning": "The customer asked for one more day.", "lines": lines}
        invoice = self.api.ok("POST", f"/v1/invoices/{invoice_id}/revise", self.agent_key, body)["invoice"]
        if submit:
            invoice = self.api.ok("POST", f"/v1/invoices/{invoice_id}/submit", self.agent_key)["invoice"]
        return invoice

    def decisions(self, invoice_id):
        return self.api.ok("GET", f"/v1/invoices/{invoice_id}/decisions", self.approver)["items"]

    def invoice(self, invoice_id):
        return self.api.ok("GET", f"/v1/invoices/{invoice_id}", self.approver)


class Journey:
    """One browser context; collects what the page reports that a journey must never see."""

    def __init__(self, browser: Browser, world: World, **context):
        options = {"viewport": {"width": 1280, "height": 900}, "locale": "en-US"}
        options.update(context)
        self.context = browser.new_context(**options)
        self.world = world
        self.problems = []

    def page(self, clock=False) -> Page:
        page = self.context.new_page()
        page.on("pageerror", lambda error: self.problems.append(f"script error: {error}"))

        def console(message):
            text = message.text
            # A refused request is logged by Chromium for every 4xx; the journeys cause those
            # on purpose (409, 403, 401). Everything else logged as an error is a failure.
            if message.type == "error" and not text.startswith("Failed to load resource"):
                self.problems.append(f"console error: {text}")
            if "Content Security Policy" in text or "Trusted Type" in text:
                self.problems.append(f"policy violation: {text}")

        page.on("console", console)
        if clock:
            # The page's watch timer runs only when the journey moves the clock.
            page.clock.install()
        return page

    def sign_in(self, page: Page, email=None, password=None):
        page.goto(self.world.url + "/")
        page.get_by_label("Email").fill(email or self.world.email)
        page.get_by_label("Password").fill(password or self.world.password)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Waiting for approval")

    def nav(self, page: Page, link, heading):
        """Follows a link of the navigation bar and waits for its page."""
        page.get_by_role("navigation", name="Main").get_by_role("link", name=link, exact=True).click()
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)

    def open_invoice(self, page: Page, invoice_id):
        page.goto(f"{self.world.console}#/invoices/{invoice_id}")
        expect(page.locator("#summary")).to_be_visible()

    def close(self):
        self.context.close()
        assert not self.problems, "\n".join(self.problems)


JOURNEYS = []


def journey(fn):
    JOURNEYS.append(fn)
    return fn


@journey
def sign_in_and_see_the_pending_invoices_oldest_first(j: Journey):
    page = j.page()
    page.goto(j.world.url + "/")
    expect(page).to_have_url(re.compile(r"/console/$"))
    page.get_by_label("Email").fill(j.world.email)
    page.get_by_label("Password").fill("not the password")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_contain_text("do not match")
    page.get_by_label("Password").fill(j.world.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Waiting for approval")
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(2)
    listed = j.world.api.ok("GET", "/v1/invoices?state=pending_approval", j.world.approver)["items"]
    ids = [row.get_attribute("data-invoice-id") for row in rows.all()]
    assert ids == [i["id"] for i in listed], (ids, listed)
    created = [i["created_at"] for i in listed]
    assert created == sorted(created), "oldest first"
    # The demo's two proposals, with exact amounts grouped as strings (USDC has 6 decimals).
    expect(rows.nth(0)).to_contain_text("Acme Inc")
    expect(rows.nth(0)).to_contain_text("Billing agent")
    expect(rows.nth(0)).to_contain_text("USDC 1,200.000000")
    expect(rows.nth(1)).to_contain_text("Globex GmbH")
    expect(rows.nth(1)).to_contain_text("EUR 2,900.00")
    # The other states are filters.
    page.get_by_role("link", name="Approved", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Approved invoices")
    expect(page.get_by_text("No approved invoices.")).to_be_visible()


@journey
def open_one_and_approve_it_with_the_shown_hash(j: Journey):
    page = j.page()
    j.sign_in(page)
    page.get_by_role("link", name="Globex GmbH").click()
    summary = page.locator("#summary")
    expect(summary).to_contain_text("Billing agent asks Globex GmbH to pay EUR 2,900.00 by")
    expect(summary).to_contain_text("into IBAN DE89 3704 0044 0532 0130 00.")
    expect(page.get_by_role("heading", name="Revision 1 of 1")).to_be_visible()
    expect(page.locator("#verify")).to_contain_text("Verified")
    expect(page.locator("#destination-state")).to_have_text("active")
    shown_hash = page.locator("#payload-hash").inner_text()
    invoice_id = page.url.rsplit("/", 1)[1]
    current = j.world.invoice(invoice_id)["current_revision"]
    assert shown_hash == current["payload_hash"]
    assert page.locator("#canonical-payload").inner_text() == current["canonical_payload"]
    # A double click decides once.
    page.locator("#approve").dblclick()
    expect(page.locator("#flash")).to_have_text("Approved revision 1.")
    expect(page.locator("#invoice-state")).to_have_text("Approved")
    decisions = j.world.decisions(invoice_id)
    assert len(decisions) == 1, decisions
    assert decisions[0]["decision"] == "approved"
    assert decisions[0]["payload_hash"] == shown_hash
    assert decisions[0]["revision_id"] == current["id"]
    events = j.world.api.ok("GET", f"/v1/invoices/{invoice_id}/events", j.world.approver)["items"]
    assert [e["action"] for e in events] == ["create_draft", "submit", "approve"], events
    # An approved invoice can still be cancelled, with a reason.
    page.locator("#cancel").click()
    expect(page.get_by_text("Write why this approved invoice is cancelled.")).to_be_visible()
    assert j.world.invoice(invoice_id)["state"] == "approved"
    page.get_by_label("Reason for cancelling").fill("The workshop is postponed.")
    page.locator("#cancel").click()
    expect(page.locator("#flash")).to_have_text("The invoice is cancelled.")
    expect(page.locator("#invoice-state")).to_have_text("Cancelled")
    assert j.world.invoice(invoice_id)["state"] == "cancelled"


@journey
def huge_amounts_are_shown_digit_for_digit(j: Journey):
    # Far beyond 2^53 in minor units: a float would print other digits.
    amount = "12345678901234567890.123457"
    invoice = j.world.propose(
        destination=j.world.usdc,
        lines=[{"description": "Treasury transfer", "quantity": "3", "unit_amount": amount}],
    )
    total = invoice["current_revision"]["total"]
    assert total == "37037036703703703670.370371", total
    page = j.page()
    j.sign_in(page)
    row = page.locator(f'tr[data-invoice-id="{invoice["id"]}"]')
    expect(row).to_contain_text("USDC 37,037,036,703,703,703,670.370371")
    row.get_by_role("link").click()
    expect(page.locator("#summary")).to_contain_text("to pay USDC 37,037,036,703,703,703,670.370371 by")
    expect(page.locator(".lines tbody")).to_contain_text("USDC 12,345,678,901,234,567,890.123457")
    expect(page.locator("#total")).to_have_text("USDC 37,037,036,703,703,703,670.370371")


@journey
def the_agent_revises_while_the_page_is_open_and_approve_shows_the_change(j: Journey):
    invoice = j.world.propose()
    page = j.page(clock=True)
    j.sign_in(page)
    j.open_invoice(page, invoice["id"])
    expect(page.locator("#total")).to_have_text("EUR 1,200.00")
    first_hash = page.locator("#payload-hash").inner_text()
    # Behind the approver's back, the agent sends revision 2 and submits it again.
    lines = [{"description": "Consulting", "quantity": "4", "unit_amount": "400.00"}]
    revised = j.world.revise(invoice["id"], lines, submit=True)
    page.locator("#approve").click()
    expect(page.locator("#changed")).to_contain_text("revision 1 is no longer the current one")
    expect(page.locator("#changed")).to_contain_text("Nothing was decided")
    assert j.world.decisions(invoice["id"]) == []
    expect(page.get_by_role("heading", name="Revision 2 of 2")).to_be_visible()
    diff = page.locator(".diff")
    expect(diff).to_contain_text("Line 1 quantity")
    expect(diff).to_contain_text("EUR 1,200.00")
    expect(diff).to_contain_text("EUR 1,600.00")
    new_hash = revised["current_revision"]["payload_hash"]
    expect(page.locator("#payload-hash")).to_have_text(new_hash)
    assert new_hash != first_hash
    page.locator("#approve").click()
    expect(page.locator("#flash")).to_have_text("Approved revision 2.")
    decisions = j.world.decisions(invoice["id"])
    assert [(d["revision_id"], d["payload_hash"]) for d in decisions] == [
        (revised["current_revision"]["id"], new_hash)
    ], decisions


@journey
def the_page_notices_a_new_revision_without_a_click(j: Journey):
    invoice = j.world.propose()
    page = j.page(clock=True)
    j.sign_in(page)
    j.open_invoice(page, invoice["id"])
    expect(page.locator("#approve")).to_be_visible()
    lines = [{"description": "Consulting", "quantity": "3", "unit_amount": "450.00"}]
    j.world.revise(invoice["id"], lines, submit=False)
    page.clock.run_for(6000)
    expect(page.locator("#changed")).to_contain_text("the agent sent revision 2")
    expect(page.locator("#invoice-state")).to_have_text("Draft")
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.get_by_text("has not submitted this revision")).to_be_visible()
    j.world.api.ok("POST", f"/v1/invoices/{invoice['id']}/submit", j.world.agent_key)
    page.clock.run_for(6000)
    expect(page.locator("#changed")).to_contain_text("now pending approval")
    expect(page.locator("#approve")).to_be_visible()
    expect(page.locator("#total")).to_have_text("EUR 1,350.00")


@journey
def reject_needs_a_reason(j: Journey):
    invoice = j.world.propose()
    page = j.page()
    j.sign_in(page)
    j.open_invoice(page, invoice["id"])
    page.locator("#reject").click()
    expect(page.get_by_text("Write a reason: the agent needs to know why.")).to_be_visible()
    expect(page.get_by_label("Reason", exact=True)).to_be_focused()
    assert j.world.invoice(invoice["id"])["state"] == "pending_approval"
    assert j.world.decisions(invoice["id"]) == []
    page.get_by_label("Reason", exact=True).fill("This work was billed last month.")
    page.locator("#reject").click()
    expect(page.locator("#flash")).to_have_text("Rejected revision 1.")
    decisions = j.world.decisions(invoice["id"])
    assert [(d["decision"], d["reason"]) for d in decisions] == [("rejected", "This work was billed last month.")]
    expect(page.locator("#decisions")).to_contain_text("This work was billed last month.")


@journey
def a_retired_destination_hides_approve(j: Journey):
    destination = j.world.api.ok(
        "POST",
        "/v1/payment-destinations",
        j.world.agent_key,
        {"label": "Old account", "currency": "EUR", "network": "iban", "address": "CH9300762011623852957"},
        {"Idempotency-Key": f"browser-{uuid.uuid4()}"},
    )
    invoice = j.world.propose(customer="Globex GmbH", destination=destination)
    j.world.api.ok("POST", f"/v1/payment-destinations/{destination['id']}/deactivate", j.world.agent_key)
    page = j.page()
    j.sign_in(page)
    row = page.locator(f'tr[data-invoice-id="{invoice["id"]}"]')
    expect(row).to_contain_text("Destination deactivated")
    row.get_by_role("link").click()
    expect(page.locator("#destination-state")).to_have_text("deactivated")
    expect(page.get_by_text("This destination is deactivated")).to_be_visible()
    expect(page.locator("#approve")).to_have_count(0)
    expect(page.locator("#reject")).to_be_visible()
    expect(page.locator("#request-changes")).to_be_visible()


@journey
def four_eyes_refuses_the_owner_and_a_second_approver_confirms_turning_it_off(j: Journey):
    w = j.world
    # A second approver, invited while four eyes is still off (then it is immediate).
    second_email = f"second-{w.label}-{uuid.uuid4().hex[:8]}@tauros.local"
    invite = w.api.ok("POST", "/v1/users", w.approver, {"email": second_email, "role": "approver"})
    second_password = "second approver password"
    w.api.ok(
        "POST",
        "/v1/invitations/accept",
        body={"invitation_token": invite["invitation_token"], "password": second_password},
    )
    invoice = w.propose()
    page = j.page()
    j.sign_in(page)
    j.open_invoice(page, invoice["id"])
    # Four eyes goes on while the page is open: the server refuses the owner, the page explains.
    assert w.api.ok("PATCH", "/v1/organisation", w.approver, {"four_eyes": True})["four_eyes"] is True
    page.locator("#approve").click()
    expect(page.locator("#decide-message")).to_contain_text("Four eyes: another approver must decide.")
    expect(page.locator("#decide-message")).to_contain_text("four_eyes_required")
    assert w.decisions(invoice["id"]) == []
    # Opened afresh, the page says so before any click, and offers no decision.
    page.reload()
    expect(page.locator(".decide")).to_contain_text("you own Billing agent")
    expect(page.locator("#approve")).to_have_count(0)

    # Turning it off is a proposal that the proposer cannot confirm.
    j.nav(page, "Organisation", "Organisation: Demo")
    expect(page.get_by_label("Four eyes")).to_be_checked()
    page.get_by_label("Four eyes").uncheck()
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator("#settings-flash")).to_contain_text("needs a second approver")
    expect(page.get_by_label("Four eyes")).to_be_checked()
    proposal = page.locator(".proposals tbody tr")
    expect(proposal).to_have_count(1)
    expect(proposal).to_contain_text("Settings: four eyes off")
    expect(proposal).to_contain_text("You proposed this")
    expect(proposal.get_by_role("button", name="Confirm")).to_have_count(0)

    other = Journey(j.context.browser, w)
    try:
        second = other.page()
        other.sign_in(second, second_email, second_password)
        other.nav(second, "Organisation", "Organisation: Demo")
        row = second.locator(".proposals tbody tr")
        expect(row).to_contain_text(w.email)
        row.get_by_role("button", name="Confirm").click()
        expect(second.locator("#settings-flash")).to_have_text("Proposal confirmed: the change is in force.")
        expect(second.get_by_label("Four eyes")).not_to_be_checked()
        expect(second.locator("#no-proposals")).to_be_visible()
    finally:
        other.close()
    assert w.api.ok("GET", "/v1/organisation", w.approver)["four_eyes"] is False
    # And the owner may decide again.
    j.open_invoice(page, invoice["id"])
    page.locator("#approve").click()
    expect(page.locator("#flash")).to_have_text("Approved revision 1.")


@journey
def agents_keys_shown_once_and_customers(j: Journey):
    w = j.world
    page = j.page()
    j.sign_in(page)
    j.nav(page, "Agents", "Agents")
    name = f"Console agent {w.label}"
    page.get_by_label("Name", exact=True).fill(name)
    page.get_by_role("button", name="Create agent").click()
    key = page.locator("#api-key").inner_text()
    assert key.startswith("tauros_"), key
    me = w.api.ok("GET", "/v1/me", key)
    assert me["kind"] == "agent" and me["name"] == name, me
    page.get_by_role("button", name=f"Rotate the key of {name}").click()
    page.get_by_role("button", name="Rotate now").click()
    expect(page.locator("#api-key")).not_to_have_text(key)
    new_key = page.locator("#api-key").inner_text()
    assert w.api.call("GET", "/v1/me", key)[0] == 401
    assert w.api.ok("GET", "/v1/me", new_key)["name"] == name
    # Shown once: a reload shows no key.
    page.reload()
    expect(page.get_by_role("heading", level=1)).to_have_text("Agents")
    expect(page.locator("#api-key")).to_have_count(0)

    j.nav(page, "Customers", "Customers")
    page.get_by_label("Agent", exact=True).select_option(label="Billing agent")
    page.get_by_label("Name", exact=True).fill(f"Initech {w.label}")
    page.get_by_label("Email", exact=True).fill("ap@initech.example")
    page.get_by_role("button", name="Add customer").click()
    expect(page.locator("#customers-flash")).to_have_text(f"Customer “Initech {w.label}” added.")
    expect(page.locator(".customers")).to_contain_text("ap@initech.example")
    names = [c["name"] for c in w.api.ok("GET", "/v1/customers?limit=100", w.agent_key)["items"]]
    assert f"Initech {w.label}" in names


@journey
def an_ended_session_returns_to_sign_in_and_sign_out_forgets_the_token(j: Journey):
    w = j.world
    page = j.page()
    j.sign_in(page)
    token = page.evaluate("JSON.parse(sessionStorage.getItem('tauros.session')).token")
    # The session ends elsewhere (as at its expiry): the next request answers 401.
    status, _ = w.api.call("DELETE", "/v1/sessions/current", token)
    assert status == 204
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Agents").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Sign in to Tauros")
    expect(page.get_by_text("Your session has ended")).to_be_visible()
    # Signing in again returns to where the approver was.
    page.get_by_label("Email").fill(w.email)
    page.get_by_label("Password").fill(w.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Agents")
    token = page.evaluate("JSON.parse(sessionStorage.getItem('tauros.session')).token")
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text("You are signed out.")).to_be_visible()
    assert page.evaluate("sessionStorage.getItem('tauros.session')") is None
    assert w.api.call("GET", "/v1/me", token)[0] == 401


@journey
def keyboard_only_and_small_screens(j: Journey):
    w = j.world
    page = j.page()
    page.goto(w.url + "/")
    expect(page.get_by_label("Email")).to_be_focused()
    page.keyboard.type(w.email)
    page.keyboard.press("Tab")
    page.keyboard.type(w.password)
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text("Waiting for approval")
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    for _ in range(40):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('row-link')"):
            break
    else:
        raise AssertionError("no invoice link reached with Tab")
    page.keyboard.press("Enter")
    expect(page.locator("#summary")).to_be_visible()
    expect(page.get_by_role("heading", level=1)).to_be_focused()
    # Focus is visible: the focused element draws an outline.
    page.keyboard.press("Tab")
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline != "none", outline
    # A phone, and a 1280 px desktop at 200 % zoom (640 CSS pixels): nothing wider than the screen.
    review = "#" + page.url.split("#", 1)[1]
    # The invoice with the longest total (huge_amounts_… made one) must fit too.
    pending = w.api.ok("GET", "/v1/invoices?state=pending_approval&limit=100", w.approver)["items"]
    longest = "#/invoices/" + max(pending, key=lambda i: len(i["current_revision"]["total"]))["id"]
    for width, height in [(375, 740), (640, 450)]:
        page.set_viewport_size({"width": width, "height": height})
        for hash_ in ["#/inbox", review, longest, "#/organisation", "#/agents", "#/customers"]:
            page.goto(w.console + hash_)
            expect(page.get_by_role("heading", level=1)).to_be_visible()
            expect(page.locator(".loading")).to_have_count(0)
            wide = page.evaluate("document.documentElement.scrollWidth")
            assert wide <= width, f"{hash_} is {wide}px wide on a {width}px screen"


@journey
def the_inbox_pages_with_next_cursor(j: Journey):
    w = j.world
    listed = lambda: w.api.ok("GET", "/v1/invoices?state=pending_approval&limit=100", w.approver)["items"]
    for _ in range(26 - len(listed())):
        w.propose()
    pending = [i["id"] for i in listed()]
    assert len(pending) > 25
    page = j.page()
    j.sign_in(page)
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(25)
    first = [r.get_attribute("data-invoice-id") for r in rows.all()]
    page.get_by_role("link", name="Next page").click()
    expect(page.get_by_role("link", name="First page")).to_be_visible()
    expect(rows).to_have_count(min(25, len(pending) - 25))
    second = [r.get_attribute("data-invoice-id") for r in rows.all()]
    assert first + second == pending[: len(first) + len(second)], "pages follow the API's oldest-first order"
    page.get_by_role("link", name="First page").click()
    expect(rows.first).to_have_attribute("data-invoice-id", pending[0])


def screenshots(browser: Browser, world: World, out_dir: str):
    """The pictures in docs/: the inbox, and a review page showing a revision's changes."""
    acme = next(
        i
        for i in world.api.ok("GET", "/v1/invoices?state=pending_approval", world.approver)["items"]
        if i["current_revision"]["customer_id"] == world.customers["Acme Inc"]["id"]
    )
    world.api.ok(
        "POST",
        f"/v1/invoices/{acme['id']}/revise",
        world.agent_key,
        {
            "reasoning": "Monthly retainer agreed in the signed statement of work; four more support hours were used after the first draft.",
            "lines": [
                {"description": "Platform retainer", "quantity": "1", "unit_amount": "1000"},
                {"description": "Additional support hours", "quantity": "8", "unit_amount": "50"},
            ],
        },
    )
    world.api.ok("POST", f"/v1/invoices/{acme['id']}/submit", world.agent_key)
    j = Journey(browser, world, viewport={"width": 1280, "height": 760})
    page = j.page()
    j.sign_in(page)
    page.wait_for_load_state("networkidle")
    page.screenshot(path=f"{out_dir}/console-inbox.png")
    page.get_by_role("link", name="Acme Inc").click()
    expect(page.get_by_role("heading", name="Revision 2 of 2")).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=f"{out_dir}/console-review.png", full_page=True)
    page.set_viewport_size({"width": 390, "height": 844})
    page.reload()
    expect(page.locator("#summary")).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=f"{out_dir}/console-phone.png")
    j.close()
    for name in ["console-inbox.png", "console-review.png", "console-phone.png"]:
        print(f"wrote {out_dir}/{name}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--agent-key", required=True)
    parser.add_argument("--email", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--label", default="sqlite")
    parser.add_argument("--screenshots")
    parser.add_argument("--only", help="run only the journeys whose name contains this")
    args = parser.parse_args()
    world = World(args)
    passed = failed = 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        try:
            if args.screenshots:
                screenshots(browser, world, args.screenshots)
                return 0
            for fn in JOURNEYS:
                if args.only and args.only not in fn.__name__:
                    continue
                started = time.monotonic()
                j = Journey(browser, world)
                try:
                    fn(j)
                    j.close()
                    passed += 1
                    print(f"browser: {args.label}: {fn.__name__} ... ok ({time.monotonic() - started:.1f}s)", flush=True)
                except Exception:
                    failed += 1
                    print(f"browser: {args.label}: {fn.__name__} ... FAILED", flush=True)
                    traceback.print_exc(file=sys.stdout)
                    try:
                        j.context.close()
                    except Exception:
                        pass
        finally:
            browser.close()
    print(f"journeys: {passed} passed, {failed} failed")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
