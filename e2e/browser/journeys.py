"""The approver console in a real browser: journeys of a human at the page while an agent
works through the REST API, against a live `tauros serve --demo` (scripts/browser starts it).

Each journey gets a fresh browser context (so a fresh tab session) and fails on any failed
expectation, any script error and any Content-Security-Policy violation the page reports.

    python journeys.py --url URL --agent-key KEY --email E --password P --label sqlite
    python journeys.py ... --screenshots DIR     # only the pictures for docs/
"""

import argparse
import base64
import datetime
import hashlib
import hmac
import http.server
import json
import re
import sqlite3
import subprocess
import sys
import threading
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


# The due date inside a revision's canonical payload (what the server reads), set to `?`; the
# hash is left as it was (verify would report the edit, as it should).
SEALED_DUE_DATE = (
    "canonical_payload = replace(canonical_payload, '\"due_date\":\"' || due_date || '\"', "
    "'\"due_date\":\"' || ? || '\"')"
)
# The read model's row of one invoice (`?`), derived again from its definition after a journey
# edited the tables behind the server's back (migration 0019; tests/api's rederive_read_model).
REDERIVE_READ_MODEL = (
    "delete from invoice_reads where invoice_id = ?; "
    "insert into invoice_reads select * from invoice_reads_source where invoice_id = ?"
)


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
        self.database_url = args.database_url
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

    def approve_and_issue(self, invoice):
        """The approver approves the shown revision and issues the invoice (no issuer is
        configured in the demo, so issuing is the approver's click)."""
        rev = invoice["current_revision"]
        body = {"revision_id": rev["id"], "payload_hash": rev["payload_hash"]}
        self.api.ok("POST", f"/v1/invoices/{invoice['id']}/approve", self.approver, body)
        return self.api.ok("POST", f"/v1/invoices/{invoice['id']}/issue", self.approver)["invoice"]

    def move_due_date_back(self, invoice_id, due_date):
        """Moves an invoice's due date into the past behind the server's back, as the API
        suite does (tests/api/resources/settlement.rs): nothing can be drafted with a past due date.
        Revisions are append-only; their guard is lifted for this one statement and put back.
        The sealed content (its canonical payload) says the same date, so the invoice reads it.
        No write of the server changed the revision, so no trigger refreshed the invoice's read
        model (migration 0019): its row is derived again from its definition, the view."""
        update = (
            f"update invoice_revisions set due_date = '{due_date}', {SEALED_DUE_DATE.replace('?', repr(due_date))} "
            f"where invoice_id = '{invoice_id}'; "
            f"{REDERIVE_READ_MODEL.replace('?', repr(invoice_id))}"
        )
        if self.database_url.startswith("sqlite:"):
            path = self.database_url.removeprefix("sqlite://").split("?", 1)[0]
            db = sqlite3.connect(path, timeout=10)
            try:
                (trigger,) = db.execute(
                    "select sql from sqlite_master where type = 'trigger' and name = 'invoice_revisions_no_update'"
                ).fetchone()
                # SQLite stores invoice ids as 16-byte blobs.
                db.execute("drop trigger invoice_revisions_no_update")
                invoice = uuid.UUID(invoice_id).bytes
                db.execute(
                    f"update invoice_revisions set due_date = ?, {SEALED_DUE_DATE} where invoice_id = ?",
                    (due_date, due_date, invoice),
                )
                for statement in REDERIVE_READ_MODEL.split("; "):
                    db.execute(statement, (invoice,))
                db.execute(trigger)
                db.commit()
            finally:
                db.close()
        else:
            script = (
                "begin; alter table invoice_revisions disable trigger invoice_revisions_append_only; "
                f"{update}; alter table invoice_revisions enable trigger invoice_revisions_append_only; commit;"
            )
            subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", self.database_url, "-c", script], check=True)

    def failing_for_days(self, endpoint_id):
        """Moves an endpoint's failing_since far back behind the server's back, so that its
        next failed attempt is past the disable window (TAUROS_WEBHOOK_DISABLE_AFTER, 3 days)."""
        since = "2000-01-01T00:00:00+00:00"
        if self.database_url.startswith("sqlite:"):
            path = self.database_url.removeprefix("sqlite://").split("?", 1)[0]
            db = sqlite3.connect(path, timeout=10)
            try:
                db.execute(
                    "update webhook_endpoints set failing_since = ? where id = ?",
                    (since, uuid.UUID(endpoint_id).bytes),
                )
                db.commit()
            finally:
                db.close()
        else:
            update = f"update webhook_endpoints set failing_since = '{since}' where id = '{endpoint_id}'"
            subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", self.database_url, "-c", update], check=True)

    def stop_issuing(self, invoice_id, number, status, reason):
        """Puts an approved invoice where an issuer would have stopped it for a human (the demo
        runs no issuer): numbered, `issuing_status` `status` with `reason`, as the API suite
        reaches these states against the reference peer (tests/api/contract/issuing_dead_ends.rs)."""
        if self.database_url.startswith("sqlite:"):
            path = self.database_url.removeprefix("sqlite://").split("?", 1)[0]
            db = sqlite3.connect(path, timeout=10)
            try:
                db.execute(
                    "update invoices set number = ?, issuing_status = ?, issuing_reason = ? where id = ?",
                    (number, status, reason, uuid.UUID(invoice_id).bytes),
                )
                db.commit()
            finally:
                db.close()
        else:
            script = (
                f"update invoices set number = '{number}', issuing_status = '{status}', "
                f"issuing_reason = '{reason}' where id = '{invoice_id}'"
            )
            subprocess.run(["psql", "-q", "-v", "ON_ERROR_STOP=1", self.database_url, "-c", script], check=True)

    def approve(self, invoice):
        rev = invoice["current_revision"]
        body = {"revision_id": rev["id"], "payload_hash": rev["payload_hash"]}
        return self.api.ok("POST", f"/v1/invoices/{invoice['id']}/approve", self.approver, body)["invoice"]

    def settlement_key(self):
        """A settlement agent of the approver's (created once): its API key."""
        if not hasattr(self, "_settlement_key"):
            body = {"name": f"Bank feed {self.label}", "capabilities": ["settlement"]}
            self._settlement_key = self.api.ok("POST", "/v1/agents", self.approver, body)["api_key"]
            # A source belongs to the agent that first reported under it: one of its own.
            self._settlement_source = f"bank-feed-{uuid.uuid4().hex[:8]}"
        return self._settlement_key

    def report_payment(self, payment_id, amount, invoice_number, status="confirmed", minutes_ago=0):
        """The settlement agent reports one event about a payment; returns the answer. (A
        payment carries the facts of its earliest event by `occurred_at`.)"""
        occurred = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=minutes_ago)
        key = self.settlement_key()
        body = {
            "source": self._settlement_source,
            "event_id": f"evt-{uuid.uuid4()}",
            "payment_id": payment_id,
            "invoice_number": invoice_number,
            "amount": amount,
            "currency": "EUR",
            "status": status,
            "occurred_at": occurred.isoformat(timespec="seconds"),
        }
        return self.api.ok("POST", "/v1/settlement-events", key, body)


class Receiver:
    """A webhook receiver on a loopback port (scripts/browser allow-lists 127.0.0.1 for the
    demo server): answers every delivery with `self.status` and keeps what it received."""

    def __init__(self, status=503):
        self.status = status
        self.received = []
        self.arrived = threading.Condition()
        receiver = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = receiver.status
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()
                with receiver.arrived:
                    receiver.received.append(({k.lower(): v for k, v in self.headers.items()}, body, status))
                    receiver.arrived.notify_all()

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def wait_for(self, count, timeout=30):
        """Blocks until `count` deliveries have arrived; returns them."""
        with self.arrived:
            assert self.arrived.wait_for(lambda: len(self.received) >= count, timeout), f"{len(self.received)} deliveries"
            return list(self.received)

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def signed_by(secret, headers, body):
    """Whether a delivery carries a Standard Webhooks signature of `secret`."""
    key = base64.b64decode(secret.removeprefix("whsec_"))
    signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
    expected = base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
    return any(c == f"v1,{expected}" for c in headers["webhook-signature"].split(" "))


def until(what, check, timeout=30):
    """Polls the API (through `check`) until it answers something true; returns that."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.2)


def tab_to(page, condition, backwards=False, presses=60):
    """Presses Tab (or Shift+Tab) until `condition` (JavaScript) holds for the focused element."""
    for _ in range(presses):
        page.keyboard.press("Shift+Tab" if backwards else "Tab")
        if page.evaluate(condition):
            return
    raise AssertionError(f"not reached with the keyboard: {condition}")


def right_aligned_tabular(locator, timeout=5):
    """The cell is right-aligned with tabular figures. Read again while the element the locator
    found was replaced by a re-render in between (a detached element has no computed style)."""
    deadline = time.monotonic() + timeout
    while True:
        style = locator.evaluate("e => [getComputedStyle(e).textAlign, getComputedStyle(e).fontVariantNumeric]")
        if style[0] or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    assert style[0] in ("right", "end") and "tabular-nums" in style[1], style


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
    # Whatever is sealed the approver sees: a member of the canonical payload that the console
    # has no place for yet is listed as it is, and its change is in the diff (the page's module).
    seen = page.evaluate(
        """async (rev) => {
            const m = await import('/console/diff.js');
            const more = JSON.stringify({ ...JSON.parse(rev.canonical_payload), purchase_order: 'PO-7' });
            const names = { customer: (id) => id, destination: (id) => id };
            return [
                m.otherSealedFacts(rev.canonical_payload),
                m.otherSealedFacts(more),
                m.diffRevisions(rev, { ...rev, canonical_payload: more }, names),
            ];
        }""",
        revised["current_revision"],
    )
    assert seen == [
        [],
        [["Purchase order", "PO-7"]],
        [{"field": "Purchase order", "before": "(none)", "after": "PO-7"}],
    ], seen
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
def the_browser_keeps_its_device_token_and_sends_it_at_the_next_sign_in(j: Journey):
    w = j.world
    page = j.page()
    sent = []
    page.on(
        "request",
        lambda r: sent.append(r.post_data_json) if r.method == "POST" and r.url.endswith("/v1/sessions") else None,
    )
    j.sign_in(page)
    devices = page.evaluate("JSON.parse(localStorage.getItem('tauros.devices'))")
    device = devices[w.email.lower()]
    assert device.startswith("tdev_"), devices
    assert "device_token" not in sent[0], "a first sign-in has none to send"
    page.get_by_role("button", name="Sign out").click()
    expect(page.get_by_text("You are signed out.")).to_be_visible()
    # Signed out, the device token stays: it is this browser's, not this session's.
    page.get_by_label("Email").fill(w.email.upper())
    page.get_by_label("Password").fill(w.password)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Waiting for approval")
    assert sent[1]["device_token"] == device, sent[1]
    # The same token comes back while it is valid, so the browser keeps one per email.
    after = page.evaluate("JSON.parse(localStorage.getItem('tauros.devices'))")
    assert after == devices, (after, devices)


@journey
def an_operator_is_told_the_queue_and_the_endpoints_are_for_approvers(j: Journey):
    page = j.page()
    # The demo's operator shares the approver's demo password.
    j.sign_in(page, "operator@tauros.local")
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Jobs", exact=True)).to_have_count(0)
    expect(nav.get_by_role("link", name="Webhooks", exact=True)).to_have_count(0)
    for path, heading, why in [
        ("jobs", "Jobs", "Only approvers see the job queue."),
        ("webhooks", "Webhook endpoints", "Only approvers manage webhook endpoints."),
    ]:
        page.goto(f"{j.world.console}#/{path}")
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        expect(page.get_by_text(why)).to_be_visible()


@journey
def the_payments_inbox_shows_what_a_settlement_agent_reported_for_no_invoice(j: Journey):
    w = j.world
    payment_id = f"pay-{uuid.uuid4().hex[:12]}"
    number = f"INV-NOPE-{uuid.uuid4().hex[:6].upper()}"
    recorded = w.report_payment(payment_id, "1234.50", number, minutes_ago=5)
    payment = recorded["payment"]
    assert (payment["status"], payment["unmatched_reason"]) == ("unmatched", "unknown_invoice"), payment
    page = j.page()
    j.sign_in(page)
    j.nav(page, "Payments", "Payments")
    statuses = page.get_by_role("navigation", name="Payment statuses")
    expect(statuses.get_by_role("link", name="Unmatched", exact=True)).to_have_attribute("aria-current", "page")
    row = page.locator(f'tr[data-payment-id="{payment["id"]}"]')
    expect(row).to_contain_text(payment_id)
    expect(row).to_contain_text("bank-feed")
    expect(row).to_contain_text("Unmatched")
    expect(row).to_contain_text("No invoice here has the id or number it names.")
    expect(row).to_contain_text(f"{number} (no such invoice here)")
    amount = row.locator("td.num").first
    expect(amount).to_have_text("EUR 1,234.50")
    right_aligned_tabular(amount)
    # Its way out, and a link to resolve it on its page (the list itself has no button).
    expect(row).to_contain_text("Allocate it to an invoice, or void it.")
    expect(row.get_by_role("link", name="Resolve…")).to_be_visible()
    expect(page.locator("#payments-how")).to_contain_text("An approver resolves what settlement cannot")
    expect(page.locator("main").get_by_role("button")).to_have_count(0)

    # The source reports the same payment again, later, with another amount: a conflict.
    w.report_payment(payment_id, "1243.50", number)
    row.get_by_role("link", name=payment_id).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Payment {payment_id}")
    expect(page.locator("#payment-status")).to_have_text("Conflict")
    expect(page.locator("#payment-why")).to_contain_text("Its events disagree")
    events = page.locator(".payment-events tbody tr")
    expect(events).to_have_count(2)
    expect(events.nth(0)).to_contain_text("agrees")
    expect(events.nth(0)).to_contain_text("EUR 1,234.50")
    expect(events.nth(1)).to_contain_text("Contradicts the payment")
    expect(events.nth(1)).to_contain_text("EUR 1,243.50")
    # The filters follow: it is under Conflict now, no longer under Unmatched.
    page.get_by_role("link", name="← Payments").click()
    expect(page.locator(f'tr[data-payment-id="{payment["id"]}"]')).to_have_count(0)
    statuses.get_by_role("link", name="Conflict", exact=True).click()
    expect(page.locator(f'tr[data-payment-id="{payment["id"]}"]')).to_contain_text("Conflict")
    # On a phone the amount stays right-aligned in tabular figures on its card.
    page.set_viewport_size({"width": 375, "height": 740})
    right_aligned_tabular(page.locator(f'tr[data-payment-id="{payment["id"]}"] td.num').first)


@journey
def a_stuck_payment_is_allocated_and_a_conflict_accepted_from_its_page(j: Journey):
    w = j.world
    invoice = w.approve_and_issue(w.propose())
    number = invoice["number"]
    stray_id = f"pay-{uuid.uuid4().hex[:12]}"
    stray = w.report_payment(stray_id, "400.00", f"INV-NOPE-{uuid.uuid4().hex[:6].upper()}")["payment"]
    assert stray["unmatched_reason"] == "unknown_invoice", stray
    page = j.page()
    j.sign_in(page)
    j.nav(page, "Payments", "Payments")
    row = page.locator(f'tr[data-payment-id="{stray["id"]}"]')
    row.get_by_role("link", name="Resolve…").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(f"Payment {stray_id}")
    expect(page.get_by_role("heading", name="Resolve it")).to_be_visible()
    expect(page.get_by_label("Allocate to an invoice")).to_be_checked()
    page.locator("#resolve-invoice").select_option(invoice["id"])
    # Without a reason nothing is written, and the field says why.
    page.locator("#resolve-submit").click()
    expect(page.locator("#resolve-reason-error")).to_be_visible()
    assert w.api.ok("GET", f"/v1/payments/{stray['id']}", w.approver)["resolutions"] == []
    page.locator("#resolve-reason").fill("The customer mistyped the invoice number.")
    # A double click resolves once (one key per form, and the button waits).
    page.locator("#resolve-submit").dblclick()
    expect(page.locator("#resolve-flash")).to_contain_text("Allocate to an invoice: done")
    expect(page.locator("#payment-status")).to_have_text("Applied")
    expect(page.locator("#payment-allocated")).to_have_text("EUR 400.00")
    expect(page.locator(".payment-resolutions tbody tr")).to_have_count(1)
    expect(page.locator(".payment-resolutions tbody tr").first).to_contain_text("Applied")
    # Applied now: voiding is the only way left.
    expect(page.get_by_label("Allocate to an invoice")).to_have_count(0)
    expect(page.get_by_label("Void: nothing of it counts")).to_be_checked()
    detail = w.api.ok("GET", f"/v1/payments/{stray['id']}", w.approver)
    assert len(detail["resolutions"]) == 1, detail
    assert w.invoice(invoice["id"])["amount_paid"] == "400.00"

    # A payment whose events disagree is accepted at the amount the approver knows.
    pid = f"pay-{uuid.uuid4().hex[:12]}"
    w.report_payment(pid, "500.00", number, minutes_ago=5)
    conflict = w.report_payment(pid, "600.00", number)["payment"]
    assert conflict["status"] == "conflict", conflict
    page.goto(f"{w.console}#/payments/{conflict['id']}")
    expect(page.locator("#payment-status")).to_have_text("Conflict")
    expect(page.get_by_label("Accept at an amount")).to_be_checked()
    page.locator("#resolve-amount").fill("600.005")
    page.locator("#resolve-reason").fill("The bank confirmed 600.00 by phone.")
    page.locator("#resolve-submit").click()
    expect(page.locator("#resolve-amount-error")).to_be_visible()
    page.locator("#resolve-amount").fill("600.00")
    page.locator("#resolve-submit").click()
    expect(page.locator("#resolve-flash")).to_contain_text("Accept at an amount: done")
    expect(page.locator("#payment-status")).to_have_text("Applied")
    expect(page.locator("#payment-resolution")).to_contain_text("EUR 600.00")
    assert w.invoice(invoice["id"])["amount_paid"] == "1000.00"
    # Voiding it takes it back out, and the invoice with it.
    page.get_by_label("Void: nothing of it counts").check()
    expect(page.locator("#resolve-amount")).to_be_hidden()
    page.locator("#resolve-reason").fill("Recalled by the bank.")
    page.locator("#resolve-submit").click()
    expect(page.locator("#resolve-flash")).to_contain_text("Void: nothing of it counts: done")
    expect(page.locator("#payment-status")).to_have_text("Failed")
    assert w.invoice(invoice["id"])["amount_paid"] == "400.00"


@journey
def a_failing_webhook_delivery_is_a_job_to_cancel_and_retry(j: Journey):
    w = j.world
    receiver = Receiver(status=503)
    endpoint = w.api.ok(
        "POST",
        "/v1/webhook-endpoints",
        w.approver,
        {"url": receiver.url, "events": ["invoice.created"], "description": "Jobs journey"},
    )["endpoint"]
    try:
        w.propose(submit=False)
        receiver.wait_for(1)

        def delivery_job():
            jobs = w.api.ok("GET", "/v1/jobs?kind=webhook.deliver.v1&limit=100", w.approver)["items"]
            return next((x for x in jobs if (x["submission_id"] or "").startswith(endpoint["id"] + "/")), None)

        job = until("the delivery job", delivery_job)

        # Retried with a growing backoff: wait (reading the API) until its next run is a few
        # seconds away, so that the page acts on a job no worker holds.
        def waiting_long():
            now = w.api.ok("GET", f"/v1/jobs/{job['id']}", w.approver)
            run_at = datetime.datetime.fromisoformat(now["run_at"].replace("Z", "+00:00"))
            ahead = (run_at - datetime.datetime.now(datetime.timezone.utc)).total_seconds()
            return now if now["state"] == "retryable" and ahead > 6 else None

        page = j.page()
        j.sign_in(page)
        job = until("a retry a few seconds away", waiting_long)
        assert job["last_error"], job
        j.nav(page, "Jobs", "Jobs")
        page.get_by_role("navigation", name="Job kinds").get_by_role("link", name="Webhook delivery", exact=True).click()
        row = page.locator(f'tr[data-job-id="{job["id"]}"]')
        expect(row).to_contain_text("Retryable")
        expect(row).to_contain_text(job["last_error"]["code"])
        right_aligned_tabular(row.locator("td.num").first)
        row.get_by_role("link").click()
        expect(page.get_by_role("heading", level=1)).to_have_text("Webhook delivery job")
        expect(page.locator("#job-state")).to_have_text("Retryable")
        expect(page.locator("#job-attempt")).to_have_text(f"{job['attempt']} of {job['max_attempts']}")
        expect(page.locator("#job-last-error")).to_contain_text(job["last_error"]["message"])
        expect(page.locator("#job-next-run")).to_be_visible()

        page.get_by_role("button", name="Cancel job").click()
        expect(page.locator("#job-flash")).to_have_text("Cancelled: the job will not run.")
        expect(page.locator("#job-state")).to_have_text("Cancelled")
        assert w.api.ok("GET", f"/v1/jobs/{job['id']}", w.approver)["state"] == "cancelled"

        # The endpoint is fixed; retry sends the delivery again, which now arrives.
        receiver.status = 204
        before = len(receiver.received)
        page.get_by_role("button", name="Retry now").click()
        expect(page.locator("#job-flash")).to_contain_text("Sent to run again")
        delivered = receiver.wait_for(before + 1)[-1]
        assert delivered[2] == 204, delivered
        until("the job completed", lambda: w.api.ok("GET", f"/v1/jobs/{job['id']}", w.approver)["state"] == "completed")
        page.reload()
        expect(page.locator("#job-state")).to_have_text("Completed")
        # A completed job never runs again: the 409 is said plainly.
        page.get_by_role("button", name="Retry now").click()
        expect(page.locator("#job-flash")).to_have_text("This job completed: it will not run again. (job_finished)")
        page.get_by_role("button", name="Cancel job").click()
        expect(page.locator("#job-flash")).to_contain_text("nothing left to cancel. (job_finished)")
        expect(page.locator("#job-state")).to_have_text("Completed")
    finally:
        w.api.call("DELETE", f"/v1/webhook-endpoints/{endpoint['id']}", w.approver)
        receiver.close()


@journey
def a_webhook_endpoint_shows_its_secret_once(j: Journey):
    w = j.world
    receiver = Receiver(status=503)
    try:
        page = j.page()
        j.sign_in(page)
        j.nav(page, "Webhooks", "Webhook endpoints")
        documented = j.world.api.ok("GET", "/openapi.json")["components"]["schemas"]["WebhookEventType"]["enum"]
        expect(page.get_by_role("group", name="Events to deliver").get_by_role("checkbox")).to_have_count(len(documented))
        page.get_by_role("button", name="Register endpoint").click()
        expect(page.get_by_text("Enter the URL deliveries go to.")).to_be_visible()
        expect(page.get_by_text("Choose at least one event type.")).to_be_visible()
        page.get_by_label("URL", exact=True).fill(receiver.url)
        page.get_by_label("invoice.created", exact=True).check()
        page.get_by_label("Description").fill("Accounting system")
        page.get_by_role("button", name="Register endpoint").click()
        secret_el = page.locator("#webhook-secret")
        expect(secret_el).to_be_focused()
        secret = secret_el.inner_text()
        assert secret.startswith("whsec_"), secret
        expect(page.get_by_text("shown only this once")).to_be_visible()
        expect(page.get_by_role("button", name="Copy secret")).to_be_visible()
        endpoint = next(e for e in w.api.ok("GET", "/v1/webhook-endpoints", w.approver)["items"] if e["url"] == receiver.url)
        assert endpoint["events"] == ["invoice.created"] and endpoint["description"] == "Accounting system", endpoint
        # The secret shown is the one deliveries are signed with.
        w.propose(submit=False)
        headers, body, _ = receiver.wait_for(1)[0]
        assert signed_by(secret, headers, body), headers
        # Shown once: after a reload it is nowhere on the page.
        page.reload()
        expect(page.get_by_role("heading", level=1)).to_have_text("Webhook endpoints")
        expect(page.locator(f'tr[data-endpoint-id="{endpoint["id"]}"]')).to_contain_text("Accounting system")
        expect(page.locator("#webhook-secret")).to_have_count(0)
        assert secret not in page.content()

        # Rotating shows the new secret once, and only it signs from now on.
        page.get_by_role("button", name=f"Rotate the secret of {receiver.url}").click()
        page.get_by_role("button", name="Rotate now").click()
        expect(page.locator("#webhook-secret")).not_to_have_text(secret)
        rotated = page.locator("#webhook-secret").inner_text()
        assert rotated.startswith("whsec_")
        page.reload()
        expect(page.locator("#webhook-secret")).to_have_count(0)
        count = len(receiver.received)
        headers, body, _ = receiver.wait_for(count + 1)[-1]  # the 503 is retried
        assert signed_by(rotated, headers, body) and not signed_by(secret, headers, body)

        # The deliveries: status code, duration, next retry.
        until("a retry planned", lambda: any(a["next_retry_at"] for a in w.api.ok("GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries", w.approver)["items"]))
        page.locator(f'tr[data-endpoint-id="{endpoint["id"]}"]').get_by_role("link", name=receiver.url).click()
        expect(page.get_by_role("heading", level=1)).to_have_text(receiver.url)
        attempts = page.locator(".deliveries tbody tr")
        expect(attempts.first).to_contain_text("HTTP 503")
        expect(attempts.first).to_contain_text("invoice.created")
        expect(attempts.first.locator("td").nth(4)).to_have_text(re.compile(r"^[0-9]+ ms$"))
        expect(attempts.first.locator("td").nth(5)).not_to_be_empty()
        right_aligned_tabular(attempts.first.locator("td").nth(4))

        # Delete, after a confirmation.
        page.get_by_role("link", name="← Webhook endpoints").click()
        page.get_by_role("button", name=f"Delete {receiver.url}").click()
        page.get_by_role("button", name="Keep it").click()
        expect(page.locator(f'tr[data-endpoint-id="{endpoint["id"]}"]')).to_have_count(1)
        page.get_by_role("button", name=f"Delete {receiver.url}").click()
        page.get_by_role("button", name="Delete now").click()
        expect(page.locator("#webhooks-flash")).to_have_text("Endpoint deleted.")
        expect(page.locator(f'tr[data-endpoint-id="{endpoint["id"]}"]')).to_have_count(0)
        assert w.api.call("GET", f"/v1/webhook-endpoints/{endpoint['id']}", w.approver)[0] == 404
    finally:
        for e in w.api.ok("GET", "/v1/webhook-endpoints", w.approver)["items"]:
            if e["url"] == receiver.url:
                w.api.call("DELETE", f"/v1/webhook-endpoints/{e['id']}", w.approver)
        receiver.close()


@journey
def a_disabled_endpoint_is_re_enabled_and_a_failed_delivery_resent(j: Journey):
    """No dead ends (docs/WEBHOOKS.md, "Runbook"): an endpoint failing past its window is
    marked disabled with its held delivery and re-enabled from the page; a delivery whose job
    was stopped is failed, and Resend sends it with the same webhook-id."""
    w = j.world
    receiver = Receiver(status=503)
    endpoint = w.api.ok(
        "POST",
        "/v1/webhook-endpoints",
        w.approver,
        {"url": receiver.url, "events": ["invoice.created"], "description": "Dead ends journey"},
    )["endpoint"]
    try:
        # The first attempt fails; the endpoint has been failing "for days" (its failing_since
        # moved back behind the server's back, as the window is 3 days): the next failed
        # attempt disables it and holds the delivery.
        first = w.propose(submit=False)
        receiver.wait_for(1)
        until("failing recorded", lambda: w.api.ok("GET", f"/v1/webhook-endpoints/{endpoint['id']}", w.approver)["failing_since"])
        w.failing_for_days(endpoint["id"])
        until("the endpoint disabled", lambda: w.api.ok("GET", f"/v1/webhook-endpoints/{endpoint['id']}", w.approver)["status"] == "disabled", timeout=60)

        page = j.page()
        j.sign_in(page)
        j.nav(page, "Webhooks", "Webhook endpoints")
        row = page.locator(f'tr[data-endpoint-id="{endpoint["id"]}"]')
        expect(row).to_contain_text("Disabled")
        expect(row).to_contain_text("1 delivery held")
        row.get_by_role("link", name=receiver.url).click()
        expect(page.get_by_role("heading", level=1)).to_have_text(receiver.url)
        expect(page.locator("#endpoint-disabled")).to_contain_text("1 delivery is held")
        expect(page.locator(".deliveries tbody tr").first).to_contain_text("Held")

        # The receiver is fixed; Re-enable sends the held delivery.
        receiver.status = 204
        before = len(receiver.received)
        page.get_by_role("button", name=f"Re-enable {receiver.url}").click()
        expect(page.locator("#webhooks-flash")).to_contain_text("is enabled again: 1 held delivery goes out again")
        delivered = receiver.wait_for(before + 1)[-1]
        created_event = w.api.ok("GET", f"/v1/invoices/{first['id']}/events", w.approver)["items"][0]["id"]
        assert delivered[0]["webhook-id"] == created_event and delivered[2] == 204, delivered
        page.reload()
        expect(page.locator("#endpoint-disabled")).to_have_count(0)
        expect(page.locator(".deliveries tbody tr").first).to_contain_text("Delivered")

        # A delivery whose job an approver stopped is failed: Resend sends it again.
        receiver.status = 503
        second = w.propose(submit=False)
        second_event = w.api.ok("GET", f"/v1/invoices/{second['id']}/events", w.approver)["items"][0]["id"]

        def waiting_delivery():
            items = w.api.ok("GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries", w.approver)["items"]
            attempt = next((a for a in items if a["event_id"] == second_event), None)
            if not attempt:
                return None
            job = w.api.ok("GET", f"/v1/jobs/{attempt['job_id']}", w.approver)
            return attempt if job["state"] == "retryable" else None

        attempt = until("a failed attempt waiting for its retry", waiting_delivery)
        w.api.ok("POST", f"/v1/jobs/{attempt['job_id']}/cancel", w.approver)
        page.reload()
        resend = page.get_by_role("button", name=f"Resend invoice.created (event {second_event})")
        expect(resend).to_be_visible()
        expect(page.locator(f'tr[data-delivery-id="{attempt["delivery_id"]}"]').first).to_contain_text("Failed")
        receiver.status = 204
        before = len(receiver.received)
        resend.click()
        expect(page.locator("#webhooks-flash")).to_contain_text(f"resent with the same webhook-id ({second_event})")
        resent = receiver.wait_for(before + 1)[-1]
        assert resent[0]["webhook-id"] == second_event and resent[2] == 204, resent
        until("the resend recorded", lambda: w.api.ok("GET", f"/v1/webhook-endpoints/{endpoint['id']}/deliveries", w.approver)["items"][0]["delivery_status"] == "delivered")
        page.reload()
        expect(page.get_by_role("button", name=f"Resend invoice.created (event {second_event})")).to_have_count(0)
        # Once delivered, it is sent again only when the approver confirms (a receiver that lost it).
        again = page.get_by_role("button", name=f"Send again invoice.created (event {second_event})")
        before = len(receiver.received)
        page.once("dialog", lambda dialog: dialog.dismiss())
        again.click()
        expect(again).to_be_enabled()
        assert len(receiver.received) == before, "a dismissed confirmation sends nothing"
        page.once("dialog", lambda dialog: dialog.accept())
        again.click()
        expect(page.locator("#webhooks-flash")).to_contain_text(f"resent with the same webhook-id ({second_event})")
        sent_again = receiver.wait_for(before + 1)[-1]
        assert sent_again[0]["webhook-id"] == second_event, sent_again
    finally:
        w.api.call("DELETE", f"/v1/webhook-endpoints/{endpoint['id']}", w.approver)
        receiver.close()


@journey
def the_overdue_filter_lists_an_issued_invoice_past_its_due_date(j: Journey):
    w = j.world
    late = w.approve_and_issue(w.propose(customer="Globex GmbH"))
    on_time = w.approve_and_issue(w.propose())
    # Nothing can be drafted with a past due date: move one back, as the API suite does.
    w.move_due_date_back(late["id"], "2020-01-31")
    assert w.invoice(late["id"])["overdue"] is True
    page = j.page()
    j.sign_in(page)
    states = page.get_by_role("navigation", name="Invoice states")
    with page.expect_request(lambda r: "/v1/invoices?" in r.url and "overdue=true" in r.url) as request:
        states.get_by_role("link", name="Overdue").click()
    assert "state=" not in request.value.url, request.value.url
    expect(page.get_by_role("heading", level=1)).to_have_text("Overdue invoices")
    expect(states.get_by_role("link", name="Overdue")).to_have_attribute("aria-current", "page")
    listed = [i["id"] for i in w.api.ok("GET", "/v1/invoices?overdue=true&limit=25", w.approver)["items"]]
    assert late["id"] in listed and on_time["id"] not in listed, listed
    rows = page.locator("table tbody tr")
    expect(rows).to_have_count(len(listed))
    row = page.locator(f'tr[data-invoice-id="{late["id"]}"]')
    expect(row).to_contain_text("Globex GmbH")
    expect(row).to_contain_text("Issued")
    expect(row).to_contain_text("Jan 31, 2020")
    right_aligned_tabular(row.locator("td.num").first)
    expect(page.locator(f'tr[data-invoice-id="{on_time["id"]}"]')).to_have_count(0)
    # Under Issued both are listed, the late one with its Overdue badge.
    states.get_by_role("link", name="Issued").click()
    expect(page.locator(f'tr[data-invoice-id="{late["id"]}"]')).to_contain_text("Overdue")
    expect(page.locator(f'tr[data-invoice-id="{on_time["id"]}"]')).not_to_contain_text("Overdue")


@journey
def a_rejected_invoice_is_issued_again_or_cancelled_from_its_page(j: Journey):
    w = j.world
    again = w.approve(w.propose())
    cancelled = w.approve(w.propose(customer="Globex GmbH"))
    suffix = uuid.uuid4().hex[:8].upper()
    w.stop_issuing(again["id"], f"INV-REJ-{suffix}", "rejected", "the issuer refused the invoice: customer tax id missing")
    w.stop_issuing(cancelled["id"], f"INV-CON-{suffix}", "conflict", "the issuer holds another request under this operation key")
    listed = [i["id"] for i in w.api.ok("GET", "/v1/invoices?issuing=rejected&limit=100", w.approver)["items"]]
    assert again["id"] in listed and cancelled["id"] not in listed, listed
    page = j.page()
    j.sign_in(page)
    j.open_invoice(page, again["id"])
    expect(page.locator("#issuing-status")).to_have_text("Rejected by the issuer")
    expect(page.locator("#issuing-reason")).to_contain_text("customer tax id missing")
    expect(page.locator("#invoice-number")).to_have_text(f"INV-REJ-{suffix}")
    page.locator("#issue-again").click()
    expect(page.locator("#flash")).to_have_text("The invoice is issued.")
    expect(page.locator("#invoice-number")).to_have_text(f"INV-REJ-{suffix}")
    expect(page.locator("#issuing-status")).to_have_count(0)
    assert w.invoice(again["id"])["state"] == "issued"
    # The other waits on a conflict: cancel it; its number stays, void.
    j.open_invoice(page, cancelled["id"])
    expect(page.locator("#issuing-status")).to_have_text("Conflict with the issuer")
    page.locator("#cancel-reason").fill("Issued elsewhere.")
    page.locator("#cancel").click()
    expect(page.locator("#flash")).to_have_text("The invoice is cancelled.")
    expect(page.locator("#invoice-number")).to_have_text(f"INV-CON-{suffix} (void)")
    assert w.invoice(cancelled["id"])["number_void"] is True


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
    review = "#" + page.url.split("#", 1)[1]
    # The effect pages are reached from the navigation bar by keyboard, and their controls too.
    for link, heading, control in [
        ("Payments", "Payments", "document.activeElement.closest('nav.filters') !== null"),
        ("Jobs", "Jobs", "document.activeElement.closest('nav.filters') !== null"),
        ("Webhooks", "Webhook endpoints", "document.activeElement.id === 'webhook-url'"),
    ]:
        tab_to(page, f"document.activeElement.textContent === '{link}' && !!document.activeElement.closest('nav[aria-label=Main]')", backwards=True)
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", level=1)).to_have_text(heading)
        expect(page.get_by_role("heading", level=1)).to_be_focused()
        tab_to(page, control)
    tab_to(page, "document.activeElement.type === 'checkbox'")
    tab_to(page, "document.activeElement.id === 'create-webhook'")
    # A phone, and a 1280 px desktop at 200 % zoom (640 CSS pixels): nothing wider than the screen.
    # The invoice with the longest total (huge_amounts_… made one) must fit too.
    pending = w.api.ok("GET", "/v1/invoices?state=pending_approval&limit=100", w.approver)["items"]
    longest = "#/invoices/" + max(pending, key=lambda i: len(i["current_revision"]["total"]))["id"]
    effects = ["#/payments?status=all", "#/jobs", "#/webhooks"]
    payments = w.api.ok("GET", "/v1/payments?limit=1", w.approver)["items"]
    jobs = w.api.ok("GET", "/v1/jobs?limit=1", w.approver)["items"]
    effects += [f"#/payments/{x['id']}" for x in payments] + [f"#/jobs/{x['id']}" for x in jobs]
    for width, height in [(375, 740), (640, 450)]:
        page.set_viewport_size({"width": width, "height": height})
        for hash_ in ["#/inbox", review, longest, "#/organisation", "#/agents", "#/customers"] + effects:
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
    # The payments inbox: a bank feed reports payments for numbers Tauros never issued.
    world.report_payment("pay-20261130-0042", "1250.00", "INV-2026-000417")
    world.report_payment("pay-20261130-0043", "89.90", "INV-2025-000031")
    page.set_viewport_size({"width": 1280, "height": 760})
    page.goto(world.console + "#/payments")
    expect(page.locator("table.payments, .payments table")).to_be_visible()
    page.wait_for_load_state("networkidle")
    page.screenshot(path=f"{out_dir}/console-payments.png")
    j.close()
    for name in ["console-inbox.png", "console-review.png", "console-phone.png", "console-payments.png"]:
        print(f"wrote {out_dir}/{name}")


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--agent-key", required=True)
    parser.add_argument("--email", required=True)
    parser.add_argument("--password", required=True)
    parser.add_argument("--label", default="sqlite")
    parser.add_argument("--database-url", required=True, help="the demo server's database (the overdue journey moves a due date back)")
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
