//! S8 (docs/RELIABILITY.md): a failpoint after every statement of the create and decision
//! transactions, and after their commit. For each point of each transaction: the request fails
//! there (503 `unavailable`, as in a database outage); before the retry nothing of it is
//! stored (no invoice, revision, decision, event, delivery job, issue job or submission record;
//! the API shows no trace either); the same request again then has exactly one effect, with one
//! event. A failure after the commit is a lost answer: the write stands, and the retry is a
//! replay of it (S7) that adds nothing.
//!
//! The points come from `Failpoint::ALL`, and [`scenarios`] must place every one of them (an
//! exhaustive match, with a test that no point is left without a scenario): a new failpoint
//! does not compile into this file without being tested. Each scenario also checks that the
//! point it arms actually fired, so a point listed on a path it is not on fails the test.
//!
//! The org of each test has one webhook endpoint subscribed to the events of these invoices (no worker
//! runs, so its deliveries stay queued as rows to count) and, for `ApproveIssuing`, an issuer
//! configured, so an approval enqueues the issue job too.

use crate::helpers::{
    Backend, Billing, TestApp, both_backends, expect_problem, expect_status, id_of, invoice_body,
    spawn_app_with, sql_uuid,
};
use reqwest::{Response, StatusCode};
use serde_json::{Value, json};
use std::collections::HashSet;
use tauros_api::HttpConfig;
use tauros_app::failpoints::{Failpoint, arm};
use tauros_app::{AppConfig, WebhookConfig};
use tauros_domain::webhook::AllowList;

both_backends!(a_failpoint_fires_once_and_only_for_the_organisation_it_was_armed_for);

both_backends!(
    backend: every_create_failpoint_rolls_back_and_the_retry_creates_once,
    every_approve_failpoint_rolls_back_and_the_retry_approves_once,
    every_reject_failpoint_rolls_back_and_the_retry_rejects_once,
    every_request_changes_failpoint_rolls_back_and_the_retry_requests_them_once,
    every_approve_failpoint_with_an_issuer_rolls_back_the_issue_job_too,
);

/// A transaction under test, with the setup it runs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// `POST /v1/invoices`.
    Create,
    /// `POST /v1/invoices/{id}/approve` on a pending invoice, no issuer.
    Approve,
    /// `POST /v1/invoices/{id}/reject` with a reason.
    Reject,
    /// `POST /v1/invoices/{id}/request-changes` with a reason (back to draft).
    RequestChanges,
    /// Approve with an issuer configured: the issue job is enqueued in the same transaction
    /// (before the event's delivery, so the job points fire on the issue job first).
    ApproveIssuing,
}

use Scenario::{Approve, ApproveIssuing, Create, Reject, RequestChanges};

/// The scenarios whose transaction passes `point`. Exhaustive on purpose: a new failpoint is a
/// compile error here until it is placed, and then it is tested.
fn scenarios(point: Failpoint) -> &'static [Scenario] {
    use Failpoint as F;
    match point {
        F::AgentHeld
        | F::CustomerLocked
        | F::DestinationLocked
        | F::InvoiceInserted
        | F::RevisionInserted
        | F::CreateCommitted => &[Create],
        F::InvoiceLocked
        | F::AgentRead
        | F::OrgRead
        | F::ExistingDecisionRead
        | F::NamedRevisionRead
        | F::CurrentRevisionRead
        | F::DecisionDestinationLocked
        | F::DecisionInserted
        | F::InvoiceUpdated
        | F::InvoiceReadBack
        | F::CommandCommitted => &[Approve, Reject, RequestChanges, ApproveIssuing],
        F::EventInserted | F::EndpointsRead | F::JobSubmissionInserted | F::JobInserted => {
            &[Create, Approve, Reject, RequestChanges, ApproveIssuing]
        }
    }
}

/// Whether a failure at `point` comes after the commit (the write stands).
fn after_commit(point: Failpoint) -> bool {
    matches!(
        point,
        Failpoint::CreateCommitted | Failpoint::CommandCommitted
    )
}

/// The points of one scenario, in statement order.
fn points_of(scenario: Scenario) -> Vec<Failpoint> {
    Failpoint::ALL
        .iter()
        .copied()
        .filter(|p| scenarios(*p).contains(&scenario))
        .collect()
}

#[test]
fn every_failpoint_is_placed_in_a_scenario_and_named_once() {
    assert!(!Failpoint::ALL.is_empty());
    let names: HashSet<&str> = Failpoint::ALL.iter().map(|p| p.name()).collect();
    assert_eq!(
        names.len(),
        Failpoint::ALL.len(),
        "failpoint names are unique"
    );
    for point in Failpoint::ALL {
        assert!(!scenarios(*point).is_empty(), "{point:?} is tested nowhere");
    }
    // Every transaction has its failure after the commit, and it is the last point.
    for scenario in [Create, Approve, Reject, RequestChanges, ApproveIssuing] {
        let points = points_of(scenario);
        assert!(
            points.last().is_some_and(|p| after_commit(*p)),
            "{scenario:?}: {points:?}"
        );
        assert_eq!(points.iter().filter(|p| after_commit(**p)).count(), 1);
    }
}

/// Arming is keyed by organisation (tests run in parallel in one process), fires once, and
/// ends when its guard is dropped.
async fn a_failpoint_fires_once_and_only_for_the_organisation_it_was_armed_for(app: TestApp) {
    let a = app.billing().await;
    let b = app.billing().await;
    let armed = arm(a.org.org_id, Failpoint::RevisionInserted);
    // Another organisation passes the point untouched.
    app.draft(&b, "other-org").await;
    assert!(!armed.fired());
    // The armed one fails there, once.
    let res = app
        .create_invoice(&a.org.agent_key, "armed", &invoice_body(&a))
        .await;
    expect_problem(res, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    assert!(armed.fired());
    app.draft(&a, "after-firing").await;
    // Dropping an unfired guard disarms it.
    drop(arm(a.org.org_id, Failpoint::RevisionInserted));
    app.draft(&a, "after-disarming").await;
    app.draft(&a, "armed").await;
}

async fn every_create_failpoint_rolls_back_and_the_retry_creates_once(backend: Backend) {
    run(backend, Create).await;
}

async fn every_approve_failpoint_rolls_back_and_the_retry_approves_once(backend: Backend) {
    run(backend, Approve).await;
}

async fn every_reject_failpoint_rolls_back_and_the_retry_rejects_once(backend: Backend) {
    run(backend, Reject).await;
}

async fn every_request_changes_failpoint_rolls_back_and_the_retry_requests_them_once(
    backend: Backend,
) {
    run(backend, RequestChanges).await;
}

async fn every_approve_failpoint_with_an_issuer_rolls_back_the_issue_job_too(backend: Backend) {
    run(backend, ApproveIssuing).await;
}

/// Every point of `scenario`, one after the other on one server and organisation, each on a
/// request (and invoice) of its own.
async fn run(backend: Backend, scenario: Scenario) {
    let config = AppConfig {
        issuer_configured: scenario == ApproveIssuing,
        webhooks: WebhookConfig {
            allow_hosts: AllowList::parse("127.0.0.1").unwrap(),
            secret_key: None,
            ..WebhookConfig::default()
        },
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let b = app.billing().await;
    // Every event here enqueues one delivery to this endpoint (nothing delivers it here).
    let res = app
        .post(
            "/v1/webhook-endpoints",
            &b.org.approver_token,
            json!({
                "url": "http://127.0.0.1:9/hooks",
                "events": [
                    "invoice.created",
                    "invoice.submitted",
                    "invoice.approved",
                    "invoice.rejected",
                    "invoice.changes_requested",
                ],
            }),
        )
        .await;
    expect_status(res, StatusCode::CREATED).await;

    let points = points_of(scenario);
    assert!(points.len() >= 5, "{scenario:?}: {points:?}");
    for point in points {
        match scenario {
            Create => create_through(&app, &b, point).await,
            Approve | Reject | RequestChanges | ApproveIssuing => {
                decide_through(&app, &b, scenario, point).await;
            }
        }
    }
}

/// What one create or decision must add, and what a refusal or rolled-back one must leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rows {
    invoices: i64,
    revisions: i64,
    decisions: i64,
    /// The invoices' audit trail (hash-chained events).
    events: i64,
    /// Webhook delivery jobs.
    deliveries: i64,
    /// Issue jobs.
    issue_jobs: i64,
    /// Job submission records (one per delivery or issue job).
    submissions: i64,
    /// The organisation's own audit trail (neither transaction writes to it).
    org_audit: i64,
}

impl Rows {
    /// The organisation's rows now.
    async fn of(app: &TestApp, b: &Billing) -> Rows {
        let org = sql_uuid(&app.database_url, &b.org.org_id.to_string());
        let count = |table: &str, more: &str| {
            format!("select count(*) from {table} where org_id = {org}{more}")
        };
        Rows {
            invoices: app.sql_count(&count("invoices", "")).await,
            revisions: app.sql_count(&count("invoice_revisions", "")).await,
            decisions: app.sql_count(&count("decisions", "")).await,
            events: app.sql_count(&count("invoice_events", "")).await,
            deliveries: app
                .sql_count(&count("jobs", " and kind = 'webhook.deliver.v1'"))
                .await,
            issue_jobs: app
                .sql_count(&count("jobs", " and kind = 'invoice.issue.v1'"))
                .await,
            submissions: app.sql_count(&count("job_submissions", "")).await,
            org_audit: app.sql_count(&count("audit_events", "")).await,
        }
    }

    /// These rows plus what one successful create writes.
    fn plus_create(self) -> Rows {
        Rows {
            invoices: self.invoices + 1,
            revisions: self.revisions + 1,
            events: self.events + 1,
            deliveries: self.deliveries + 1,
            submissions: self.submissions + 1,
            ..self
        }
    }

    /// These rows plus what one successful decision writes (`issuing`: and its issue job).
    fn plus_decision(self, issuing: bool) -> Rows {
        let issue = i64::from(issuing);
        Rows {
            decisions: self.decisions + 1,
            events: self.events + 1,
            deliveries: self.deliveries + 1,
            issue_jobs: self.issue_jobs + issue,
            submissions: self.submissions + 1 + issue,
            ..self
        }
    }
}

/// Sends the request with `point` armed for the org: it must fail there, with a retryable 503.
async fn fails_at(
    b: &Billing,
    point: Failpoint,
    send: impl std::future::Future<Output = Response>,
) {
    let armed = arm(b.org.org_id, point);
    let res = send.await;
    assert!(armed.fired(), "{point:?} was not reached");
    let problem = expect_problem(res, StatusCode::SERVICE_UNAVAILABLE, "unavailable").await;
    assert!(problem.detail.contains("retry"), "{point:?}: {problem}");
}

/// Asserts a command answer: 200 or 201, fresh or replayed (the header and body agree);
/// returns the invoice.
async fn answered(res: Response, status: StatusCode, replayed: bool, point: Failpoint) -> Value {
    let header = res
        .headers()
        .get("idempotent-replayed")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let body = expect_status(res, status).await;
    let marker = if replayed { "true" } else { "false" };
    assert_eq!(header.as_deref(), Some(marker), "{point:?}: {body}");
    assert_eq!(body["replayed"], replayed, "{point:?}: {body}");
    body["invoice"].clone()
}

async fn create_through(app: &TestApp, b: &Billing, point: Failpoint) {
    let key = format!("s8-{}", point.name());
    let body = invoice_body(b);
    let send = || app.create_invoice(&b.org.agent_key, &key, &body);
    let before = Rows::of(app, b).await;

    fails_at(b, point, send()).await;
    let by_key = format!("/v1/invoices?idempotency_key={key}");
    let listed = expect_status(app.get(&by_key, &b.org.agent_key).await, StatusCode::OK).await;
    let listed = listed["items"].as_array().unwrap().clone();
    let invoice = if after_commit(point) {
        // The answer was lost after the commit: the invoice is there, once.
        assert_eq!(Rows::of(app, b).await, before.plus_create(), "{point:?}");
        assert_eq!(listed.len(), 1, "{point:?}: {listed:?}");
        // The retry replays it and writes nothing more.
        let replay = answered(send().await, StatusCode::OK, true, point).await;
        assert_eq!(replay["id"], listed[0]["id"], "{point:?}");
        replay
    } else {
        // Rolled back: not a row of it, and the API knows no invoice by that key.
        assert_eq!(
            Rows::of(app, b).await,
            before,
            "{point:?}: a partial create"
        );
        assert!(listed.is_empty(), "{point:?}: {listed:?}");
        answered(send().await, StatusCode::CREATED, false, point).await
    };
    assert_eq!(Rows::of(app, b).await, before.plus_create(), "{point:?}");
    let id = id_of(&invoice);
    assert_eq!(invoice["state"], "draft", "{point:?}");
    // The answer (fresh, or the replay of the lost one) is the invoice as stored.
    assert_eq!(
        invoice,
        app.invoice(&b.org.agent_key, id).await,
        "{point:?}"
    );
    assert_eq!(
        app.event_actions(&b.org.agent_key, id).await,
        ["create_draft"],
        "{point:?}"
    );
    assert_eq!(app.verify(&b.org.approver_token, id).await["ok"], true);
    // Once more: a replay that still adds nothing.
    answered(send().await, StatusCode::OK, true, point).await;
    assert_eq!(Rows::of(app, b).await, before.plus_create(), "{point:?}");
}

async fn decide_through(app: &TestApp, b: &Billing, scenario: Scenario, point: Failpoint) {
    let token = &b.org.approver_token;
    let pending = app
        .pending(b, &format!("s8-{scenario:?}-{}", point.name()))
        .await;
    let id = id_of(&pending).to_owned();
    let (action, event, reason, state) = match scenario {
        Reject => (
            "reject",
            "reject",
            Some("The amount does not match the order."),
            "rejected",
        ),
        RequestChanges => (
            "request-changes",
            "request_changes",
            Some("Split the implementation days by week."),
            "draft",
        ),
        _ => ("approve", "approve", None, "approved"),
    };
    let body = TestApp::decision_body(&pending, reason);
    let send = || app.command(token, &id, action, body.clone());
    let events_before = app.event_actions(token, &id).await;
    let before = Rows::of(app, b).await;
    let after = before.plus_decision(scenario == ApproveIssuing);

    fails_at(b, point, send()).await;
    let invoice = if after_commit(point) {
        // The answer was lost after the commit: the decision stands, once.
        assert_eq!(Rows::of(app, b).await, after, "{point:?}");
        assert_eq!(app.invoice(token, &id).await["state"], state, "{point:?}");
        answered(send().await, StatusCode::OK, true, point).await
    } else {
        // Rolled back: still pending, no decision, no event, no job.
        assert_eq!(
            Rows::of(app, b).await,
            before,
            "{point:?}: a partial decision"
        );
        let now = app.invoice(token, &id).await;
        assert_eq!(now["state"], "pending_approval", "{point:?}");
        assert_eq!(now["updated_at"], pending["updated_at"], "{point:?}");
        assert!(app.decisions(token, &id).await.is_empty(), "{point:?}");
        assert_eq!(app.event_actions(token, &id).await, events_before);
        answered(send().await, StatusCode::OK, false, point).await
    };
    assert_eq!(Rows::of(app, b).await, after, "{point:?}");
    assert_eq!(invoice["state"], state, "{point:?}");
    assert_eq!(invoice, app.invoice(token, &id).await, "{point:?}");
    let decisions = app.decisions(token, &id).await;
    assert_eq!(decisions.len(), 1, "{point:?}: {decisions:?}");
    let mut events = events_before;
    events.push(event.to_owned());
    assert_eq!(app.event_actions(token, &id).await, events, "{point:?}");
    assert_eq!(app.verify(token, &id).await["ok"], true);
    // Once more: a replay that still adds nothing.
    answered(send().await, StatusCode::OK, true, point).await;
    assert_eq!(Rows::of(app, b).await, after, "{point:?}");
}
