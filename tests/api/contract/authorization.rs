//! The authorization matrix (docs/contract/domain.md §1, docs/contract/api.md,
//! docs/AUTHORIZATION.md): every invoice, customer, payment-destination, job, webhook-endpoint and
//! settlement route × every kind of caller, under each organisation setting that changes visibility
//! or separation of duties.
//!
//! [`MATRIX`] is the one table. `docs/AUTHORIZATION.md` shows the same table, rendered from
//! [`MATRIX`] by [`render`]; `the_document_shows_this_matrix` keeps the two identical.
//!
//! Every row sets up its own records, as the record's owner, in a state where the command could
//! succeed for the right caller (a draft for revise and submit, a pending invoice for withdraw
//! and the decisions, an approved one for cancel, a fresh customer or destination for the party
//! routes, an available job for the job routes and a cancelled one for retry, the
//! organisation's only webhook endpoint for the webhook routes, a draft to name in a settlement
//! event, and a payment reported for one for the payment reads). So a success
//! proves the permission and a refusal proves the refusal. A refused row
//! (and every read) must leave the business tables exactly as they were (row counts, invoice
//! states, destination states, the org audit trail); a successful write must change them.

use crate::helpers::settlement::{event_from, settlement_key};
use crate::helpers::{IBAN, TestApp, both_backends, expect_status, id_of};
use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use tauros_app::NewJob;
use tauros_app::runtime::testing::ECHO;
use uuid::Uuid;

both_backends!(
    default_settings_on_invoices,
    default_settings_on_customers_and_destinations,
    default_settings_on_jobs,
    default_settings_on_webhooks,
    default_settings_on_settlement,
    default_settings_on_authority,
    four_eyes,
    shared_review,
    four_eyes_with_shared_review,
);

/// Every route the matrix covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    CreateInvoice,
    /// `POST /v1/invoices/preview`: a create's dry run, which writes nothing.
    PreviewInvoice,
    ListInvoices,
    GetInvoice,
    Revisions,
    Decisions,
    Events,
    Verify,
    Revise,
    Submit,
    Withdraw,
    Approve,
    Reject,
    RequestChanges,
    Cancel,
    CreateCustomer,
    ListCustomers,
    GetCustomer,
    PatchCustomer,
    DeleteCustomer,
    CreateDestination,
    ListDestinations,
    GetDestination,
    Deactivate,
    ListJobs,
    GetJob,
    RetryJob,
    CancelJob,
    CreateWebhook,
    ListWebhooks,
    GetWebhook,
    RotateWebhookSecret,
    WebhookDeliveries,
    DeleteWebhook,
    EnableWebhook,
    ResendDelivery,
    ReportSettlementEvent,
    ListPayments,
    GetPayment,
    ResolvePayment,
    /// `POST /v1/agents` asking for `settlement`: only approvers grant it.
    GrantSettlement,
    /// `POST /v1/users/{id}/deactivate` of an approver of the subject's organisation.
    DeactivateApprover,
}

/// Who calls. "The subject" is the agent whose records the row is about: the agent of the
/// owner approver, except in the owner-operator column, where it is an agent the operator
/// created (and owns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Caller {
    /// The subject agent itself.
    OwningAgent,
    /// Another agent of the same org and the same owner.
    SiblingAgent,
    /// An agent of another organisation.
    OtherOrgAgent,
    /// An operator who owns the subject agent (created it with POST /v1/agents).
    OwnerOperator,
    /// An operator of the same org who does not own the subject agent.
    NonOwnerOperator,
    /// The approver who owns the subject agent.
    OwnerApprover,
    /// Another approver of the same org.
    NonOwnerApprover,
    /// The approver of another organisation.
    OtherOrgApprover,
    /// No `Authorization` header.
    Anonymous,
    /// An agent of the subject's owner whose key has only the `settlement` capability.
    SettlementAgent,
}

const CALLERS: [Caller; 10] = [
    Caller::OwningAgent,
    Caller::SiblingAgent,
    Caller::OtherOrgAgent,
    Caller::OwnerOperator,
    Caller::NonOwnerOperator,
    Caller::OwnerApprover,
    Caller::NonOwnerApprover,
    Caller::OtherOrgApprover,
    Caller::Anonymous,
    Caller::SettlementAgent,
];

/// The organisation settings a row runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Settings {
    /// `four_eyes` off, `shared_review` off.
    Defaults,
    /// `four_eyes` on.
    FourEyes,
    /// `shared_review` on.
    SharedReview,
    /// Both on.
    FourEyesSharedReview,
}

/// What the caller must get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Expect {
    /// The route's success status (201 for creates, 204 for delete, else 200), not a replay.
    Yes,
    /// 200, and the subject record is in the list.
    Listed,
    /// 200, and the subject record is not in the list.
    Hidden,
    /// 403 `forbidden`.
    Forbid,
    /// 403 `four_eyes_required`.
    FourEyes,
    /// 404 `not_found`, exactly as for an id that does not exist.
    NotFound,
    /// 422 `validation_failed` (the body names a record the caller may not use).
    Invalid,
    /// 401 `unauthorized`.
    NoAuth,
    /// 403 `missing_capability`: the key lacks the route's capability (`invoicing`, or
    /// `settlement` for reporting a settlement event), whatever the record.
    NoCap,
    /// 202: four eyes made the command a proposal another approver confirms.
    Proposed,
}

use Expect::{Forbid, FourEyes, Hidden, Invalid, Listed, NoAuth, NoCap, NotFound, Proposed, Yes};
use Route::*;
use Settings::{Defaults, FourEyesSharedReview, SharedReview};

/// The matrix. Columns, in order: owning agent, sibling agent, other org's agent, owner
/// operator, non-owner operator, owner approver, non-owner approver, other org's approver, no
/// credential, an agent whose key has only the `settlement` capability.
#[rustfmt::skip]
const MATRIX: &[(Settings, Route, [Expect; 10])] = &[
    //                                      agent      sibling    other-org  owner-op   other-op   owner-ap   other-ap   org-B-ap   anonymous  settlement
    (Defaults, CreateInvoice,              [Yes,       Invalid,   Invalid,   Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    NoAuth,    NoCap]),
    (Defaults, PreviewInvoice,             [Yes,       Invalid,   Invalid,   Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    NoAuth,    NoCap]),
    (Defaults, ListInvoices,               [Listed,    Hidden,    Hidden,    Listed,    Hidden,    Listed,    Hidden,    Hidden,    NoAuth,    NoCap]),
    (Defaults, GetInvoice,                 [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Revisions,                  [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Decisions,                  [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Events,                     [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Verify,                     [Forbid,    NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Revise,                     [Yes,       NotFound,  NotFound,  Forbid,    NotFound,  Forbid,    NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Submit,                     [Yes,       NotFound,  NotFound,  Forbid,    NotFound,  Forbid,    NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Withdraw,                   [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Approve,                    [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Reject,                     [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, RequestChanges,             [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Cancel,                     [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, CreateCustomer,             [Forbid,    Forbid,    Forbid,    Yes,       Invalid,   Yes,       Invalid,   Invalid,   NoAuth,    NoCap]),
    (Defaults, ListCustomers,              [Listed,    Hidden,    Hidden,    Listed,    Hidden,    Listed,    Hidden,    Hidden,    NoAuth,    NoCap]),
    (Defaults, GetCustomer,                [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, PatchCustomer,              [Forbid,    Forbid,    Forbid,    Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, DeleteCustomer,             [Forbid,    Forbid,    Forbid,    Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, CreateDestination,          [Yes,       Yes,       Yes,       Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    NoAuth,    NoCap]),
    (Defaults, ListDestinations,           [Listed,    Hidden,    Hidden,    Listed,    Hidden,    Listed,    Hidden,    Hidden,    NoAuth,    NoCap]),
    (Defaults, GetDestination,             [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, Deactivate,                 [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Defaults, ListJobs,                   [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Listed,    Listed,    Hidden,    NoAuth,    Forbid]),
    (Defaults, GetJob,                     [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, RetryJob,                   [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, CancelJob,                  [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, CreateWebhook,              [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       Yes,       NoAuth,    Forbid]),
    (Defaults, ListWebhooks,               [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Listed,    Listed,    Hidden,    NoAuth,    Forbid]),
    (Defaults, GetWebhook,                 [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, RotateWebhookSecret,        [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, WebhookDeliveries,          [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, DeleteWebhook,              [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, EnableWebhook,              [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, ResendDelivery,             [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (Defaults, ReportSettlementEvent,      [NoCap,     NoCap,     NoCap,     Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    NoAuth,    Yes]),
    (Defaults, ListPayments,               [Forbid,    Forbid,    Forbid,    Listed,    Hidden,    Listed,    Hidden,    Hidden,    NoAuth,    Forbid]),
    (Defaults, GetPayment,                 [Forbid,    Forbid,    Forbid,    Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    Forbid]),
    (Defaults, ResolvePayment,             [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       NotFound,  NotFound,  NoAuth,    Forbid]),
    (Defaults, GrantSettlement,            [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       Yes,       NoAuth,    Forbid]),
    (Defaults, DeactivateApprover,         [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),

    (Settings::FourEyes, GetInvoice,       [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Settings::FourEyes, Withdraw,         [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (Settings::FourEyes, Approve,          [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  NotFound,  NotFound,  NoAuth,    NoCap]),
    (Settings::FourEyes, Reject,           [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  NotFound,  NotFound,  NoAuth,    NoCap]),
    (Settings::FourEyes, RequestChanges,   [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  NotFound,  NotFound,  NoAuth,    NoCap]),
    (Settings::FourEyes, Cancel,           [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  NotFound,  NotFound,  NoAuth,    NoCap]),
    (Settings::FourEyes, ResolvePayment,   [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Proposed,  NotFound,  NotFound,  NoAuth,    Forbid]),
    (Settings::FourEyes, GrantSettlement,  [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Proposed,  Proposed,  Yes,       NoAuth,    Forbid]),
    (Settings::FourEyes, DeactivateApprover, [Forbid,  Forbid,    Forbid,    Forbid,    Forbid,    Proposed,  Proposed,  NotFound,  NoAuth,    Forbid]),

    (SharedReview, CreateInvoice,          [Yes,       Invalid,   Invalid,   Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    NoAuth,    NoCap]),
    (SharedReview, PreviewInvoice,         [Yes,       Invalid,   Invalid,   Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    NoAuth,    NoCap]),
    (SharedReview, ListInvoices,           [Listed,    Hidden,    Hidden,    Listed,    Hidden,    Listed,    Listed,    Hidden,    NoAuth,    NoCap]),
    (SharedReview, GetInvoice,             [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Revisions,              [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Decisions,              [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Events,                 [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Verify,                 [Forbid,    NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Revise,                 [Yes,       NotFound,  NotFound,  Forbid,    NotFound,  Forbid,    Forbid,    NotFound,  NoAuth,    NoCap]),
    (SharedReview, Submit,                 [Yes,       NotFound,  NotFound,  Forbid,    NotFound,  Forbid,    Forbid,    NotFound,  NoAuth,    NoCap]),
    (SharedReview, Withdraw,               [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Approve,                [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Reject,                 [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, RequestChanges,         [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, Cancel,                 [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (SharedReview, ListCustomers,          [Listed,    Hidden,    Hidden,    Listed,    Hidden,    Listed,    Hidden,    Hidden,    NoAuth,    NoCap]),
    (SharedReview, GetCustomer,            [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (SharedReview, ListDestinations,       [Listed,    Hidden,    Hidden,    Listed,    Hidden,    Listed,    Hidden,    Hidden,    NoAuth,    NoCap]),
    (SharedReview, GetDestination,         [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       NotFound,  NotFound,  NoAuth,    NoCap]),
    (SharedReview, ListPayments,           [Forbid,    Forbid,    Forbid,    Listed,    Hidden,    Listed,    Listed,    Hidden,    NoAuth,    Forbid]),
    (SharedReview, GetPayment,             [Forbid,    Forbid,    Forbid,    Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    Forbid]),
    (SharedReview, ResolvePayment,         [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Yes,       Yes,       NotFound,  NoAuth,    Forbid]),

    (FourEyesSharedReview, GetInvoice,     [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (FourEyesSharedReview, Withdraw,       [Yes,       NotFound,  NotFound,  Yes,       NotFound,  Yes,       Yes,       NotFound,  NoAuth,    NoCap]),
    (FourEyesSharedReview, Approve,        [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  Yes,       NotFound,  NoAuth,    NoCap]),
    (FourEyesSharedReview, Reject,         [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  Yes,       NotFound,  NoAuth,    NoCap]),
    (FourEyesSharedReview, RequestChanges, [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  Yes,       NotFound,  NoAuth,    NoCap]),
    (FourEyesSharedReview, Cancel,         [Forbid,    NotFound,  NotFound,  Forbid,    NotFound,  FourEyes,  Yes,       NotFound,  NoAuth,    NoCap]),
    (FourEyesSharedReview, ResolvePayment, [Forbid,    Forbid,    Forbid,    Forbid,    Forbid,    Proposed,  Proposed,  NotFound,  NoAuth,    Forbid]),
];

async fn default_settings_on_invoices(app: TestApp) {
    run(&app, |s, r| s == Defaults && r.is_invoice()).await;
}

async fn default_settings_on_customers_and_destinations(app: TestApp) {
    run(&app, |s, r| {
        s == Defaults
            && !r.is_invoice()
            && !r.is_job()
            && !r.is_webhook()
            && !r.is_settlement()
            && !r.is_authority()
    })
    .await;
}

async fn default_settings_on_authority(app: TestApp) {
    run(&app, |s, r| s == Defaults && r.is_authority()).await;
}

async fn default_settings_on_jobs(app: TestApp) {
    run(&app, |s, r| s == Defaults && r.is_job()).await;
}

async fn default_settings_on_webhooks(app: TestApp) {
    run(&app, |s, r| s == Defaults && r.is_webhook()).await;
}

async fn default_settings_on_settlement(app: TestApp) {
    run(&app, |s, r| s == Defaults && r.is_settlement()).await;
}

async fn four_eyes(app: TestApp) {
    run(&app, |s, _| s == Settings::FourEyes).await;
}

async fn shared_review(app: TestApp) {
    run(&app, |s, _| s == SharedReview).await;
}

async fn four_eyes_with_shared_review(app: TestApp) {
    run(&app, |s, _| s == FourEyesSharedReview).await;
}

/// Needs no database: runs once, not per backend.
#[test]
fn the_document_shows_this_matrix() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/AUTHORIZATION.md");
    let doc = std::fs::read_to_string(path).expect("docs/AUTHORIZATION.md");
    let (_, rest) = doc
        .split_once(BEGIN)
        .expect("docs/AUTHORIZATION.md has the begin marker");
    let (section, _) = rest
        .split_once(END)
        .expect("docs/AUTHORIZATION.md has the end marker");
    let rendered = render();
    assert!(
        section.trim() == rendered.trim(),
        "docs/AUTHORIZATION.md is out of sync with MATRIX; replace the text between the markers \
         with:\n\n{rendered}"
    );
    // Every cell of the document is a row the tests run.
    let cells: usize = rendered
        .lines()
        .filter(|l| l.starts_with("| `"))
        .map(|l| l.matches(" | ").count())
        .sum();
    assert_eq!(cells, MATRIX.len() * CALLERS.len());
}

const BEGIN: &str = "<!-- matrix:begin (rendered from tests/api/contract/authorization.rs) -->";
const END: &str = "<!-- matrix:end -->";

/// The markdown tables of docs/AUTHORIZATION.md.
fn render() -> String {
    let mut out = String::new();
    for settings in [
        Defaults,
        Settings::FourEyes,
        SharedReview,
        FourEyesSharedReview,
    ] {
        out.push_str(&format!("### {}\n\n| route |", settings.title()));
        for caller in CALLERS {
            out.push_str(&format!(" {} |", caller.label()));
        }
        out.push_str("\n|---|");
        out.push_str(&"---|".repeat(CALLERS.len()));
        out.push('\n');
        for (_, route, cells) in MATRIX.iter().filter(|(s, _, _)| *s == settings) {
            out.push_str(&format!("| `{}` |", route.label()));
            for expect in cells {
                out.push_str(&format!(" {} |", cell(*route, *expect)));
            }
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// The doc's notation for an expectation: the status, then the code or the list membership.
fn cell(route: Route, expect: Expect) -> String {
    match expect {
        Yes => route.success().as_u16().to_string(),
        Listed => "200 listed".into(),
        Hidden => "200 not listed".into(),
        Forbid => "403 forbidden".into(),
        FourEyes => "403 four_eyes_required".into(),
        NotFound => "404 not_found".into(),
        Invalid => "422 validation_failed".into(),
        NoAuth => "401 unauthorized".into(),
        NoCap => "403 missing_capability".into(),
        Proposed => "202".into(),
    }
}

impl Route {
    fn label(self) -> &'static str {
        match self {
            CreateInvoice => "POST /v1/invoices",
            PreviewInvoice => "POST /v1/invoices/preview",
            ListInvoices => "GET /v1/invoices",
            GetInvoice => "GET /v1/invoices/{id}",
            Revisions => "GET /v1/invoices/{id}/revisions",
            Decisions => "GET /v1/invoices/{id}/decisions",
            Events => "GET /v1/invoices/{id}/events",
            Verify => "GET /v1/invoices/{id}/verify",
            Revise => "POST /v1/invoices/{id}/revise",
            Submit => "POST /v1/invoices/{id}/submit",
            Withdraw => "POST /v1/invoices/{id}/withdraw",
            Approve => "POST /v1/invoices/{id}/approve",
            Reject => "POST /v1/invoices/{id}/reject",
            RequestChanges => "POST /v1/invoices/{id}/request-changes",
            Cancel => "POST /v1/invoices/{id}/cancel",
            CreateCustomer => "POST /v1/customers",
            ListCustomers => "GET /v1/customers",
            GetCustomer => "GET /v1/customers/{id}",
            PatchCustomer => "PATCH /v1/customers/{id}",
            DeleteCustomer => "DELETE /v1/customers/{id}",
            CreateDestination => "POST /v1/payment-destinations",
            ListDestinations => "GET /v1/payment-destinations",
            GetDestination => "GET /v1/payment-destinations/{id}",
            Deactivate => "POST /v1/payment-destinations/{id}/deactivate",
            ListJobs => "GET /v1/jobs",
            GetJob => "GET /v1/jobs/{id}",
            RetryJob => "POST /v1/jobs/{id}/retry",
            CancelJob => "POST /v1/jobs/{id}/cancel",
            CreateWebhook => "POST /v1/webhook-endpoints",
            ListWebhooks => "GET /v1/webhook-endpoints",
            GetWebhook => "GET /v1/webhook-endpoints/{id}",
            RotateWebhookSecret => "POST /v1/webhook-endpoints/{id}/rotate-secret",
            WebhookDeliveries => "GET /v1/webhook-endpoints/{id}/deliveries",
            DeleteWebhook => "DELETE /v1/webhook-endpoints/{id}",
            EnableWebhook => "POST /v1/webhook-endpoints/{id}/enable",
            ResendDelivery => "POST /v1/webhook-endpoints/{id}/deliveries/{delivery_id}/resend",
            ReportSettlementEvent => "POST /v1/settlement-events",
            ListPayments => "GET /v1/payments",
            GetPayment => "GET /v1/payments/{id}",
            ResolvePayment => "POST /v1/payments/{id}/resolve",
            GrantSettlement => "POST /v1/agents with capabilities [settlement]",
            DeactivateApprover => "POST /v1/users/{id}/deactivate of an approver",
        }
    }

    /// Authority over people and money: granting `settlement`, removing an approver.
    fn is_authority(self) -> bool {
        matches!(self, GrantSettlement | DeactivateApprover)
    }

    /// A settlement route: reported by settlement agents, read by humans.
    fn is_settlement(self) -> bool {
        matches!(
            self,
            ReportSettlementEvent | ListPayments | GetPayment | ResolvePayment
        )
    }

    /// A route of the job queue: organisation-wide, for approvers only.
    fn is_job(self) -> bool {
        matches!(self, ListJobs | GetJob | RetryJob | CancelJob)
    }

    /// A route of the organisation's webhook endpoints: for approvers only.
    fn is_webhook(self) -> bool {
        matches!(
            self,
            CreateWebhook
                | ListWebhooks
                | GetWebhook
                | RotateWebhookSecret
                | WebhookDeliveries
                | DeleteWebhook
                | EnableWebhook
                | ResendDelivery
        )
    }

    fn is_invoice(self) -> bool {
        matches!(
            self,
            CreateInvoice
                | PreviewInvoice
                | ListInvoices
                | GetInvoice
                | Revisions
                | Decisions
                | Events
                | Verify
                | Revise
                | Submit
                | Withdraw
                | Approve
                | Reject
                | RequestChanges
                | Cancel
        )
    }

    fn is_list(self) -> bool {
        matches!(
            self,
            ListInvoices
                | ListCustomers
                | ListDestinations
                | ListJobs
                | ListWebhooks
                | ListPayments
        )
    }

    /// A read, or a preview: answered without writing anything.
    fn is_read(self) -> bool {
        self.label().starts_with("GET ") || self == PreviewInvoice
    }

    /// A command answered with a `replayed` member (an invoice command, a payment resolution).
    fn is_command(self) -> bool {
        (self.is_invoice() && !self.is_read()) || self == ResolvePayment
    }

    fn success(self) -> StatusCode {
        match self {
            CreateInvoice
            | CreateCustomer
            | CreateDestination
            | CreateWebhook
            | ReportSettlementEvent
            | GrantSettlement => StatusCode::CREATED,
            DeleteCustomer | DeleteWebhook => StatusCode::NO_CONTENT,
            ResendDelivery => StatusCode::ACCEPTED,
            _ => StatusCode::OK,
        }
    }

    /// The state the subject's records must be in before the request.
    fn fixture(self) -> Fixture {
        match self {
            CreateInvoice | PreviewInvoice | CreateCustomer | CreateDestination | CreateWebhook
            | GrantSettlement => Fixture::Nothing,
            DeactivateApprover => Fixture::Approver,
            ListInvoices
            | GetInvoice
            | Revisions
            | Decisions
            | Events
            | Verify
            | Revise
            | Submit
            | ReportSettlementEvent => Fixture::Draft,
            Withdraw | Approve | Reject | RequestChanges => Fixture::Pending,
            Cancel => Fixture::Approved,
            ListCustomers | GetCustomer | PatchCustomer | DeleteCustomer => Fixture::Customer,
            ListDestinations | GetDestination | Deactivate => Fixture::Destination,
            ListJobs | GetJob | CancelJob => Fixture::Job,
            RetryJob => Fixture::CancelledJob,
            ListWebhooks | GetWebhook | RotateWebhookSecret | WebhookDeliveries | DeleteWebhook => {
                Fixture::Webhook
            }
            EnableWebhook => Fixture::DisabledWebhook,
            ResendDelivery => Fixture::FailedDelivery,
            ListPayments | GetPayment | ResolvePayment => Fixture::Payment,
        }
    }
}

impl Caller {
    fn label(self) -> &'static str {
        match self {
            Caller::OwningAgent => "owning agent",
            Caller::SiblingAgent => "sibling agent",
            Caller::OtherOrgAgent => "other org's agent",
            Caller::OwnerOperator => "owner operator",
            Caller::NonOwnerOperator => "non-owner operator",
            Caller::OwnerApprover => "owner approver",
            Caller::NonOwnerApprover => "non-owner approver",
            Caller::OtherOrgApprover => "other org's approver",
            Caller::Anonymous => "no credential",
            Caller::SettlementAgent => "settlement-only agent",
        }
    }
}

impl Settings {
    fn title(self) -> &'static str {
        match self {
            Defaults => "`four_eyes` off, `shared_review` off (the defaults)",
            Settings::FourEyes => "`four_eyes` on, `shared_review` off",
            SharedReview => "`four_eyes` off, `shared_review` on",
            FourEyesSharedReview => "`four_eyes` on, `shared_review` on",
        }
    }

    fn flags(self) -> (bool, bool) {
        match self {
            Defaults => (false, false),
            Settings::FourEyes => (true, false),
            SharedReview => (false, true),
            FourEyesSharedReview => (true, true),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fixture {
    Nothing,
    Draft,
    Pending,
    Approved,
    Customer,
    Destination,
    /// An available job of organisation A.
    Job,
    /// A job of organisation A that an approver cancelled.
    CancelledJob,
    /// Organisation A's only webhook endpoint (registered by A1; earlier ones deleted).
    Webhook,
    /// That endpoint, disabled (as failing past its window would).
    DisabledWebhook,
    /// That endpoint, subscribed to `invoice.created`, with the delivery of a new draft's
    /// event whose job an approver cancelled: failed, for a resend.
    FailedDelivery,
    /// A payment the settlement agent reported for a draft of the subject (unmatched: not
    /// issued), so its humans see it.
    Payment,
    /// A new approver of organisation A (invited with four eyes off), who owns nothing.
    Approver,
}

/// An agent with its owner, one customer and one active EUR destination.
#[derive(Clone)]
struct Party {
    agent_id: Uuid,
    key: String,
    owner_token: String,
    customer_id: Uuid,
    destination_id: Uuid,
}

/// Organisation A: approver A1 owns agent X and its sibling; operator O owns agent Y; approver
/// A2 owns nothing. Organisation B: an approver and their agent.
struct World {
    /// Organisation A.
    org_id: Uuid,
    x: Party,
    y: Party,
    sibling_key: String,
    operator_token: String,
    other_approver_token: String,
    foreign_key: String,
    foreign_approver_token: String,
    settlement_key: String,
    /// The org's (four_eyes, shared_review) as last set.
    flags: (bool, bool),
}

impl World {
    async fn new(app: &TestApp) -> World {
        let a = app.billing().await;
        let (_, sibling_key) = app.agent(&a.org.approver_token, "Sibling").await;
        let (_, operator_token) = app.human(&a.org.approver_token, "operator").await;
        let (y_id, y_key) = app.agent(&operator_token, "Operator's agent").await;
        let y_customer = app.customer(&operator_token, y_id, "Beta GmbH").await;
        let y_destination = app.destination(&y_key, "EUR", "iban", IBAN).await;
        let (_, other_approver_token) = app.human(&a.org.approver_token, "approver").await;
        let b = app.org().await;
        let settlement_key = settlement_key(app, &a.org.approver_token).await;
        World {
            org_id: a.org.org_id,
            x: Party {
                agent_id: a.org.agent_id,
                key: a.org.agent_key,
                owner_token: a.org.approver_token,
                customer_id: a.customer_id,
                destination_id: a.destination_id,
            },
            y: Party {
                agent_id: y_id,
                key: y_key,
                owner_token: operator_token.clone(),
                customer_id: y_customer,
                destination_id: y_destination,
            },
            sibling_key,
            operator_token,
            other_approver_token,
            foreign_key: b.agent_key,
            foreign_approver_token: b.approver_token,
            settlement_key,
            flags: (false, false),
        }
    }

    fn token(&self, caller: Caller) -> Option<&str> {
        Some(match caller {
            Caller::OwningAgent => &self.x.key,
            Caller::SiblingAgent => &self.sibling_key,
            Caller::OtherOrgAgent => &self.foreign_key,
            Caller::OwnerOperator | Caller::NonOwnerOperator => &self.operator_token,
            Caller::OwnerApprover => &self.x.owner_token,
            Caller::NonOwnerApprover => &self.other_approver_token,
            Caller::OtherOrgApprover => &self.foreign_approver_token,
            Caller::SettlementAgent => &self.settlement_key,
            Caller::Anonymous => return None,
        })
    }

    /// The agent whose records the row is about.
    fn subject(&self, caller: Caller) -> Party {
        if caller == Caller::OwnerOperator {
            self.y.clone()
        } else {
            self.x.clone()
        }
    }

    /// Sets the org's flags (as A1, an approver of org A), only when they differ. Turning
    /// `four_eyes` off is a proposal that A2 confirms.
    async fn set_flags(&mut self, app: &TestApp, flags: (bool, bool)) {
        if self.flags != flags {
            let settings = json!({"four_eyes": flags.0, "shared_review": flags.1});
            app.set_org_confirmed(&self.x.owner_token, &self.other_approver_token, settings)
                .await;
            self.flags = flags;
        }
    }
}

/// A registration the default outbound policy accepts (a public name; nothing is delivered:
/// no worker runs here).
fn webhook_body(n: usize) -> Value {
    json!({"url": format!("https://hooks.example.com/matrix/{n}"), "events": ["invoice.approved"]})
}

fn invoice_body(p: &Party) -> Value {
    crate::helpers::invoice_body_for(p.customer_id, p.destination_id)
}

/// A settlement event about a payment of `invoice`, unique to row `n`.
fn settlement_event(invoice: &Value, n: usize) -> Value {
    let (id, payment) = (format!("evt-{n}"), format!("pay-{n}"));
    event_from("matrix", &id, &payment, invoice, "100.00", "confirmed", 0)
}

/// The records a row's request names.
#[derive(Default)]
struct Target {
    invoice: Option<Value>,
    customer_id: Option<Uuid>,
    destination_id: Option<Uuid>,
    job_id: Option<Uuid>,
    webhook_id: Option<Uuid>,
    delivery_id: Option<Uuid>,
    payment_id: Option<Uuid>,
    user_id: Option<Uuid>,
}

impl Target {
    fn invoice_id(&self) -> String {
        self.invoice.as_ref().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_owned()
    }
}

/// Creates, as the subject's agent and owner, what the row's route needs.
async fn prepare(app: &TestApp, w: &mut World, p: &Party, fixture: Fixture, n: usize) -> Target {
    let mut target = Target::default();
    match fixture {
        Fixture::Nothing => {}
        Fixture::Customer => {
            target.customer_id = Some(
                app.customer(&p.owner_token, p.agent_id, &format!("Customer {n}"))
                    .await,
            );
        }
        Fixture::Destination => {
            target.destination_id = Some(app.destination(&p.key, "EUR", "iban", IBAN).await);
        }
        Fixture::Job | Fixture::CancelledJob => {
            let job = NewJob {
                org_id: w.org_id,
                kind: ECHO.to_owned(),
                args: json!({"note": n}),
                submission_id: None,
                max_attempts: None,
                run_at: None,
            };
            let id = app.app.submit_job(job).await.unwrap().id;
            if fixture == Fixture::CancelledJob {
                let res = app
                    .post(
                        &format!("/v1/jobs/{id}/cancel"),
                        &w.x.owner_token,
                        json!({}),
                    )
                    .await;
                expect_status(res, StatusCode::OK).await;
            }
            target.job_id = Some(id);
        }
        Fixture::Webhook | Fixture::DisabledWebhook | Fixture::FailedDelivery => {
            // One at a time: an organisation holds at most 20 endpoints.
            let token = &w.x.owner_token;
            let listed = expect_status(
                app.get("/v1/webhook-endpoints?limit=100", token).await,
                StatusCode::OK,
            )
            .await;
            for endpoint in listed["items"].as_array().unwrap() {
                let path = format!("/v1/webhook-endpoints/{}", id_of(endpoint));
                expect_status(app.delete(&path, token).await, StatusCode::NO_CONTENT).await;
            }
            let mut body = webhook_body(n);
            if fixture == Fixture::FailedDelivery {
                body["events"] = json!(["invoice.created"]);
            }
            let res = app.post("/v1/webhook-endpoints", token, body).await;
            let created = expect_status(res, StatusCode::CREATED).await;
            let endpoint: Uuid = id_of(&created["endpoint"]).parse().unwrap();
            target.webhook_id = Some(endpoint);
            let sql_id = crate::helpers::sql_uuid(&app.database_url, &endpoint.to_string());
            if fixture == Fixture::DisabledWebhook {
                let sql = format!(
                    "update webhook_endpoints set disabled_at = created_at where id = {sql_id}"
                );
                assert!(app.sql_exec(&sql).await);
            }
            if fixture == Fixture::FailedDelivery {
                let res = app
                    .create_invoice(&p.key, &format!("row-{n}"), &invoice_body(p))
                    .await;
                let invoice = expect_status(res, StatusCode::CREATED).await["invoice"].clone();
                let res = app
                    .get(&format!("/v1/invoices/{}/events", id_of(&invoice)), &p.key)
                    .await;
                let event: Uuid = id_of(&expect_status(res, StatusCode::OK).await["items"][0])
                    .parse()
                    .unwrap();
                let delivery = tauros_domain::webhook::delivery_id(w.org_id, endpoint, event);
                let sql =
                    format!("select count(*) from webhook_deliveries where endpoint_id = {sql_id}");
                assert_eq!(app.sql_count(&sql).await, 1);
                let job = tauros_domain::job::job_id_for_submission(
                    w.org_id,
                    "webhook.deliver.v1",
                    &format!("{endpoint}/{event}"),
                );
                let res = app
                    .post(&format!("/v1/jobs/{job}/cancel"), token, json!({}))
                    .await;
                expect_status(res, StatusCode::OK).await;
                target.delivery_id = Some(delivery);
            }
        }
        Fixture::Approver => {
            // Inviting is itself a proposal under four eyes: invite with it off.
            w.set_flags(app, (false, w.flags.1)).await;
            let (id, _) = app.human(&w.x.owner_token, "approver").await;
            target.user_id = Some(id);
        }
        Fixture::Payment => {
            let res = app
                .create_invoice(&p.key, &format!("row-{n}"), &invoice_body(p))
                .await;
            let invoice = expect_status(res, StatusCode::CREATED).await["invoice"].clone();
            let res = app
                .post(
                    "/v1/settlement-events",
                    &w.settlement_key,
                    settlement_event(&invoice, n),
                )
                .await;
            let recorded = expect_status(res, StatusCode::CREATED).await;
            target.payment_id = Some(recorded["payment"]["id"].as_str().unwrap().parse().unwrap());
            target.invoice = Some(invoice);
        }
        Fixture::Draft | Fixture::Pending | Fixture::Approved => {
            let res = app
                .create_invoice(&p.key, &format!("row-{n}"), &invoice_body(p))
                .await;
            let mut invoice = expect_status(res, StatusCode::CREATED).await["invoice"].clone();
            if fixture != Fixture::Draft {
                let res = app
                    .command(&p.key, id_of(&invoice), "submit", json!({}))
                    .await;
                invoice = expect_status(res, StatusCode::OK).await["invoice"].clone();
                if fixture == Fixture::Approved {
                    // A1 approves: the owner of X, and (with shared_review on) a reviewer of Y.
                    w.set_flags(app, (false, true)).await;
                    let res = app.approve(&w.x.owner_token, &invoice).await;
                    invoice = expect_status(res, StatusCode::OK).await["invoice"].clone();
                }
            }
            target.invoice = Some(invoice);
        }
    }
    target
}

/// The request of `route` on `target`, sent as `caller`.
async fn send(
    app: &TestApp,
    w: &World,
    route: Route,
    caller: Caller,
    p: &Party,
    t: &Target,
    n: usize,
) -> reqwest::Response {
    let invoice = |suffix: &str| format!("/v1/invoices/{}{suffix}", t.invoice_id());
    let customer = || format!("/v1/customers/{}", t.customer_id.unwrap());
    let destination = || format!("/v1/payment-destinations/{}", t.destination_id.unwrap());
    let job = |suffix: &str| format!("/v1/jobs/{}{suffix}", t.job_id.unwrap());
    let webhook = |suffix: &str| format!("/v1/webhook-endpoints/{}{suffix}", t.webhook_id.unwrap());
    let decision = |reason| TestApp::decision_body(t.invoice.as_ref().unwrap(), reason);
    let (method, path, body) = match route {
        CreateInvoice => (
            Method::POST,
            "/v1/invoices".to_owned(),
            Some(invoice_body(p)),
        ),
        PreviewInvoice => (
            Method::POST,
            "/v1/invoices/preview".to_owned(),
            Some(invoice_body(p)),
        ),
        ListInvoices => (Method::GET, "/v1/invoices?limit=100".to_owned(), None),
        GetInvoice => (Method::GET, invoice(""), None),
        Revisions => (Method::GET, invoice("/revisions"), None),
        Decisions => (Method::GET, invoice("/decisions"), None),
        Events => (Method::GET, invoice("/events"), None),
        Verify => (Method::GET, invoice("/verify"), None),
        Revise => (
            Method::POST,
            invoice("/revise"),
            Some(json!({
                "reasoning": "The workshop ran longer than planned.",
                "lines": [{"description": "Discovery workshop", "quantity": "1", "unit_amount": "450"}]
            })),
        ),
        Submit => (Method::POST, invoice("/submit"), Some(json!({}))),
        Withdraw => (Method::POST, invoice("/withdraw"), Some(json!({}))),
        Approve => (Method::POST, invoice("/approve"), Some(decision(None))),
        Reject => (
            Method::POST,
            invoice("/reject"),
            Some(decision(Some("Not agreed with the customer."))),
        ),
        RequestChanges => (
            Method::POST,
            invoice("/request-changes"),
            Some(decision(Some("Split the workshop into two lines."))),
        ),
        Cancel => (
            Method::POST,
            invoice("/cancel"),
            Some(json!({"reason": "The customer cancelled the engagement."})),
        ),
        CreateCustomer => (
            Method::POST,
            "/v1/customers".to_owned(),
            Some(
                json!({"agent_id": p.agent_id, "name": format!("New customer {n}"), "email": "ap@example.com"}),
            ),
        ),
        ListCustomers => (Method::GET, "/v1/customers?limit=100".to_owned(), None),
        GetCustomer => (Method::GET, customer(), None),
        PatchCustomer => (
            Method::PATCH,
            customer(),
            Some(json!({"name": format!("Renamed {n}")})),
        ),
        DeleteCustomer => (Method::DELETE, customer(), None),
        CreateDestination => (
            Method::POST,
            "/v1/payment-destinations".to_owned(),
            Some(
                json!({"label": "Account", "currency": "EUR", "network": "iban", "address": IBAN}),
            ),
        ),
        ListDestinations => (
            Method::GET,
            "/v1/payment-destinations?limit=100".to_owned(),
            None,
        ),
        GetDestination => (Method::GET, destination(), None),
        Deactivate => (Method::POST, format!("{}/deactivate", destination()), None),
        ListJobs => (Method::GET, "/v1/jobs?limit=100".to_owned(), None),
        GetJob => (Method::GET, job(""), None),
        RetryJob => (Method::POST, job("/retry"), None),
        CancelJob => (Method::POST, job("/cancel"), None),
        CreateWebhook => (
            Method::POST,
            "/v1/webhook-endpoints".to_owned(),
            Some(webhook_body(n)),
        ),
        ListWebhooks => (
            Method::GET,
            "/v1/webhook-endpoints?limit=100".to_owned(),
            None,
        ),
        GetWebhook => (Method::GET, webhook(""), None),
        RotateWebhookSecret => (Method::POST, webhook("/rotate-secret"), None),
        WebhookDeliveries => (Method::GET, webhook("/deliveries"), None),
        DeleteWebhook => (Method::DELETE, webhook(""), None),
        EnableWebhook => (Method::POST, webhook("/enable"), None),
        ResendDelivery => (
            Method::POST,
            webhook(&format!("/deliveries/{}/resend", t.delivery_id.unwrap())),
            None,
        ),
        ReportSettlementEvent => (
            Method::POST,
            "/v1/settlement-events".to_owned(),
            Some(settlement_event(t.invoice.as_ref().unwrap(), n)),
        ),
        ListPayments => (Method::GET, "/v1/payments?limit=100".to_owned(), None),
        GetPayment => (
            Method::GET,
            format!("/v1/payments/{}", t.payment_id.unwrap()),
            None,
        ),
        // The payment names a draft (`unmatched`): void is its way out.
        ResolvePayment => (
            Method::POST,
            format!("/v1/payments/{}/resolve", t.payment_id.unwrap()),
            Some(json!({"action": "void", "reason": "matrix"})),
        ),
        GrantSettlement => (
            Method::POST,
            "/v1/agents".to_owned(),
            Some(json!({"name": format!("Bank feed {n}"), "capabilities": ["settlement"]})),
        ),
        DeactivateApprover => (
            Method::POST,
            format!("/v1/users/{}/deactivate", t.user_id.unwrap()),
            None,
        ),
    };
    let mut req = app.client.request(method, app.url(&path));
    if let Some(token) = w.token(caller) {
        req = req.bearer_auth(token);
    }
    if route == CreateInvoice || route == ResolvePayment {
        req = req.header("idempotency-key", format!("matrix-{n}"));
    }
    if let Some(body) = body {
        req = req.json(&body);
    }
    req.send().await.expect("request")
}

/// What the caller got, in the notation of [`cell`].
async fn observe(res: reqwest::Response, route: Route, t: &Target) -> String {
    let status = res.status();
    let content_type = res
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let text = res.text().await.expect("body");
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if status.is_success() {
        if route.is_list() {
            let wanted = match route {
                ListInvoices => t.invoice_id(),
                ListCustomers => t.customer_id.unwrap().to_string(),
                ListJobs => t.job_id.unwrap().to_string(),
                ListWebhooks => t.webhook_id.unwrap().to_string(),
                ListPayments => t.payment_id.unwrap().to_string(),
                _ => t.destination_id.unwrap().to_string(),
            };
            let listed = body["items"]
                .as_array()
                .is_some_and(|items| items.iter().any(|i| i["id"] == wanted.as_str()));
            return format!(
                "{} {}",
                status.as_u16(),
                if listed { "listed" } else { "not listed" }
            );
        }
        if route.is_command() && body["replayed"] != false {
            return format!("{} replayed: {text}", status.as_u16());
        }
        return status.as_u16().to_string();
    }
    if content_type != "application/problem+json" || body["status"] != status.as_u16() {
        return format!("{} not a problem: {text}", status.as_u16());
    }
    format!(
        "{} {}",
        status.as_u16(),
        body["code"].as_str().unwrap_or("?")
    )
}

/// Everything a request could change: row counts, invoice and destination states, the org
/// audit trail. Raw SQL, the same text on both backends.
async fn snapshot(app: &TestApp) -> String {
    let parts = [
        "select count(*) from invoices",
        "select count(*) from invoice_revisions",
        "select count(*) from decisions",
        "select count(*) from invoice_events",
        "select count(*) from customers",
        "select count(*) from payment_destinations",
        "select count(*) from audit_events",
        "select count(*) from invoices where state = 'draft'",
        "select count(*) from invoices where state = 'pending_approval'",
        "select count(*) from invoices where state = 'approved'",
        "select count(*) from invoices where state = 'rejected'",
        "select count(*) from invoices where state = 'cancelled'",
        "select count(*) from payment_destinations where state = 'active'",
        "select count(*) from jobs",
        "select count(*) from jobs where state = 'available'",
        "select count(*) from jobs where state = 'cancelled'",
        "select count(*) from webhook_endpoints",
        "select count(*) from payments",
        "select count(*) from settlement_events",
        "select count(*) from payment_resolutions",
        "select count(*) from org_changes",
        "select count(*) from agents",
        "select count(*) from users where deactivated_at is not null",
    ];
    let sql = format!(
        "select {}",
        parts
            .iter()
            .map(|p| format!("cast(({p}) as text)"))
            .collect::<Vec<_>>()
            .join(" || ',' || ")
    );
    app.sql_scalar::<String>(&sql).await
}

/// Runs every row `pick` selects and fails once, listing every cell that did not hold.
async fn run(app: &TestApp, pick: impl Fn(Settings, Route) -> bool) {
    let mut w = World::new(app).await;
    let mut failures = Vec::new();
    let mut n = 0;
    let mut rows = 0;
    for (settings, route, cells) in MATRIX.iter().filter(|(s, r, _)| pick(*s, *r)) {
        for (caller, expect) in CALLERS.iter().zip(cells) {
            n += 1;
            rows += 1;
            let p = w.subject(*caller);
            let target = prepare(app, &mut w, &p, route.fixture(), n).await;
            w.set_flags(app, settings.flags()).await;
            let before = snapshot(app).await;
            let res = send(app, &w, *route, *caller, &p, &target, n).await;
            let got = observe(res, *route, &target).await;
            let after = snapshot(app).await;
            let row = format!("{settings:?} | {} | {}", route.label(), caller.label());
            let wanted = cell(*route, *expect);
            if got != wanted {
                failures.push(format!("{row}: expected {wanted}, got {got}"));
            }
            let writes = matches!(*expect, Yes | Proposed) && !route.is_read();
            if writes && before == after {
                failures.push(format!("{row}: succeeded but changed nothing"));
            }
            if !writes && before != after {
                failures.push(format!("{row}: changed the database ({before} → {after})"));
            }
        }
    }
    assert!(rows > 0, "the filter selected no row");
    assert!(
        failures.is_empty(),
        "{} of {rows} cells failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
