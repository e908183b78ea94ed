"""The agent → approver journey through a client generated from Tauros' OpenAPI document with
openapi-python-client, with no hand edits.

scripts/clients generates the `tauros_client` package, type-checks this file with
`mypy --strict` (each `# type: ignore[...]` below marks a call the generated types must refuse;
strict mode reports an ignore that is not needed) and runs it against a live
`tauros serve --demo`:
    python journey.py BASE_URL AGENT_KEY APPROVER_EMAIL PASSWORD
"""

import datetime
import sys
import uuid

from tauros_client import AuthenticatedClient, Client
from tauros_client.api.customers import list_customers
from tauros_client.api.invoices import (
    approve,
    create_invoice,
    list_decisions,
    list_events,
    list_invoices,
    preview_invoice,
    submit,
)
from tauros_client.api.payment_destinations import list_destinations
from tauros_client.api.sessions import sign_in
from tauros_client.models import (
    CommandResponse,
    CreateInvoiceRequest,
    CustomerList,
    DecideRequest,
    DecisionKind,
    DestinationList,
    DestinationState,
    EmptyRequest,
    InvoiceList,
    InvoicePreviewResponse,
    InvoiceState,
    LineWithUnitAmount,
    LineWithUnitAmountMinor,
    Network,
    Problem,
    SessionResponse,
    SignInRequest,
)
from tauros_client.types import Response


def check(condition: bool, what: str) -> None:
    if not condition:
        raise SystemExit(f"python journey: {what}")


def command(response: Response[CommandResponse | Problem], status: int) -> CommandResponse:
    check(response.status_code == status, f"expected {status}, got {response.status_code}")
    check(isinstance(response.parsed, CommandResponse), "a command response")
    assert isinstance(response.parsed, CommandResponse)
    return response.parsed


def journey(base_url: str, agent_key: str, approver_email: str, password: str) -> None:
    agent = AuthenticatedClient(base_url=base_url, token=agent_key, raise_on_unexpected_status=True)

    destinations = list_destinations.sync(client=agent, state=DestinationState.ACTIVE, limit=100)
    check(isinstance(destinations, DestinationList), "destinations")
    assert isinstance(destinations, DestinationList)
    eur = next(
        d for d in destinations.items if d.currency == "EUR" and d.network == Network.IBAN
    )
    customers = list_customers.sync(client=agent, limit=10)
    assert isinstance(customers, CustomerList) and customers.items, "a customer"
    customer = customers.items[0]

    body = CreateInvoiceRequest(
        customer_id=customer.id,
        payment_destination_id=eur.id,
        currency="EUR",
        due_date=datetime.date(2099, 12, 31),
        lines=[
            LineWithUnitAmount(description="Discovery workshop", quantity="2", unit_amount="400.00"),
            LineWithUnitAmountMinor(description="Report", quantity="1", unit_amount_minor=12050),
            LineWithUnitAmountMinor(description="Travel", quantity="1.5", unit_amount_minor="10000"),
        ],
        reasoning="Workshop delivered as agreed",
    )
    # A dry run first: no key, nothing written; what a create would seal, and warnings.
    previewed = preview_invoice.sync(client=agent, body=body)
    assert isinstance(previewed, InvoicePreviewResponse), "a preview"
    check(previewed.total == "1070.50", previewed.total)
    warned = [w.code for w in previewed.warnings]
    check("due_date_far" in warned, f"preview warnings {warned}")

    key = str(uuid.uuid4())
    created = create_invoice.sync_detailed(client=agent, body=body, idempotency_key=key)
    invoice = command(created, 201).invoice
    check(created.headers["Idempotent-Replayed"] == "false", "Idempotent-Replayed: false")
    check(invoice.current_revision.total == "1070.50", invoice.current_revision.total)
    check(invoice.current_revision.total_minor == 107050, "total_minor")
    check(invoice.current_revision.payload_hash == previewed.payload_hash, "the previewed hash")
    again = create_invoice.sync_detailed(client=agent, body=body, idempotency_key=key)
    check(command(again, 200).replayed, "a replay")
    check(again.headers["Idempotent-Replayed"] == "true", "Idempotent-Replayed: true")

    # No body at all (the generated client's default), then `{}`: both mean "submit".
    submitted = command(submit.sync_detailed(invoice.id, client=agent), 200)
    check(submitted.invoice.state == InvoiceState.PENDING_APPROVAL, "submitted")
    again_submitted = command(submit.sync_detailed(invoice.id, client=agent, body=EmptyRequest()), 200)
    check(again_submitted.replayed, "a repeated submit is a replay")

    session = sign_in.sync(
        client=Client(base_url=base_url, raise_on_unexpected_status=True),
        body=SignInRequest(email=approver_email, password=password),
    )
    assert isinstance(session, SessionResponse), "signed in"
    approver = AuthenticatedClient(base_url=base_url, token=session.token, raise_on_unexpected_status=True)
    inbox = list_invoices.sync(client=approver, state=InvoiceState.PENDING_APPROVAL)
    assert isinstance(inbox, InvoiceList), "the inbox"
    pending = next(i for i in inbox.items if i.id == invoice.id)

    decision = DecideRequest(
        revision_id=pending.current_revision.id,
        payload_hash=pending.current_revision.payload_hash,
        reason="Matches the contract",
    )
    approved = command(approve.sync_detailed(pending.id, client=approver, body=decision), 200)
    check(approved.invoice.state == InvoiceState.APPROVED, "approved")

    decisions = list_decisions.sync(invoice.id, client=agent)
    check(
        not isinstance(decisions, Problem) and decisions is not None
        and decisions.items[0].decision == DecisionKind.APPROVED,
        "the agent reads the decision",
    )
    events = list_events.sync(invoice.id, client=approver)
    assert events is not None and not isinstance(events, Problem)
    trail = [f"{e.action.value}:{e.actor_kind.value}:{e.interface.value}" for e in events.items]
    check(
        trail == ["create_draft:agent:api", "submit:agent:api", "approve:human:api"],
        f"events {trail}",
    )

    refused = submit.sync(invoice.id, client=agent)
    check(isinstance(refused, Problem), "a problem")
    assert isinstance(refused, Problem)
    check(refused.code == "invalid_transition", refused.code)
    check(refused.from_ == InvoiceState.APPROVED, "from")
    print(f"python journey: invoice {invoice.id} {approved.invoice.state.value}")


def must_not_type_check(agent: AuthenticatedClient, body: CreateInvoiceRequest) -> None:
    """Calls the generated types must refuse. Never called."""
    CreateInvoiceRequest(  # type: ignore[call-arg]
        customer_id=body.customer_id,
        payment_destination_id=body.payment_destination_id,
        currency="EUR",
        due_date=body.due_date,
        reasoning="no lines",
    )
    list_invoices.sync(client=agent, state="pending_aproval")  # type: ignore[arg-type]
    create_invoice.sync(client=agent, body=body)  # type: ignore[call-arg]
    LineWithUnitAmountMinor(description="x", quantity="1", unit_amount_minor=1.5)  # type: ignore[arg-type]
    LineWithUnitAmount(description="x", quantity="1")  # type: ignore[call-arg]
    submit.sync(uuid.uuid4(), client=agent, body=None)  # type: ignore[arg-type]


if __name__ == "__main__":
    if len(sys.argv) != 5:
        raise SystemExit("usage: journey.py BASE_URL AGENT_KEY APPROVER_EMAIL PASSWORD")
    journey(*sys.argv[1:])
