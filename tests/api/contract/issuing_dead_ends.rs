//! Issuing without dead ends (docs/contract/effects.md §6, docs/EFFECTS.md runbook): every way
//! into and out of each state issuing can stop in — `pending`, `blocked`, `rejected`,
//! `conflict`, `needs_review` — against the reference peer over real HTTP, on both backends, and
//! the issue/cancel race (exactly one 2xx). Each scenario prints the peer's calls and effects
//! and the local effects.

use crate::helpers::{
    Backend, TestApp, both_backends, expect_problem, expect_status, figures, id_of, parallel,
    spawn_app_with, uuid_of,
};
use crate::operations::peer::{Peer, PeerDir};
use crate::resources::issuing::{
    approved, arm_unknown_attempt, calls, issuer, issuing_app, local_effects, op_key, until_state,
    workers,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use tauros_api::HttpConfig;
use tauros_app::AppConfig;
use uuid::Uuid;

both_backends!(
    backend: a_refusal_is_rejected_once_and_issued_again_under_a_new_version,
    a_rejected_invoice_is_cancelled_and_keeps_its_number_void,
    a_peer_holding_another_request_is_a_conflict_and_never_finalised,
    a_claim_older_than_the_peers_memory_stops_at_needs_review_until_issued_again,
    a_reaped_claim_the_peer_forgot_stops_at_needs_review_and_is_cancelled,
    pending_issuing_shows_its_job_and_a_repeated_issue_writes_nothing,
    a_pending_invoice_whose_job_stopped_says_so_and_is_issued_again,
    a_blocked_invoice_is_refused_again_without_a_new_event,
    issue_and_cancel_race_exactly_one_wins_with_an_issuer,
    issue_and_cancel_race_exactly_one_wins_without_an_issuer,
);

both_backends!(an_unknown_issuing_filter_is_refused_naming_the_field);

/// Polls the invoice until `issuing.status` is `status` (or fails after a minute).
async fn until_issuing(app: &TestApp, token: &str, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let invoice = app.invoice(token, id).await;
        if invoice["issuing"]["status"] == status {
            return invoice;
        }
        assert!(
            Instant::now() < deadline,
            "issuing not {status} in time: {invoice}"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The ids `GET /v1/invoices?issuing=status` lists.
async fn listed(app: &TestApp, token: &str, status: &str) -> Vec<String> {
    let page = expect_status(
        app.get(&format!("/v1/invoices?issuing={status}"), token)
            .await,
        StatusCode::OK,
    )
    .await;
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["id"].as_str().unwrap().to_owned())
        .collect()
}

/// How many events of `action` the invoice has.
async fn events_of(app: &TestApp, token: &str, id: &str, action: &str) -> usize {
    app.event_actions(token, id)
        .await
        .iter()
        .filter(|a| *a == action)
        .count()
}

/// The state of the claim under `key`.
async fn claim_state(app: &TestApp, key: Uuid) -> String {
    let id = crate::helpers::sql_uuid(&app.database_url, &key.to_string());
    app.sql_scalar(&format!("select state from effect_claims where id = {id}"))
        .await
}

/// The operation key of version `version` of an invoice's issue.
fn op_key_v(org_id: Uuid, invoice_id: Uuid, version: u32) -> Uuid {
    tauros_domain::effect::operation_key(org_id, "invoice.issue", &invoice_id.to_string(), version)
}

fn issue_path(id: &str) -> String {
    format!("/v1/invoices/{id}/issue")
}

async fn scenario_figures(app: &TestApp, peer: &Peer, token: &str, id: &str, scenario: &str) {
    let stats = peer.stats().await;
    figures(
        &format!("issuing: {scenario}"),
        app.backend,
        &[
            ("peer calls", format!("{:?}", calls(&stats))),
            ("peer effects", stats["effects"].to_string()),
            (
                "local effects",
                local_effects(app, token, id).await.to_string(),
            ),
        ],
    );
}

async fn a_refusal_is_rejected_once_and_issued_again_under_a_new_version(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    peer.arm(json!({"mode": "refuse_422", "reason": "customer tax id missing"}))
        .await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = id_of(&invoice);
    let workers = workers(&app, &peer);
    let rejected = until_issuing(&app, token, id, "rejected").await;
    assert_eq!(rejected["state"], "approved");
    let number = rejected["number"].as_str().unwrap().to_owned();
    let reason = rejected["issuing"]["reason"].as_str().unwrap();
    assert!(reason.contains("customer tax id missing"), "{reason}");
    // The job ended at once, not retried; the claim is closed as rejected.
    crate::resources::issuing::until_issue_jobs_settled(&app).await;
    let job_id = rejected["issuing"]["job_id"].as_str().unwrap();
    let job = expect_status(
        app.get(&format!("/v1/jobs/{job_id}"), token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(job["state"], "completed", "{job}");
    assert_eq!(job["attempt"], 1);
    let org = b.org.org_id;
    let v1 = op_key(org, uuid_of(&invoice["id"]));
    assert_eq!(claim_state(&app, v1).await, "rejected");
    assert_eq!(calls(&peer.stats().await), ["execute", "recover"]);
    assert_eq!(events_of(&app, token, id, "issue_rejected").await, 1);
    assert_eq!(listed(&app, token, "rejected").await, [id.to_owned()]);
    assert!(listed(&app, token, "pending").await.is_empty());
    // The cause is fixed (the fault was used up): issue again, the same number under v2.
    let again = expect_status(
        app.post(&issue_path(id), token, json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(again["submission_id"], format!("{id}/v2"));
    assert_eq!(
        app.audit_actions(org, uuid_of(&invoice["id"])).await,
        ["invoice.issue_requested"],
        "who issued again is in the audit trail"
    );
    let issued = until_state(&app, token, id, "issued").await;
    assert_eq!(issued["number"], number.as_str());
    assert!(issued["issuing"].is_null());
    drop(workers);
    let v2 = op_key_v(org, uuid_of(&invoice["id"]), 2);
    assert_ne!(v1, v2);
    assert_eq!(claim_state(&app, v2).await, "complete");
    let stats = peer.stats().await;
    let keys: Vec<&str> = stats["operations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["op_key"].as_str().unwrap())
        .collect();
    assert_eq!(keys, [v2.to_string()]);
    assert_eq!(events_of(&app, token, id, "issue_rejected").await, 1);
    assert_eq!(local_effects(&app, token, id).await, 1);
    assert_eq!(stats["effects"], 1);
    scenario_figures(&app, &peer, token, id, "rejected, then issued again").await;
    // Issuing's writes (worker and human) kept the invoice's read model current.
    assert_eq!(app.read_model_differences().await, 0);
}

async fn a_rejected_invoice_is_cancelled_and_keeps_its_number_void(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    peer.arm(json!({"mode": "refuse_422"})).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = id_of(&invoice);
    let workers = workers(&app, &peer);
    let rejected = until_issuing(&app, token, id, "rejected").await;
    drop(workers);
    let cancelled = expect_status(
        app.command(
            token,
            id,
            "cancel",
            json!({"reason": "Refused by the issuer."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    let cancelled = &cancelled["invoice"];
    assert_eq!(cancelled["state"], "cancelled");
    assert_eq!(cancelled["number"], rejected["number"], "the number stays");
    assert_eq!(cancelled["number_void"], true);
    assert!(cancelled["issuing"].is_null());
    assert!(listed(&app, token, "rejected").await.is_empty());
    // Cancelled is final: issuing it again is refused, and writes nothing.
    let events = app.event_actions(token, id).await.len();
    expect_problem(
        app.post(&issue_path(id), token, json!({})).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    assert_eq!(app.event_actions(token, id).await.len(), events);
    assert_eq!(peer.stats().await["effects"], 0);
    scenario_figures(&app, &peer, token, id, "rejected, then cancelled").await;
}

/// The request Tauros sends for `invoice`, with another number: what a peer holds after Tauros
/// was restored from a backup older than the issue.
fn held_elsewhere(invoice: &Value, number: &str) -> Value {
    let revision = &invoice["current_revision"];
    json!({
        "invoice_id": invoice["id"],
        "number": number,
        "revision_id": revision["id"],
        "payload_hash": revision["payload_hash"],
        "canonical_payload": revision["canonical_payload"],
    })
}

async fn a_peer_holding_another_request_is_a_conflict_and_never_finalised(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let org = b.org.org_id;
    let id = id_of(&invoice);
    let uuid = uuid_of(&invoice["id"]);
    // Attempt 1 leaves the claim processing (the reply lost, the recovery unclear) …
    arm_unknown_attempt(&peer).await;
    assert!(issuer(&peer).issue(&app.app, org, uuid).await.is_err());
    // … and the peer turns out to hold another invoice number under the key (a restore).
    let ours = app.invoice(token, id).await;
    peer.plant(
        &op_key(org, uuid).to_string(),
        &held_elsewhere(&ours, "INV-1999-000007"),
    )
    .await;
    issuer(&peer).issue(&app.app, org, uuid).await.unwrap();
    let conflict = app.invoice(token, id).await;
    assert_eq!(conflict["state"], "approved", "never finalised");
    assert_eq!(conflict["issuing"]["status"], "conflict");
    let reason = conflict["issuing"]["reason"].as_str().unwrap();
    assert!(reason.contains("INV-1999-000007"), "{reason}");
    assert!(
        reason.contains(ours["number"].as_str().unwrap()),
        "{reason}"
    );
    assert_eq!(events_of(&app, token, id, "issue_conflict").await, 1);
    // A later attempt (a redrive) does nothing and writes nothing.
    issuer(&peer).issue(&app.app, org, uuid).await.unwrap();
    assert_eq!(events_of(&app, token, id, "issue_conflict").await, 1);
    assert_eq!(local_effects(&app, token, id).await, 0);
    assert_eq!(listed(&app, token, "conflict").await, [id.to_owned()]);
    scenario_figures(
        &app,
        &peer,
        token,
        id,
        "conflict at recovery, never finalised",
    )
    .await;
    // The way out: cancel (the number stays, void).
    let cancelled = expect_status(
        app.command(token, id, "cancel", json!({"reason": "Issued elsewhere."}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(cancelled["invoice"]["number_void"], true);

    // Another invoice: the peer already holds another request under its key, so the execute
    // is refused (422) and the recovery shows the record: a conflict too; issued again.
    let (_, second) = {
        let pending = app.pending(&b, "second").await;
        let approved = expect_status(app.approve(token, &pending).await, StatusCode::OK).await;
        ((), approved["invoice"].clone())
    };
    let id2 = id_of(&second);
    let uuid2 = uuid_of(&second["id"]);
    peer.plant(
        &op_key(org, uuid2).to_string(),
        &held_elsewhere(&second, "INV-1999-000008"),
    )
    .await;
    let workers = workers(&app, &peer);
    until_issuing(&app, token, id2, "conflict").await;
    let again = expect_status(
        app.post(&issue_path(id2), token, json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(again["submission_id"], format!("{id2}/v2"));
    until_state(&app, token, id2, "issued").await;
    drop(workers);
    assert_eq!(local_effects(&app, token, id2).await, 1);
    scenario_figures(&app, &peer, token, id2, "conflict at execute, issued again").await;
}

/// A server with an issuer whose claims go stale after `key_retention`, and a peer that forgets
/// keys at once (`--key-retention-seconds 0`).
async fn forgetful(backend: Backend) -> (TestApp, Peer, PeerDir) {
    let config = AppConfig {
        issuer_configured: true,
        issuer_key_retention: chrono::Duration::hours(24),
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let dir = PeerDir::new();
    let peer = Peer::start_with(&dir, &["--key-retention-seconds", "0"]).await;
    (app, peer, dir)
}

async fn a_claim_older_than_the_peers_memory_stops_at_needs_review_until_issued_again(
    backend: Backend,
) {
    let (app, peer, _dir) = forgetful(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let org = b.org.org_id;
    let id = id_of(&invoice);
    let uuid = uuid_of(&invoice["id"]);
    arm_unknown_attempt(&peer).await;
    assert!(issuer(&peer).issue(&app.app, org, uuid).await.is_err());
    // Two days later: older than the 24 h the peer is assumed to remember the key.
    assert!(
        app.sql_exec(
            "update effect_claims set admitted_at = '2000-01-01T00:00:00+00:00' \
             where state = 'processing'"
        )
        .await
    );
    issuer(&peer).issue(&app.app, org, uuid).await.unwrap();
    let review = app.invoice(token, id).await;
    assert_eq!(review["state"], "approved");
    assert_eq!(review["issuing"]["status"], "needs_review");
    assert_eq!(events_of(&app, token, id, "issue_needs_review").await, 1);
    let stats = peer.stats().await;
    assert_eq!(
        calls(&stats),
        ["execute", "recover", "recover"],
        "never executed again"
    );
    assert_eq!(stats["effects"], 1);
    assert_eq!(listed(&app, token, "needs_review").await, [id.to_owned()]);
    // Cancelling is allowed now; but the human checked the peer and issues it again.
    let again = expect_status(
        app.post(&issue_path(id), token, json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(again["submission_id"], format!("{id}/v2"));
    let workers = workers(&app, &peer);
    until_state(&app, token, id, "issued").await;
    drop(workers);
    assert_eq!(local_effects(&app, token, id).await, 1);
    scenario_figures(
        &app,
        &peer,
        token,
        id,
        "stale claim, needs review, issued again",
    )
    .await;
}

async fn a_reaped_claim_the_peer_forgot_stops_at_needs_review_and_is_cancelled(backend: Backend) {
    let (app, peer, _dir) = forgetful(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let org = b.org.org_id;
    let id = id_of(&invoice);
    let uuid = uuid_of(&invoice["id"]);
    arm_unknown_attempt(&peer).await;
    assert!(issuer(&peer).issue(&app.app, org, uuid).await.is_err());
    crate::resources::issuing::abandon_processing_claims(&app).await;
    assert_eq!(
        app.app
            .reap_claims(chrono::Duration::days(7), 10)
            .await
            .unwrap(),
        1
    );
    // Re-admitted with no claim row but a number: recover first, and a bare absence stops.
    issuer(&peer).issue(&app.app, org, uuid).await.unwrap();
    let review = app.invoice(token, id).await;
    assert_eq!(review["issuing"]["status"], "needs_review");
    assert_eq!(
        calls(&peer.stats().await),
        ["execute", "recover", "recover"]
    );
    let cancelled = expect_status(
        app.command(
            token,
            id,
            "cancel",
            json!({"reason": "The issuer lost it."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(cancelled["invoice"]["state"], "cancelled");
    assert_eq!(cancelled["invoice"]["number_void"], true);
    scenario_figures(
        &app,
        &peer,
        token,
        id,
        "reaped claim, needs review, cancelled",
    )
    .await;
}

async fn pending_issuing_shows_its_job_and_a_repeated_issue_writes_nothing(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = id_of(&invoice);
    let pending = app.invoice(token, id).await;
    assert_eq!(pending["issuing"]["status"], "pending");
    assert!(pending["issuing"]["reason"].is_null());
    assert_eq!(pending["issuing"]["attempts"], 1);
    let job_id = pending["issuing"]["job_id"].as_str().unwrap().to_owned();
    assert_eq!(listed(&app, token, "pending").await, [id.to_owned()]);
    // No worker yet: an approver's issue admits the claim (the number) and answers the job.
    let first = app.post(&issue_path(id), token, json!({})).await;
    assert_eq!(first.headers()["idempotent-replayed"], "false");
    let job = expect_status(first, StatusCode::ACCEPTED).await;
    assert_eq!(job["id"], job_id.as_str());
    let numbered = app.invoice(token, id).await;
    assert!(numbered["number"].is_string());
    let events = app.event_actions(token, id).await.len();
    let rows = app.invoice_rows().await;
    let replay = app.post(&issue_path(id), token, json!({})).await;
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    assert_eq!(
        expect_status(replay, StatusCode::ACCEPTED).await["id"],
        job_id.as_str()
    );
    assert_eq!(app.event_actions(token, id).await.len(), events);
    assert_eq!(app.invoice_rows().await, rows);
    assert_eq!(
        app.invoice(token, id).await["updated_at"],
        numbered["updated_at"]
    );
    assert_eq!(
        app.audit_actions(b.org.org_id, uuid_of(&invoice["id"]))
            .await,
        ["invoice.issue_requested"],
        "the replay wrote no audit entry"
    );
    // While the claim is processing, cancel is refused and says where to look.
    let refused = expect_problem(
        app.command(token, id, "cancel", json!({"reason": "Too slow."}))
            .await,
        StatusCode::CONFLICT,
        "issue_in_progress",
    )
    .await;
    assert!(refused.detail.contains("/v1/jobs"));
    let workers = workers(&app, &peer);
    let issued = until_state(&app, token, id, "issued").await;
    drop(workers);
    assert!(issued["issuing"].is_null());
    assert_eq!(issued["number"], numbered["number"]);
    assert!(listed(&app, token, "pending").await.is_empty());
    // The job admitted second: it recovered (absent), then executed once.
    assert_eq!(calls(&peer.stats().await), ["recover", "execute"]);
    scenario_figures(&app, &peer, token, id, "pending, issued by hand").await;
}

/// An issue job cancelled by an operator before its claim was admitted leaves the invoice
/// `pending` with nothing that will run: the invoice says so in `issuing.reason`, and an
/// approver's issue re-drives the same job, which issues it once.
async fn a_pending_invoice_whose_job_stopped_says_so_and_is_issued_again(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = id_of(&invoice);
    let job_id = app.invoice(token, id).await["issuing"]["job_id"]
        .as_str()
        .unwrap()
        .to_owned();
    // No worker yet, so no claim: an operator may cancel the job.
    expect_status(
        app.post(&format!("/v1/jobs/{job_id}/cancel"), token, json!({}))
            .await,
        StatusCode::OK,
    )
    .await;
    let stopped = app.invoice(token, id).await;
    assert_eq!(stopped["issuing"]["status"], "pending");
    assert_eq!(stopped["issuing"]["job_id"], job_id.as_str());
    let reason = stopped["issuing"]["reason"].as_str().unwrap();
    assert!(reason.contains("was cancelled"), "{reason}");
    assert!(reason.contains("/issue"), "{reason}");
    assert_eq!(listed(&app, token, "pending").await, [id.to_owned()]);
    // Issue again: the same job runs again, and the reason is gone while it will run.
    let job = expect_status(
        app.post(&issue_path(id), token, json!({})).await,
        StatusCode::ACCEPTED,
    )
    .await;
    assert_eq!(job["id"], job_id.as_str());
    let redriven = app.invoice(token, id).await;
    assert_eq!(redriven["issuing"]["status"], "pending");
    assert!(redriven["issuing"]["reason"].is_null());
    let workers = workers(&app, &peer);
    let issued = until_state(&app, token, id, "issued").await;
    drop(workers);
    assert!(issued["issuing"].is_null());
    assert_eq!(calls(&peer.stats().await), ["recover", "execute"]);
    scenario_figures(&app, &peer, token, id, "pending, job stopped, issued again").await;
}

async fn a_blocked_invoice_is_refused_again_without_a_new_event(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = id_of(&invoice);
    app.deactivate(token, b.destination_id).await;
    let workers = workers(&app, &peer);
    let blocked = until_issuing(&app, token, id, "blocked").await;
    crate::resources::issuing::until_issue_jobs_settled(&app).await;
    drop(workers);
    assert!(blocked["number"].is_null());
    assert!(
        blocked["issuing"]["reason"]
            .as_str()
            .unwrap()
            .contains("destination")
    );
    assert_eq!(listed(&app, token, "blocked").await, [id.to_owned()]);
    let rows = app.invoice_rows().await;
    for _ in 0..3 {
        expect_problem(
            app.post(&issue_path(id), token, json!({})).await,
            StatusCode::CONFLICT,
            "destination_inactive",
        )
        .await;
    }
    assert_eq!(app.invoice_rows().await, rows, "a refusal writes nothing");
    assert_eq!(events_of(&app, token, id, "issue_blocked").await, 1);
    let cancelled = expect_status(
        app.command(
            token,
            id,
            "cancel",
            json!({"reason": "Destination closed."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(cancelled["invoice"]["number_void"], false);
    assert!(cancelled["invoice"]["issuing"].is_null());
    scenario_figures(&app, &peer, token, id, "blocked, refused again, cancelled").await;
}

async fn an_unknown_issuing_filter_is_refused_naming_the_field(app: TestApp) {
    let b = app.billing().await;
    let problem = expect_problem(
        app.get("/v1/invoices?issuing=stuck", &b.org.approver_token)
            .await,
        // Like every list filter (`state`, `overdue`): 422, naming the field.
        StatusCode::UNPROCESSABLE_ENTITY,
        "validation_failed",
    )
    .await;
    assert_eq!(problem.fields(), ["issuing"]);
    assert!(problem.to_string().contains("needs_review"), "{problem}");
}

const RACE_ROUNDS: usize = 100;

/// `RACE_ROUNDS` rounds of an issue and a cancel of one approved invoice sent at once: exactly
/// one answers 2xx, the other 409, and the invoice is what the winner said.
async fn race_issue_and_cancel(app: &TestApp, issued: StatusCode, scenario: &str) {
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let (mut issue_won, mut cancel_won) = (0, 0);
    for round in 0..RACE_ROUNDS {
        let pending = app.pending(&b, &format!("race-{round}")).await;
        expect_status(app.approve(&token, &pending).await, StatusCode::OK).await;
        let id = id_of(&pending);
        let answers = parallel(vec![
            app.command_request(&token, id, "issue", &json!({})),
            app.command_request(&token, id, "cancel", &json!({"reason": "Race."})),
        ])
        .await;
        let (issue, cancel) = (answers[0].status(), answers[1].status());
        let invoice = app.invoice(&token, id).await;
        if issue == issued && cancel == StatusCode::CONFLICT {
            issue_won += 1;
            assert_ne!(invoice["state"], "cancelled", "round {round}");
            assert!(invoice["number"].is_string(), "round {round}");
        } else if cancel == StatusCode::OK && issue == StatusCode::CONFLICT {
            cancel_won += 1;
            assert_eq!(invoice["state"], "cancelled", "round {round}");
            assert!(invoice["number"].is_null(), "round {round}");
        } else {
            panic!("round {round}: issue {issue}, cancel {cancel}: not exactly one 2xx");
        }
    }
    figures(
        &format!("issuing: issue races cancel, {scenario}"),
        app.backend,
        &[
            ("rounds", RACE_ROUNDS.to_string()),
            ("issue won", issue_won.to_string()),
            ("cancel won", cancel_won.to_string()),
        ],
    );
}

/// A server for many rounds of one credential: no rate limit.
async fn unlimited(backend: Backend, issuer_configured: bool) -> TestApp {
    let config = AppConfig {
        issuer_configured,
        rate_limit_per_second: 0,
        ..AppConfig::default()
    };
    spawn_app_with(backend, config, HttpConfig::default()).await
}

async fn issue_and_cancel_race_exactly_one_wins_with_an_issuer(backend: Backend) {
    // No worker and no peer: the race is decided within the requests.
    let app = unlimited(backend, true).await;
    race_issue_and_cancel(&app, StatusCode::ACCEPTED, "with an issuer").await;
    // Racing writers each refreshed the read model inside their own transaction.
    assert_eq!(app.read_model_differences().await, 0);
}

async fn issue_and_cancel_race_exactly_one_wins_without_an_issuer(backend: Backend) {
    let app = unlimited(backend, false).await;
    race_issue_and_cancel(&app, StatusCode::OK, "without an issuer").await;
}
