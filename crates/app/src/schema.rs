//! Schemas of the domain's enums for the OpenAPI document: the domain knows nothing of OpenAPI,
//! so each is a marker type here, its values from the enum's `ALL` and each value explained by
//! an exhaustive `match` (a new variant does not compile until it is explained).

use utoipa::openapi::RefOr;
use utoipa::openapi::schema::{ObjectBuilder, Schema, Type};

use tauros_domain::address::Network;
use tauros_domain::destination::DestinationState;
use tauros_domain::effect::IssuingStatus;
use tauros_domain::governance::{ChangeKind, ChangeState};
use tauros_domain::identity::{ActorKind, Capability, Interface, Role, UserState};
use tauros_domain::invoice::{Action, DecisionKind, InvoiceState};
use tauros_domain::job::JobState;
use tauros_domain::settlement::{PaymentState, PaymentStatus, Unmatched};
use tauros_domain::webhook::EventType;

/// A string enum whose description says what each value means.
pub fn string_enum<T: Copy>(
    lead: &str,
    all: &[T],
    name: impl Fn(T) -> &'static str,
    meaning: impl Fn(T) -> &'static str,
) -> RefOr<Schema> {
    let explained: Vec<String> = all
        .iter()
        .map(|v| format!("`{}`: {}", name(*v), meaning(*v)))
        .collect();
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(all.iter().map(|v| name(*v))))
        .description(Some(format!("{lead} {}.", explained.join("; "))))
        .into()
}

/// A domain enum's schema under its component name, as a marker type of this crate.
macro_rules! domain_schema {
    ($ty:ident, $marker:ident, $component:literal, $schema:expr) => {
        #[doc = concat!("The OpenAPI schema of `", stringify!($ty), "`.")]
        pub struct $marker;
        schema_enum!($marker, $component, $schema);
    };
}

/// Implements `ToSchema` under a component name (tauros-api uses it for its wire-only enums).
#[macro_export]
macro_rules! schema_enum {
    ($ty:ty, $component:literal, $schema:expr) => {
        impl ::utoipa::PartialSchema for $ty {
            fn schema() -> ::utoipa::openapi::RefOr<::utoipa::openapi::schema::Schema> {
                $schema
            }
        }

        impl ::utoipa::ToSchema for $ty {
            fn name() -> ::std::borrow::Cow<'static, str> {
                ::std::borrow::Cow::Borrowed($component)
            }
        }
    };
}

domain_schema!(
    InvoiceState,
    InvoiceStateSchema,
    "InvoiceState",
    string_enum(
        "Where an invoice is in its lifecycle.",
        &InvoiceState::ALL,
        InvoiceState::as_str,
        |s| match s {
            InvoiceState::Draft => "being written by its agent, not in any approver's inbox",
            InvoiceState::PendingApproval => "submitted, waiting for an approver's decision",
            InvoiceState::Approved => "approved by a human, not yet issued",
            InvoiceState::Issued => "issued to the customer",
            InvoiceState::PartiallyPaid => "some, not all, of the total has been paid",
            InvoiceState::Paid => {
                "fully paid; final unless a confirmed payment is reversed later"
            }
            InvoiceState::Rejected => "refused by an approver (final)",
            InvoiceState::Cancelled => {
                "withdrawn by its proposer or cancelled by an approver (final)"
            }
        },
    )
);

domain_schema!(
    IssuingStatus,
    IssuingStatusSchema,
    "IssuingStatus",
    string_enum(
        "Where issuing an approved invoice stands (docs/EFFECTS.md, the runbook).",
        &IssuingStatus::ALL,
        IssuingStatus::as_str,
        |s| match s {
            IssuingStatus::Pending => "an issue job will run, is running or retrying",
            IssuingStatus::Blocked => {
                "the payment destination is no longer active (`issue_blocked`): cancel"
            }
            IssuingStatus::Rejected => {
                "the issuer refused it (`issue_rejected`): fix the cause and issue again, or \
                 cancel"
            }
            IssuingStatus::Conflict => {
                "the issuer holds another request under its key (`issue_conflict`): issue \
                 again or cancel"
            }
            IssuingStatus::NeedsReview => {
                "its claim outlived the issuer's memory of keys (`issue_needs_review`): check \
                 the issuer, then issue again or cancel"
            }
        },
    )
);

domain_schema!(
    Action,
    ActionSchema,
    "InvoiceAction",
    string_enum(
        "An invoice command; the same names label the audit events.",
        &Action::ALL,
        Action::as_str,
        |a| match a {
            Action::CreateDraft => "the agent proposed the invoice (revision 1)",
            Action::Revise => "the agent wrote a new revision",
            Action::Submit => "the agent asked for a decision",
            Action::Withdraw => "the agent, or a human who sees it, abandoned it",
            Action::Approve => "an approver accepted the current revision",
            Action::Reject => "an approver refused the invoice for good",
            Action::RequestChanges => "an approver sent it back to its agent",
            Action::Cancel => "an approver cancelled the approved invoice",
            Action::Issue => {
                "the approved invoice was numbered and issued (by the issuer, or an approver)"
            }
            Action::IssueBlocked => {
                "issuing found the destination no longer active; the invoice stays approved \
                 for a human to cancel"
            }
            Action::IssueRejected => {
                "the issuer refused the invoice definitively (its reason is the note); it stays \
                 approved with its number for an approver to issue again or cancel"
            }
            Action::IssueConflict => {
                "the issuer holds another request under the invoice's operation key (both are in \
                 the note); never finalised: an approver issues again or cancels"
            }
            Action::IssueNeedsReview => {
                "the claim is older than the issuer remembers keys and the issuer holds nothing: \
                 an approver checks the issuer, then issues again or cancels"
            }
            Action::PaymentApplied => {
                "confirmed payments now cover more of the total (issued or partially paid → \
                 partially paid or paid); the note names the payment"
            }
            Action::PaymentReversed => {
                "less of the total is covered than before, because a confirmed payment failed \
                 later (a reversal) or its events contradict each other; paid or partially paid \
                 → partially paid or issued"
            }
            Action::Paid => {
                "the invoice is now paid in full (paid → paid), written right after the \
                 `payment_applied` that took it there; delivered as `invoice.paid`"
            }
        },
    )
);

domain_schema!(
    DecisionKind,
    DecisionKindSchema,
    "DecisionKind",
    string_enum(
        "What an approver decided about one revision.",
        &DecisionKind::ALL,
        DecisionKind::as_str,
        |d| match d {
            DecisionKind::Approved => "the revision may be issued",
            DecisionKind::Rejected => "the invoice is refused for good",
            DecisionKind::ChangesRequested => "the agent must revise before submitting again",
        },
    )
);

domain_schema!(
    DestinationState,
    DestinationStateSchema,
    "DestinationState",
    string_enum(
        "Whether a payment destination still receives money.",
        &DestinationState::ALL,
        DestinationState::as_str,
        |s| match s {
            DestinationState::Active => "invoices may name it",
            DestinationState::Deactivated => {
                "stopped by its agent or owner; invoices naming it can no longer be submitted or approved"
            }
            DestinationState::Superseded => "replaced by a newer destination (`supersedes_id`)",
        },
    )
);

domain_schema!(
    Network,
    NetworkSchema,
    "Network",
    string_enum(
        "A payment network; it must carry the destination's currency.",
        &Network::ALL,
        Network::name,
        |n| match n {
            Network::Iban => "bank transfer to an IBAN (every fiat currency)",
            Network::Bitcoin => "Bitcoin mainnet, Taproot addresses (BTC)",
            Network::Ethereum => "Ethereum mainnet (ETH and every stablecoin)",
            Network::Arbitrum => "Arbitrum One (ETH, USDC, USDT, DAI)",
            Network::Base => "Base mainnet (ETH, USDC, DAI)",
        },
    )
);

domain_schema!(
    Capability,
    CapabilitySchema,
    "Capability",
    string_enum(
        "What an agent's key may be used for.",
        &Capability::ALL,
        Capability::as_str,
        |c| match c {
            Capability::Invoicing => {
                "customers, destinations and invoice proposals (the default)"
            }
            Capability::Settlement => "settlement events",
        },
    )
);

domain_schema!(
    Role,
    RoleSchema,
    "Role",
    string_enum(
        "A human's role, fixed when the human is invited.",
        &Role::ALL,
        Role::as_str,
        |r| match r {
            Role::Operator => "manages agents and customers, may withdraw, never decides",
            Role::Approver => "an operator who also decides on invoices and invites humans",
        },
    )
);

domain_schema!(
    ActorKind,
    ActorKindSchema,
    "ActorKind",
    string_enum(
        "Who acted.",
        &ActorKind::ALL,
        ActorKind::as_str,
        |k| match k {
            ActorKind::Human => "a signed-in human",
            ActorKind::Agent => "an agent with an API key",
            ActorKind::System => "Tauros itself (a job, the command line)",
        },
    )
);

domain_schema!(
    Interface,
    InterfaceSchema,
    "Interface",
    string_enum(
        "The entry point a command came through; set by Tauros, never by the caller.",
        &Interface::ALL,
        Interface::as_str,
        |i| match i {
            Interface::Api => "the REST API",
            Interface::Mcp => "the MCP tool surface",
            Interface::Ui => "the browser UI",
            Interface::Cli => "the command line",
            Interface::Job => "a background job",
        },
    )
);

domain_schema!(
    UserState,
    UserStateSchema,
    "UserState",
    string_enum(
        "Where a human's account stands.",
        &UserState::ALL,
        UserState::as_str,
        |s| match s {
            UserState::Invited => "invited; has not set a password yet",
            UserState::Active => "may sign in",
            UserState::Deactivated => {
                "deactivated by an approver: no sessions, no sign-in (their agents keep working)"
            }
        },
    )
);

domain_schema!(
    ChangeKind,
    ChangeKindSchema,
    "ChangeKind",
    string_enum(
        "What a proposal asks for.",
        &ChangeKind::ALL,
        ChangeKind::as_str,
        |k| match k {
            ChangeKind::Settings => {
                "organisation settings that turn `four_eyes` off (`four_eyes`, `shared_review`)"
            }
            ChangeKind::ApproverInvitation => {
                "inviting a human while `four_eyes` is on, as an approver or an operator (`email`, \
                 `role`; the name dates from when only approvers were proposals)"
            }
            ChangeKind::PaymentResolution => {
                "resolving a payment by hand while `four_eyes` is on (`payment_id`, \
                 `payment_resolution_id`: accept, allocate or void, with its reason)"
            }
            ChangeKind::SettlementAgent => {
                "creating an agent with the `settlement` capability while `four_eyes` is on \
                 (`agent_name`; once confirmed, `agent_id`: owned by the proposer, who takes \
                 its key with `POST /v1/agents/{id}/rotate-key`)"
            }
            ChangeKind::ApproverDeactivation => {
                "deactivating an approver while `four_eyes` is on (`user_id`; neither the \
                 proposer nor that approver may confirm it)"
            }
        },
    )
);

domain_schema!(
    ChangeState,
    ChangeStateSchema,
    "ChangeState",
    string_enum(
        "Where a proposal stands.",
        &ChangeState::ALL,
        ChangeState::as_str,
        |s| match s {
            ChangeState::Pending => "waiting for a different approver to confirm or reject it",
            ChangeState::Confirmed => "confirmed by a second approver and applied",
            ChangeState::Rejected => {
                "rejected by an approver (or withdrawn by its proposer, or its proposer was deactivated)"
            }
            ChangeState::Expired =>
                "nobody confirmed it within 7 days; it can no longer be confirmed",
        },
    )
);

domain_schema!(
    JobState,
    JobStateSchema,
    "JobState",
    string_enum(
        "Where a job is in its life.",
        &JobState::ALL,
        JobState::as_str,
        |s| match s {
            JobState::Available => "waiting for a worker, due now",
            JobState::Scheduled => "waiting for the time it was enqueued for",
            JobState::Running => "a worker holds it under a lease",
            JobState::Retryable => {
                "an execution failed or was interrupted; it runs again at `run_at`"
            }
            JobState::Completed => "done (final)",
            JobState::Discarded => {
                "failed for good: attempts or interruptions ran out, or a permanent error; an approver may retry it"
            }
            JobState::Cancelled => "stopped by an approver before it ran; an approver may retry it",
        },
    )
);

/// An event a webhook endpoint may receive (`domain::webhook::EventType`).
pub struct WebhookEventType;

schema_enum!(
    WebhookEventType,
    "WebhookEventType",
    string_enum(
        "An event a webhook endpoint may receive.",
        &EventType::all(),
        EventType::name,
        |t| match t {
            EventType::Invoice(action) => invoice_event(action),
        },
    )
);

/// What an invoice event means to a receiver.
fn invoice_event(action: Action) -> &'static str {
    match action {
        Action::CreateDraft => "an agent proposed an invoice (revision 1, a draft)",
        Action::Revise => "its agent wrote a new revision (the invoice is a draft again)",
        Action::Submit => "its agent asked for a decision",
        Action::Withdraw => "its agent, or a human who sees it, withdrew it",
        Action::Approve => "an approver approved the current revision",
        Action::Reject => "an approver rejected it for good",
        Action::RequestChanges => "an approver sent it back to its agent",
        Action::Cancel => "an approver cancelled the approved invoice",
        Action::Issue => "it was numbered and issued (by the issuer, or an approver)",
        Action::IssueBlocked => {
            "issuing found its destination no longer active; it stays approved for a human"
        }
        Action::IssueRejected => "the issuer refused it definitively; it waits for a human",
        Action::IssueConflict => {
            "the issuer holds another request under its operation key; it waits for a human"
        }
        Action::IssueNeedsReview => {
            "its claim outlived the issuer's memory of keys; it waits for a human"
        }
        Action::PaymentApplied => "confirmed payments added to what it has been paid",
        Action::PaymentReversed => {
            "a payment stopped counting (failed after confirmation, or contested)"
        }
        Action::Paid => "it is paid in full",
    }
}

domain_schema!(
    PaymentState,
    PaymentStateSchema,
    "PaymentState",
    string_enum(
        "What a settlement source says a payment is; a payment only moves forward \
         (`observed → confirmed → failed` or `observed → failed`).",
        &PaymentState::ALL,
        PaymentState::as_str,
        |s| match s {
            PaymentState::Observed => "seen at the source, not final: nothing of it counts yet",
            PaymentState::Confirmed => "final at the source: it counts toward its invoice",
            PaymentState::Failed => {
                "failed at the source; after `confirmed` it is a reversal and stops counting"
            }
        },
    )
);

domain_schema!(
    PaymentStatus,
    PaymentStatusSchema,
    "PaymentStatus",
    string_enum(
        "What Tauros made of a payment; `unmatched`, `overpaid` and `conflict` need a human.",
        &PaymentStatus::ALL,
        PaymentStatus::as_str,
        |s| match s {
            PaymentStatus::Pending => {
                "observed for a known, issued invoice in its currency; waiting for confirmation"
            }
            PaymentStatus::Applied => "confirmed and counted in full toward its invoice",
            PaymentStatus::Overpaid => {
                "confirmed, but part or all of it goes beyond the invoice's total"
            }
            PaymentStatus::Unmatched => {
                "it names no known invoice, one in another currency, or one not issued yet \
                 (`unmatched_reason`)"
            }
            PaymentStatus::Conflict => {
                "its events disagree about the amount, currency or invoice; nothing of it \
                 counts until a human has looked"
            }
            PaymentStatus::Failed => "it failed at the source or was reversed; nothing counts",
        },
    )
);

domain_schema!(
    Unmatched,
    UnmatchedSchema,
    "UnmatchedReason",
    string_enum(
        "Why a payment counts toward no invoice.",
        &Unmatched::ALL,
        Unmatched::as_str,
        |u| match u {
            Unmatched::UnknownInvoice => "no invoice of the organisation has that id or number",
            Unmatched::WrongCurrency => "the invoice is in another currency",
            Unmatched::InvoiceNotIssued => {
                "the invoice is not issued; the payment is matched when it is"
            }
        },
    )
);

#[cfg(test)]
mod tests {
    use super::*;
    use utoipa::ToSchema;

    fn values<T: ToSchema>() -> Vec<String> {
        let schema = serde_json::to_value(T::schema()).unwrap();
        schema["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_owned())
            .collect()
    }

    fn names<T: Copy>(all: &[T], name: impl Fn(T) -> &'static str) -> Vec<String> {
        all.iter().map(|v| name(*v).to_owned()).collect()
    }

    /// The document's enum lists are the domain's `ALL` constants, in order.
    #[test]
    fn enums_list_every_domain_value() {
        assert_eq!(
            values::<InvoiceStateSchema>(),
            names(&InvoiceState::ALL, InvoiceState::as_str)
        );
        assert_eq!(
            values::<ActionSchema>(),
            names(&Action::ALL, Action::as_str)
        );
        assert_eq!(
            values::<DecisionKindSchema>(),
            names(&DecisionKind::ALL, DecisionKind::as_str)
        );
        assert_eq!(
            values::<DestinationStateSchema>(),
            names(&DestinationState::ALL, DestinationState::as_str)
        );
        assert_eq!(
            values::<NetworkSchema>(),
            names(&Network::ALL, Network::name)
        );
        assert_eq!(
            values::<CapabilitySchema>(),
            names(&Capability::ALL, Capability::as_str)
        );
        assert_eq!(values::<RoleSchema>(), names(&Role::ALL, Role::as_str));
        assert_eq!(
            values::<ActorKindSchema>(),
            names(&ActorKind::ALL, ActorKind::as_str)
        );
        assert_eq!(
            values::<InterfaceSchema>(),
            names(&Interface::ALL, Interface::as_str)
        );
        assert_eq!(
            values::<JobStateSchema>(),
            names(&JobState::ALL, JobState::as_str)
        );
        assert_eq!(
            values::<WebhookEventType>(),
            names(&EventType::all(), EventType::name)
        );
    }
}

// `LineView`'s schema as its own `Serialize` writes it (the domain has no OpenAPI).
/// A line with every amount in both forms.
#[derive(utoipa::ToSchema)]
#[schema(as = LineResponse)]
#[allow(dead_code)]
pub struct LineSchema {
    /// As stored and sealed: trimmed and NFC-normalized.
    description: String,
    /// Normalized decimal string (`"1.50"` is shown as `"1.5"`).
    quantity: String,
    /// Unit price in major units, with exactly the currency's decimals.
    unit_amount: String,
    /// `unit_amount` in minor units: an exact JSON integer at any size. JavaScript's
    /// `JSON.parse` rounds integers above 2^53 (9007199254740992): read `unit_amount` there.
    unit_amount_minor: u128,
    /// `quantity × unit_amount`, exactly the currency's decimals.
    amount: String,
    /// `amount` in minor units: an exact JSON integer at any size. JavaScript's `JSON.parse`
    /// rounds integers above 2^53 (9007199254740992): read `amount` there.
    amount_minor: u128,
}
