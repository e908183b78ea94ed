#!/usr/bin/env python3
"""The agent benchmark (issue #27): a deterministic, scripted MCP client runs agent tasks against
a live `tauros serve --demo` and reports, per task, the calls it made, the failed ones, the
*avoidable* failed ones and the bytes the server returned; plus the size of one `tools/list`.

Python 3, standard library only. `scripts/agent-bench` starts the server and calls this; run by
hand against a server that is already up:

    python3 bench/agents/run.py --base http://127.0.0.1:8080 --agent-key tauros_... \
        --email demo@tauros.local --password tauros-demo-password \
        [--label NAME] [--out FILE] [--compare FILE] [--check]

The agent's policy (docs/MCP.md, "Agent benchmark") is what makes two servers comparable: it acts
only on what answers say, fixes exactly what a refusal's `errors[]` names, retries at most 5 times,
and never depends on a tool's text block being JSON when `structuredContent` is there.
"""

import argparse
import os
import datetime
import json
import sys
import time
import urllib.error
import urllib.request

PROTOCOL = "2025-06-18"
MAX_RETRIES = 5  # the policy's bound on fixing one call
MAX_PAGES = 50  # every listing loop is bounded
TODAY = datetime.date.today()
DUE = (TODAY + datetime.timedelta(days=30)).isoformat()


class TaskFailed(Exception):
    """The task could not be completed; its figures are still reported."""


DEADLINE = [float("inf")]  # time.monotonic() after which no further request is sent (--deadline)


def check_deadline():
    """Every loop of the benchmark makes requests, so this bounds each of them in time too."""
    if time.monotonic() > DEADLINE[0]:
        raise TaskFailed("the benchmark's deadline passed")


def invoice_of(data):
    """The invoice in a command's or get_invoice's answer (`{invoice, …}`), else the answer."""
    return data.get("invoice", data) if isinstance(data, dict) else {}


def http(method, url, body=None, headers=None):
    """One HTTP exchange: (status, body bytes). Never raises for an HTTP status."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


class Rest:
    """The humans' side and the setup steps: REST, never counted in a task's figures."""

    def __init__(self, base):
        self.base = base

    def call(self, method, path, token=None, body=None, key=None, ok=(200, 201, 202)):
        check_deadline()
        headers = {"Authorization": "Bearer " + token} if token else {}
        if key:
            headers["Idempotency-Key"] = key
        status, raw = http(method, self.base + path, body, headers)
        if status not in ok:
            raise TaskFailed(f"setup {method} {path}: HTTP {status} {raw[:300]!r}")
        return json.loads(raw) if raw else None


class Task:
    """One task's figures."""

    def __init__(self, name):
        self.name = name
        self.calls = 0
        self.failed = 0
        self.avoidable = 0
        self.bytes = 0
        self.completed = False
        self.wasted = 0
        self.notes = []
        self.log = []  # (tool, failed, avoidable, code, bytes): what was called, in order

    def figures(self):
        return {
            "task": self.name,
            "completed": self.completed,
            "calls": self.calls,
            "failed": self.failed,
            "avoidable": self.avoidable,
            "bytes": self.bytes,
            "wasted_calls": self.wasted,
            "notes": self.notes,
            "log": [
                {"tool": t, "failed": f, "avoidable": a, "code": c, "bytes": b}
                for (t, f, a, c, b) in self.log
            ],
        }


class Answer:
    def __init__(self, ok, data, code, rpc_error):
        self.ok = ok
        self.data = data  # structuredContent (or the text block parsed), or the JSON-RPC error
        self.code = code  # the problem's code when refused
        self.rpc_error = rpc_error  # True when the answer was a JSON-RPC error


class Agent:
    """The MCP client: one POST /mcp of one JSON-RPC message per call, stateless."""

    def __init__(self, base, key):
        self.url = base + "/mcp"
        self.key = key
        self.task = None
        self.next_id = 0

    def rpc(self, method, params, key=None):
        self.next_id += 1
        headers = {
            "Authorization": "Bearer " + (key or self.key),
            "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": PROTOCOL,
        }
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        return http("POST", self.url, body, headers)

    def tools(self):
        status, raw = self.rpc("tools/list", {})
        if status != 200:
            raise SystemExit(f"tools/list: HTTP {status} {raw[:300]!r}")
        names = [t["name"] for t in json.loads(raw)["result"]["tools"]]
        return len(raw), names

    def call(self, tool, args, inherent=False, key=None):
        """Calls a tool and counts it in the current task. A failure is avoidable unless the
        task is built to make it (`inherent`)."""
        check_deadline()
        status, raw = self.rpc("tools/call", {"name": tool, "arguments": args}, key)
        t = self.task
        t.calls += 1
        t.bytes += len(raw)
        if os.environ.get("AGENT_BENCH_DUMP"):
            # Every answer as it came, for reading what the bytes are (not used by the figures).
            with open(os.environ["AGENT_BENCH_DUMP"], "ab") as f:
                f.write(f"== {t.name} {tool}\n".encode() + raw + b"\n")
        try:
            msg = json.loads(raw)
        except ValueError:
            msg = {}
        rpc_error = "error" in msg
        result = msg.get("result") or {}
        data = result.get("structuredContent")
        if data is None and result.get("content"):
            # Only when structuredContent is missing: the text block may be a short summary.
            try:
                data = json.loads(result["content"][0].get("text", ""))
            except ValueError:
                data = None
        if rpc_error:
            data = msg["error"]
        failed = status != 200 or rpc_error or bool(result.get("isError"))
        code = None
        if failed:
            if isinstance(data, dict):
                code = data.get("code")
            t.failed += 1
            if not inherent:
                t.avoidable += 1
        t.log.append((tool, failed, failed and not inherent, code, len(raw)))
        return Answer(not failed, data, code, rpc_error)


def problems(data):
    """A refusal's list of problems: `errors[]`, or the top-level code and field alone."""
    if not isinstance(data, dict):
        return []
    errs = data.get("errors")
    if errs:
        return errs
    return [{"code": data.get("code"), "field": data.get("field")}]


def path_parts(field):
    """`lines[0].unit_amount` -> ["lines", 0, "unit_amount"]."""
    parts = []
    for piece in field.split("."):
        while "[" in piece:
            name, _, rest = piece.partition("[")
            if name:
                parts.append(name)
            index, _, piece = rest.partition("]")
            parts.append(int(index))
        if piece:
            parts.append(piece)
    return parts


def fix(args, data, memory):
    """The policy: fix exactly what the refusal names, or answer None (cannot fix)."""
    new = json.loads(json.dumps(args))
    fixed = False
    for p in problems(data):
        code, field = p.get("code"), p.get("field") or ""
        parts = path_parts(field) if field else []
        if code == "float_not_allowed" and parts:
            holder = new
            for part in parts[:-1]:
                holder = holder[part]
            value = holder[parts[-1]]
            holder[parts[-1]] = f"{value:.2f}" if isinstance(value, float) else str(value)
            fixed = True
        elif code == "required" and field == "due_date":
            new["due_date"] = DUE
            fixed = True
        elif code == "unknown_currency" and field == "currency":
            dest = memory["destinations"].get(new.get("payment_destination_id"))
            if dest is None:
                return None
            new["currency"] = dest["currency"]
            fixed = True
        elif code == "unknown_field" and parts and parts[0] in new:
            del new[parts[0]]
            fixed = True
        elif code == "idempotency_conflict" and "idempotency_key" in new:
            new["idempotency_key"] = new["idempotency_key"] + "-new"
            fixed = True
        else:
            return None
    return new if fixed else None


def call_fixing(agent, tool, args, memory, inherent_first=False):
    """Calls a tool and, while it is refused for what the answer names, fixes and retries (at
    most MAX_RETRIES times). The first call's failure is inherent when the task is built so."""
    answer = agent.call(tool, args, inherent=inherent_first)
    tries = 0
    while not answer.ok and tries < MAX_RETRIES:
        new = fix(args, answer.data, memory)
        if new is None:
            break
        args = new
        tries += 1
        answer = agent.call(tool, args)
    return answer, args


def invoice_args(memory, key, description, amount="1200.00", quantity="1"):
    return {
        "idempotency_key": key,
        "customer_id": memory["customer_id"],
        "payment_destination_id": memory["destination_id"],
        "currency": memory["currency"],
        "due_date": DUE,
        "lines": [{"description": description, "quantity": quantity, "unit_amount": amount}],
        "reasoning": "Agreed in the signed statement of work; delivered this month.",
    }


def list_all(agent, args):
    """Pages through list_invoices with the given filters (bounded); every page is a call."""
    items, cursor = [], None
    for _ in range(MAX_PAGES):
        page_args = dict(args)
        if cursor:
            page_args["cursor"] = cursor
        answer = agent.call("list_invoices", page_args)
        if not answer.ok:
            return None, answer
        items += answer.data["items"]
        cursor = answer.data.get("next_cursor")
        if not cursor:
            return items, answer
    raise TaskFailed("list_invoices: more pages than the bound")


class Bench:
    def __init__(self, base, agent_key, email, password):
        self.rest = Rest(base)
        self.agent = Agent(base, agent_key)
        self.agent_key = agent_key
        credentials = {"email": email, "password": password}
        signed_in = self.rest.call("POST", "/v1/sessions", None, credentials)
        self.human = signed_in["token"]
        self.memory = {"destinations": {}}
        self.tasks = []
        self.tool_names = []
        self.run_tag = datetime.datetime.now(datetime.timezone.utc).strftime("%H%M%S")

    def key(self, name):
        return f"agentbench-{self.run_tag}-{name}"

    # --- setup helpers (REST, not counted) ---
    def rest_invoice(self, key, description):
        body = invoice_args(self.memory, key, description)
        del body["idempotency_key"]
        return self.rest.call("POST", "/v1/invoices", self.agent_key, body, key=key)["invoice"]

    def rest_submit(self, invoice_id):
        path = f"/v1/invoices/{invoice_id}/submit"
        return self.rest.call("POST", path, self.agent_key)["invoice"]

    def rest_decide(self, invoice_id, action, reason=None):
        inv = self.rest.call("GET", f"/v1/invoices/{invoice_id}", self.human)
        rev = inv["current_revision"]
        body = {"revision_id": rev["id"], "payload_hash": rev["payload_hash"]}
        if reason:
            body["reason"] = reason
        return self.rest.call("POST", f"/v1/invoices/{invoice_id}/{action}", self.human, body)

    def run(self, name, fn):
        task = Task(name)
        self.agent.task = task
        try:
            fn(task)
            task.completed = True
        except TaskFailed as e:
            task.notes.append(f"not completed: {e}")
        except (KeyError, IndexError, TypeError, StopIteration) as e:
            # An answer (or an earlier task) lacked what the agent needed to go on.
            task.notes.append(f"not completed: {type(e).__name__} {e} (not in an answer)")
        self.tasks.append(task)

    # --- the tasks ---
    def t_propose(self, t):
        a = self.agent
        me = a.call("whoami", {})
        if not me.ok:
            raise TaskFailed("whoami refused")
        customers = a.call("list_customers", {})
        if not customers.ok:
            raise TaskFailed("list_customers refused")
        dests = a.call("list_payment_destinations", {"state": "active"})
        if not dests.ok:
            raise TaskFailed("list_payment_destinations refused")
        for d in dests.data["items"]:
            self.memory["destinations"][d["id"]] = d
        # The agent bills Acme Inc into its EUR bank account (the demo's seeded records).
        customer = next(c for c in customers.data["items"] if c["name"] == "Acme Inc")
        dest = next(d for d in dests.data["items"] if d["currency"] == "EUR")
        self.memory.update(customer_id=customer["id"], destination_id=dest["id"], currency="EUR")
        args = invoice_args(self.memory, self.key("propose"), "Implementation days", "400.00", "3")
        created, _ = call_fixing(a, "create_invoice_draft", args, self.memory)
        if not created.ok:
            raise TaskFailed(f"create refused: {created.code}")
        inv = invoice_of(created.data)
        submitted = a.call("submit_invoice", {"id": inv["id"]})
        if not submitted.ok:
            raise TaskFailed(f"submit refused: {submitted.code}")
        self.memory["proposed"] = invoice_of(submitted.data)

    def t_three_mistakes(self, t):
        args = invoice_args(self.memory, self.key("mistakes"), "Support hours")
        args["lines"][0]["unit_amount"] = 120.5  # a JSON float
        del args["due_date"]
        args["currency"] = "EUX"
        created, _ = call_fixing(
            self.agent, "create_invoice_draft", args, self.memory, inherent_first=True
        )
        if not created.ok:
            raise TaskFailed(f"create still refused: {created.code}")
        refusals = sum(1 for entry in t.log if entry[1])
        t.notes.append(f"{refusals} refusal(s) before the create")

    def t_preview(self, t):
        a = self.agent
        args = invoice_args(self.memory, self.key("preview"), "Preview checked work", "250.00", "2")
        preview_args = {k: v for k, v in args.items() if k != "idempotency_key"}
        preview_hash = None
        if "preview_invoice" in self.tool_names:
            preview = a.call("preview_invoice", preview_args)
        else:
            # tools/list did not name it; an agent that tries anyway hears a JSON-RPC error.
            preview = a.call("preview_invoice", preview_args, inherent=True)
        if preview.ok:
            preview_hash = preview.data["payload_hash"]
        elif preview.rpc_error:
            t.notes.append("preview unavailable")
        else:
            raise TaskFailed(f"preview refused a valid body: {preview.code}")
        created, _ = call_fixing(a, "create_invoice_draft", args, self.memory)
        if not created.ok:
            raise TaskFailed(f"create refused: {created.code}")
        inv = invoice_of(created.data)
        if preview_hash is not None:
            if inv["current_revision"]["payload_hash"] != preview_hash:
                raise TaskFailed("the created payload_hash differs from the previewed one")
            t.notes.append("created hash equals the preview's")
        submitted = a.call("submit_invoice", {"id": inv["id"]})
        if not submitted.ok:
            raise TaskFailed(f"submit refused: {submitted.code}")

    def t_revision_id(self, t):
        a = self.agent
        held = self.memory["proposed"]
        revision_id = held["current_revision"]["id"]
        got = a.call("get_invoice", {"id": revision_id}, inherent=True)
        if got.ok:
            raise TaskFailed("get_invoice answered a revision id as an invoice")
        invoice_id = got.data.get("invoice_id") if isinstance(got.data, dict) else None
        if invoice_id:
            t.notes.append("the not_found named the invoice id")
        else:
            # Nothing named: look it up by listing and match the revision id.
            items, answer = list_all(a, {"limit": 50})
            if items is None:
                raise TaskFailed(f"list_invoices refused: {answer.code}")
            match = [i for i in items if i["current_revision"]["id"] == revision_id]
            if not match:
                raise TaskFailed("no listed invoice has this revision")
            invoice_id = match[0]["id"]
            t.notes.append("looked the invoice up by listing")
        got = a.call("get_invoice", {"id": invoice_id})
        if not got.ok or invoice_of(got.data)["id"] != held["id"]:
            raise TaskFailed("get_invoice with the invoice id failed")

    def t_todo(self, t):
        a = self.agent
        # Setup (REST): two submitted invoices, changes requested on both by a human; the agent
        # already revised and resubmitted the first one before this task.
        ids = []
        for n in (1, 2):
            inv = self.rest_invoice(self.key(f"todo-{n}"), f"Consulting block {n}")
            self.rest_submit(inv["id"])
            self.rest_decide(inv["id"], "request-changes", f"Split block {n} by week.")
            ids.append(inv["id"])
        fixed_before = ids[0]
        self.rest.call(
            "POST",
            f"/v1/invoices/{fixed_before}/revise",
            self.agent_key,
            {
                "reasoning": "Split by week, as asked.",
                "lines": self.split_lines("Consulting block 1"),
            },
        )
        self.rest_submit(fixed_before)
        # The task: the to-do list, until nothing is listed (or only what this task handled).
        handled = set()
        for _ in range(5):
            items, answer = list_all(a, {"decision": "changes_requested", "limit": 50})
            if items is None:
                raise TaskFailed(f"list_invoices refused: {answer.code}")
            todo = [i for i in items if i["id"] not in handled]
            if not items:
                break
            if not todo:
                t.notes.append("still listed after being fixed (stale decision)")
                break
            for item in todo:
                before = t.calls
                self.fix_changes_requested(item["id"])
                handled.add(item["id"])
                if item["id"] == fixed_before:
                    t.wasted += t.calls - before
        else:
            raise TaskFailed("the to-do list never emptied")
        if ids[1] not in handled:
            raise TaskFailed("the open request for changes was not handled")
        if t.wasted:
            t.notes.append(f"{t.wasted} calls fixing the already-fixed invoice again")

    def split_lines(self, description):
        return [
            {"description": f"{description}, week 1", "quantity": "1", "unit_amount": "600.00"},
            {"description": f"{description}, week 2", "quantity": "1", "unit_amount": "600.00"},
        ]

    def fix_changes_requested(self, invoice_id):
        a = self.agent
        got = a.call("get_invoice", {"id": invoice_id})
        if not got.ok:
            raise TaskFailed(f"get_invoice refused: {got.code}")
        # The reason is on the invoice's decision; an answer without it lists `decisions`.
        decision = invoice_of(got.data).get("decision") or {}
        reason = decision.get("reason") if decision.get("decision") == "changes_requested" else None
        if reason is None:
            decisions = got.data.get("decisions") or []
            asked = [d for d in decisions if d.get("decision") == "changes_requested"]
            reason = asked[-1].get("reason") if asked else None
        if reason is None:
            raise TaskFailed("no reason to act on")
        # What to split: the first line of the current revision, as the answer shows it.
        lines = (invoice_of(got.data).get("current_revision") or {}).get("lines") or [{}]
        desc = lines[0].get("description", "Consulting block").split(",")[0]
        revised = a.call(
            "revise_invoice",
            {"id": invoice_id, "reasoning": f"As asked: {reason}", "lines": self.split_lines(desc)},
        )
        if not revised.ok:
            raise TaskFailed(f"revise refused: {revised.code}")
        submitted = a.call("submit_invoice", {"id": invoice_id})
        if not submitted.ok:
            raise TaskFailed(f"submit refused: {submitted.code}")

    def t_wait(self, t):
        a = self.agent
        args = invoice_args(self.memory, self.key("wait"), "Monthly retainer", "900.00")
        created, _ = call_fixing(a, "create_invoice_draft", args, self.memory)
        if not created.ok:
            raise TaskFailed(f"create refused: {created.code}")
        invoice_id = invoice_of(created.data)["id"]
        submitted = a.call("submit_invoice", {"id": invoice_id})
        if not submitted.ok:
            raise TaskFailed(f"submit refused: {submitted.code}")
        polls = 0
        for _ in range(10):
            got = a.call("get_invoice", {"id": invoice_id})
            polls += 1
            if not got.ok:
                raise TaskFailed(f"get_invoice refused: {got.code}")
            if invoice_of(got.data)["state"] not in ("pending_approval", "draft"):
                break
            if polls == 1:
                self.rest_decide(invoice_id, "approve")  # the human, after the first poll
        else:
            raise TaskFailed("never approved")
        if invoice_of(got.data)["state"] != "approved":
            raise TaskFailed(f"ended {got.data['invoice']['state']}")
        self.memory["approved"] = invoice_id
        t.notes.append(f"{polls} polls")

    def t_settlement(self, t):
        # Setup (REST): the approver issues the approved invoice by hand (the demo has no
        # issuer: it is numbered within the request) and creates a settlement-only agent.
        invoice_id = self.memory["approved"]
        issued = self.rest.call("POST", f"/v1/invoices/{invoice_id}/issue", self.human)["invoice"]
        number = issued["number"]
        if not number:
            raise TaskFailed("the issued invoice has no number")
        bank = self.rest.call(
            "POST",
            "/v1/agents",
            self.human,
            {"name": "Bench bank feed", "capabilities": ["settlement"]},
        )["api_key"]
        now = datetime.datetime.now(datetime.timezone.utc)
        event = {
            "source": self.key("bank"),
            "event_id": "evt-1",
            "payment_id": "pay-1",
            "invoice_number": number,
            "amount": issued["balance"],
            "currency": issued["current_revision"]["currency"],
            "status": "confirmed",
            "occurred_at": now.strftime("%Y-%m-%dT%H:%M:%SZ"),
        }
        first = self.agent.call("record_settlement_event", event, key=bank)
        if not first.ok:
            raise TaskFailed(f"record refused: {first.code}")
        again = self.agent.call("record_settlement_event", event, key=bank)
        if not again.ok or again.data.get("replayed") is not True:
            raise TaskFailed("the redelivery was not a replay")
        t.notes.append(f"invoice {first.data['invoice']['state']}, redelivery replayed")

    def t_paging(self, t):
        for n in range(60):
            self.rest_invoice(self.key(f"page-{n}"), f"Line item {n}")
        items, answer = list_all(self.agent, {"limit": 10})
        if items is None:
            raise TaskFailed(f"list_invoices refused: {answer.code}")
        ids = {i["id"] for i in items}
        if len(ids) != len(items) or len(ids) < 60:
            raise TaskFailed(f"{len(items)} listed, {len(ids)} distinct")
        t.notes.append(f"{len(ids)} invoices in {t.calls} pages")

    def t_conflict(self, t):
        a = self.agent
        key = self.key("conflict")
        args = invoice_args(self.memory, key, "Design review")
        first, _ = call_fixing(a, "create_invoice_draft", args, self.memory)
        if not first.ok:
            raise TaskFailed(f"create refused: {first.code}")
        self.memory["conflict_key"] = key
        other = invoice_args(self.memory, key, "Design review, second sprint", "800.00")
        second, _ = call_fixing(a, "create_invoice_draft", other, self.memory, inherent_first=True)
        if not second.ok:
            raise TaskFailed(f"create refused: {second.code}")
        if invoice_of(second.data)["id"] == invoice_of(first.data)["id"]:
            raise TaskFailed("the second create answered the first invoice")
        self.memory["second_draft"] = invoice_of(second.data)["id"]

    def t_withdraw(self, t):
        a = self.agent
        key = self.memory["conflict_key"]
        listed, args = call_fixing(a, "list_invoices", {"idempotency_key": key}, self.memory)
        if not listed.ok:
            raise TaskFailed(f"list_invoices refused: {listed.code}")
        items = [i for i in listed.data["items"] if i["idempotency_key"] == key]
        if "idempotency_key" not in args:
            # The filter was refused and dropped: page through everything and match.
            items, answer = listed.data["items"], listed
            cursor = listed.data.get("next_cursor")
            for _ in range(MAX_PAGES):
                if not cursor:
                    break
                answer = a.call("list_invoices", {"cursor": cursor})
                if not answer.ok:
                    raise TaskFailed(f"list_invoices refused: {answer.code}")
                items += answer.data["items"]
                cursor = answer.data.get("next_cursor")
            items = [i for i in items if i["idempotency_key"] == key]
        if len(items) != 1:
            raise TaskFailed(f"{len(items)} invoices with the key")
        invoice_id = items[0]["id"]
        first = a.call("withdraw_invoice", {"id": invoice_id})
        if not first.ok:
            raise TaskFailed(f"withdraw refused: {first.code}")
        again = a.call("withdraw_invoice", {"id": invoice_id})
        if not again.ok or again.data.get("replayed") is not True:
            raise TaskFailed("the second withdraw was not a replay")

    def t_new_destination(self, t):
        a = self.agent
        old = self.memory["destination_id"]
        made = a.call(
            "create_payment_destination",
            {
                "label": "Operating account (new bank)",
                "currency": "EUR",
                "network": "iban",
                "address": "GB82WEST12345698765432",
                "supersedes_id": old,
                "idempotency_key": self.key("destination"),
            },
        )
        if not made.ok:
            raise TaskFailed(f"create_payment_destination refused: {made.code}")
        new_id = made.data["payment_destination"]["id"]
        draft = self.memory["second_draft"]
        revised = a.call(
            "revise_invoice",
            {
                "id": draft,
                "reasoning": "Paid into the new bank account.",
                "payment_destination_id": new_id,
            },
        )
        if not revised.ok:
            raise TaskFailed(f"revise refused: {revised.code}")
        submitted = a.call("submit_invoice", {"id": draft})
        if not submitted.ok:
            raise TaskFailed(f"submit refused: {submitted.code}")

    def run_all(self):
        self.agent.task = Task("tools/list")
        size, self.tool_names = self.agent.tools()
        self.tools_list_bytes = size
        for name, fn in [
            ("01-propose", self.t_propose),
            ("02-three-mistakes", self.t_three_mistakes),
            ("03-preview-first", self.t_preview),
            ("04-revision-id", self.t_revision_id),
            ("05-todo-list", self.t_todo),
            ("06-wait-for-approval", self.t_wait),
            ("07-settlement", self.t_settlement),
            ("08-paging", self.t_paging),
            ("09-conflict-409", self.t_conflict),
            ("10-withdraw-by-key", self.t_withdraw),
            ("11-new-destination", self.t_new_destination),
        ]:
            self.run(name, fn)

    def report(self, label):
        return {
            "label": label,
            "tools_list_bytes": self.tools_list_bytes,
            "tools": self.tool_names,
            "tasks": [t.figures() for t in self.tasks],
        }


def totals(tasks):
    keys = ("calls", "failed", "avoidable", "bytes", "wasted_calls")
    return {k: sum(t[k] for t in tasks) for k in keys}


def print_table(report):
    label = report.get("label") or "this server"
    print(f"agent benchmark ({label}); tools/list: {report['tools_list_bytes']} bytes")
    print(
        f"{'task':<24} {'done':>4} {'calls':>5} {'failed':>6} {'avoidable':>9} {'bytes':>8}  notes"
    )
    for t in report["tasks"]:
        done = "yes" if t["completed"] else "NO"
        notes = "; ".join(t["notes"])
        print(
            f"{t['task']:<24} {done:>4} {t['calls']:>5} {t['failed']:>6} {t['avoidable']:>9} "
            f"{t['bytes']:>8}  {notes}"
        )
    s = totals(report["tasks"])
    print(
        f"{'total':<24} {'':>4} {s['calls']:>5} {s['failed']:>6} {s['avoidable']:>9} "
        f"{s['bytes']:>8}"
    )


def print_compare(before, after):
    print(
        f"compare: before = {before.get('label') or 'before'}, "
        f"after = {after.get('label') or 'this run'}; "
        f"tools/list {before['tools_list_bytes']} -> {after['tools_list_bytes']} bytes"
    )
    print(
        f"{'task':<24} {'calls':>9} {'failed':>7} {'avoidable':>9} "
        f"{'bytes before':>12} {'bytes after':>11} {'ratio':>6}"
    )
    old = {t["task"]: t for t in before["tasks"]}
    rows = []
    for t in after["tasks"]:
        b = old.get(t["task"])
        if b is None:
            continue
        rows.append((b, t))
    for b, t in rows:
        ratio = t["bytes"] / b["bytes"] if b["bytes"] else float("nan")
        print(
            f"{t['task']:<24} {b['calls']:>4}->{t['calls']:<4} {b['failed']:>3}->{t['failed']:<3} "
            f"{b['avoidable']:>4}->{t['avoidable']:<4} "
            f"{b['bytes']:>12} {t['bytes']:>11} {ratio:>6.2f}"
        )
    sb = totals([b for b, _ in rows])
    sa = totals([t for _, t in rows])
    ratio = sa["bytes"] / sb["bytes"] if sb["bytes"] else float("nan")
    print(
        f"{'total':<24} {sb['calls']:>4}->{sa['calls']:<4} {sb['failed']:>3}->{sa['failed']:<3} "
        f"{sb['avoidable']:>4}->{sa['avoidable']:<4} "
        f"{sb['bytes']:>12} {sa['bytes']:>11} {ratio:>6.2f}"
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base", required=True, help="the server, e.g. http://127.0.0.1:8080")
    p.add_argument("--agent-key", required=True)
    p.add_argument("--email", required=True, help="the approver's sign-in (setup steps)")
    p.add_argument("--password", required=True)
    p.add_argument("--label", default="", help="names this run in the JSON (e.g. a commit)")
    p.add_argument("--out", help="write the figures as JSON to this file")
    p.add_argument("--compare", help="a previous run's JSON: print before/after columns")
    p.add_argument(
        "--check",
        action="store_true",
        help="exit 1 when a task did not complete or made an avoidable failed call",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=600,
        help="seconds after which no further request is sent (the remaining tasks fail)",
    )
    o = p.parse_args()
    DEADLINE[0] = time.monotonic() + o.deadline

    bench = Bench(o.base.rstrip("/"), o.agent_key, o.email, o.password)
    bench.run_all()
    report = bench.report(o.label)
    print_table(report)
    if o.out:
        with open(o.out, "w") as f:
            json.dump(report, f, indent=1)
            f.write("\n")
    if o.compare:
        with open(o.compare) as f:
            print()
            print_compare(json.load(f), report)
    # A task passes when it completed without an avoidable failed call; scripts/test reads
    # the last line.
    bad = [t["task"] for t in report["tasks"] if not t["completed"] or t["avoidable"]]
    print()
    for name in bad:
        print(f"agent-bench: FAILED: {name}")
    print(f"agent-bench: {len(report['tasks']) - len(bad)} passed, {len(bad)} failed")
    return 1 if o.check and bad else 0


if __name__ == "__main__":
    sys.exit(main())
