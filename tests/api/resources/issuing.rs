//! Issuing approved invoices exactly once through a peer (docs/contract/effects.md §3 and §5): the
//! claim protocol against the reference peer (`tauros peer`) over real HTTP, with crashes made by
//! killing a real `tauros worker` at a named pause point (`TAUROS_TEST_PAUSE_AT`), never by
//! sleeping. Each scenario prints the calls the peer saw, the effects it made and the local
//! effects (issue events): one effect wherever the peer deduplicates.

use crate::helpers::{
    Backend, TestApp, both_backends, child_lines, expect_problem, expect_status, figures, id_of,
    listening_address, spawn_app_with, sql_uuid, uuid_of,
};
use crate::operations::peer::{Peer, PeerDir};
use crate::resources::jobs::{WorkerProcess, start_worker};
use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tauros_api::HttpConfig;
use tauros_app::failpoints::{self, Failpoint, arm};
use tauros_app::issuing::{HttpIssuer, IssueError, Issuer, IssuerAdapter};
use tauros_app::runtime::{Defaults, Registry, WorkerConfig, Workers};
use tauros_app::{AppConfig, AppError, WebhookConfig};
use tauros_domain::effect::{EffectFailure, Executed, Recovered};
use tauros_domain::webhook::AllowList;
use tokio::sync::{Mutex, oneshot};
use uuid::Uuid;

both_backends!(
    without_an_issuer_an_approver_issues_locally,
    a_failed_local_issue_keeps_its_number_and_a_rolled_back_one_leaves_no_gap,
    the_binary_refuses_an_http_issuer_without_a_url_and_a_horizon_below_a_day,
);

both_backends!(
    backend: approving_issues_through_the_peer_exactly_once,
    a_worker_killed_before_the_peer_call_recovers_then_executes_once,
    a_worker_killed_after_the_peer_committed_does_not_execute_again,
    a_worker_killed_before_finalising_recovers_the_peers_answer,
    a_lost_reply_is_recovered_within_the_attempt,
    an_unknown_recovery_leaves_the_claim_processing_until_a_later_attempt,
    a_lying_absent_is_absorbed_by_a_deduplicating_peer_and_only_by_one,
    concurrent_attempts_finalise_once,
    cancel_and_issue_race_and_exactly_one_wins,
    claims_are_kept_cleaned_and_reaped_only_as_allowed,
    an_inactive_destination_blocks_issuing_before_the_number_and_tells_a_human,
    a_destination_deactivated_after_a_claim_still_issues_exactly_once,
    a_failed_finalisation_rolls_back_and_the_retry_finalises_once,
    the_reaper_passes_over_a_claim_a_finaliser_holds,
    a_finalisation_after_a_reap_is_refused_and_the_retry_issues_once,
    a_finaliser_held_after_the_peer_answered_loses_to_another_and_replays,
    a_finaliser_waits_for_one_inside_its_transaction_and_then_replays,
    every_unclear_answer_of_the_peer_ends_in_one_effect_after_recovery,
    a_worker_with_the_local_issuer_issues_through_the_job,
    tauros_reap_deletes_only_what_retention_and_the_horizon_allow,
    the_claim_gauges_count_claims_by_state_and_age_the_oldest_processing,
    the_reaper_needs_both_the_horizon_and_the_retention_and_never_goes_below_a_day,
);

/// A server whose approvals enqueue the issue job, and a peer.
pub(crate) async fn issuing_app(backend: Backend) -> (TestApp, Peer, PeerDir) {
    let config = AppConfig {
        issuer_configured: true,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    (app, peer, dir)
}

pub(crate) fn issuer(peer: &Peer) -> Issuer {
    issuer_within(peer, Duration::from_secs(5))
}

/// The `http` adapter to `peer`, each call bounded by `timeout`.
pub(crate) fn http_adapter(peer: &Peer, timeout: Duration) -> HttpIssuer {
    HttpIssuer::new(&format!("{}/invoices", peer.base), timeout).expect("client")
}

pub(crate) fn issuer_within(peer: &Peer, timeout: Duration) -> Issuer {
    Issuer::new(Arc::new(http_adapter(peer, timeout)), timeout, None)
}

/// Workers inside the test process that run the issue job against `peer`.
pub(crate) fn workers(app: &TestApp, peer: &Peer) -> Workers {
    workers_with(app, issuer(peer))
}

/// Workers inside the test process that run the issue job with `issuer`.
pub(crate) fn workers_with(app: &TestApp, issuer: Issuer) -> Workers {
    let mut registry = Registry::new(Defaults {
        backoff_cap: Duration::from_secs(1),
        timeout: Duration::from_secs(30),
    });
    tauros_app::issuing::register(&mut registry, issuer);
    let config = WorkerConfig {
        workers: 2,
        webhook_workers: 2,
        lease: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        max_interruptions: 10,
        retention: tauros_app::Retention::default(),
        prune_batch: 100,
        pause_after_claim: false,
        name: "in-test".to_owned(),
    };
    Workers::start(app.app.clone(), Arc::new(registry), config)
}

/// A `tauros worker` issuing to `peer`, with a short lease so a killed one's job runs again
/// soon, and `extra` environment.
fn worker_process(app: &TestApp, peer: &Peer, extra: &[(&str, &str)]) -> WorkerProcess {
    let url = format!("{}/invoices", peer.base);
    let mut env = vec![
        ("TAUROS_ISSUER", "http"),
        ("TAUROS_ISSUER_URL", url.as_str()),
        ("TAUROS_JOB_BACKOFF_CAP_SECONDS", "1"),
    ];
    env.extend_from_slice(extra);
    start_worker(app, 1, 2, &env)
}

/// Waits for the worker's line `paused at POINT …`, then kills it with SIGKILL.
fn kill_at(mut worker: WorkerProcess, point: &str) {
    let expected = format!("paused at {point} ");
    loop {
        let line = worker
            .stdout
            .recv_timeout(Duration::from_secs(60))
            .expect("the worker reaches its pause point");
        if line.starts_with(&expected) {
            break;
        }
    }
    worker.child.kill().unwrap();
    worker.child.wait().unwrap();
}

/// An approved invoice of a fresh organisation.
pub(crate) async fn approved(app: &TestApp) -> (crate::helpers::Billing, Value) {
    let b = app.billing().await;
    let pending = app.pending(&b, "to-issue").await;
    let approved = expect_status(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::OK,
    )
    .await;
    (b, approved["invoice"].clone())
}

/// Polls the invoice until it is `state` (or fails after a minute).
pub(crate) async fn until_state(app: &TestApp, token: &str, id: &str, state: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let invoice = app.invoice(token, id).await;
        if invoice["state"] == state {
            return invoice;
        }
        assert!(Instant::now() < deadline, "not {state} in time: {invoice}");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Polls until no issue job is left to run (each completed or discarded), with a deadline.
pub(crate) async fn until_issue_jobs_settled(app: &TestApp) {
    let deadline = Instant::now() + Duration::from_secs(60);
    let unsettled = "select count(*) from jobs where kind = 'invoice.issue.v1' \
                     and state in ('available', 'scheduled', 'running', 'retryable')";
    while app.sql_count(unsettled).await > 0 {
        assert!(Instant::now() < deadline, "issue jobs still unsettled");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// The operation key of the issue of `invoice_id` (derived, as Tauros derives it).
pub(crate) fn op_key(org_id: Uuid, invoice_id: Uuid) -> Uuid {
    tauros_domain::effect::operation_key(org_id, "invoice.issue", &invoice_id.to_string(), 1)
}

/// Moves every processing claim past both the abandonment horizon and its retention.
pub(crate) async fn abandon_processing_claims(app: &TestApp) {
    assert!(
        app.sql_exec(
            "update effect_claims set admitted_at = '1999-06-01T00:00:00+00:00', \
             retain_until = '2000-01-01T00:00:00+00:00' where state = 'processing'"
        )
        .await
    );
}

/// Arms the peer to commit an execute and lose its reply, then to answer the recovery
/// "unknown": one attempt leaves its claim processing.
pub(crate) async fn arm_unknown_attempt(peer: &Peer) {
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    peer.arm(json!({"mode": "recover_unknown"})).await;
}

/// The peer's calls as `execute`/`recover` in order.
pub(crate) fn calls(stats: &Value) -> Vec<String> {
    stats["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The number of `issue` events of an invoice (the local effect).
pub(crate) async fn local_effects(app: &TestApp, token: &str, id: &str) -> usize {
    app.event_actions(token, id)
        .await
        .iter()
        .filter(|a| *a == "issue")
        .count()
}

/// Prints the scenario's figures and checks exactly one effect on each side.
async fn one_effect(app: &TestApp, peer: &Peer, token: &str, id: &str, scenario: &str) -> Value {
    let stats = peer.stats().await;
    let local = local_effects(app, token, id).await;
    figures(
        &format!("issuing: {scenario}"),
        app.backend,
        &[
            ("peer calls", format!("{:?}", calls(&stats))),
            ("peer effects", stats["effects"].to_string()),
            ("local effects", local.to_string()),
        ],
    );
    assert_eq!(stats["effects"], 1, "{stats}");
    assert_eq!(local, 1);
    stats
}

async fn without_an_issuer_an_approver_issues_locally(app: TestApp) {
    let b = app.billing().await;
    let token = &b.org.approver_token;
    let first = app.pending(&b, "first").await;
    expect_status(app.approve(token, &first).await, StatusCode::OK).await;
    let invoice = until_state(&app, token, id_of(&first), "approved").await;
    assert!(
        invoice["number"].is_null(),
        "approved, not issued: no number yet"
    );
    let path = format!("/v1/invoices/{}/issue", id_of(&first));
    expect_problem(
        app.post(&path, &b.org.agent_key, json!({})).await,
        StatusCode::FORBIDDEN,
        "forbidden",
    )
    .await;
    let issued = expect_status(app.post(&path, token, json!({})).await, StatusCode::OK).await;
    assert_eq!(issued["replayed"], false);
    assert_eq!(issued["invoice"]["state"], "issued");
    let year = chrono::Utc::now().format("%Y").to_string();
    assert_eq!(issued["invoice"]["number"], format!("INV-{year}-000001"));
    let again = expect_status(app.post(&path, token, json!({})).await, StatusCode::OK).await;
    assert_eq!(again["replayed"], true);
    assert_eq!(again["invoice"], issued["invoice"]);
    let events = app.event_actions(token, id_of(&first)).await;
    assert_eq!(events.last().unwrap(), "issue");
    assert_eq!(events.iter().filter(|a| *a == "issue").count(), 1);
    assert_eq!(app.verify(token, id_of(&first)).await["ok"], true);
    // Issued is final for cancel.
    let cancel = json!({"reason": "Too late."});
    expect_problem(
        app.command(token, id_of(&first), "cancel", cancel.clone())
            .await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    // The next one is numbered next; a pending one cannot be issued.
    let second = app.pending(&b, "second").await;
    let path2 = format!("/v1/invoices/{}/issue", id_of(&second));
    expect_problem(
        app.post(&path2, token, json!({})).await,
        StatusCode::CONFLICT,
        "invalid_transition",
    )
    .await;
    expect_status(app.approve(token, &second).await, StatusCode::OK).await;
    let issued2 = expect_status(app.post(&path2, token, json!({})).await, StatusCode::OK).await;
    assert_eq!(issued2["invoice"]["number"], format!("INV-{year}-000002"));
    // Another organisation numbers from 1.
    let other = app.billing().await;
    let theirs = app.pending(&other, "theirs").await;
    expect_status(
        app.approve(&other.org.approver_token, &theirs).await,
        StatusCode::OK,
    )
    .await;
    let path3 = format!("/v1/invoices/{}/issue", id_of(&theirs));
    let issued3 = expect_status(
        app.post(&path3, &other.org.approver_token, json!({})).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(issued3["invoice"]["number"], format!("INV-{year}-000001"));
    // A foreign approver cannot issue ours.
    expect_problem(
        app.post(&path2, &other.org.approver_token, json!({})).await,
        StatusCode::NOT_FOUND,
        "not_found",
    )
    .await;
}

async fn approving_issues_through_the_peer_exactly_once(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let _workers = workers(&app, &peer);
    let issued = until_state(&app, token, id_of(&invoice), "issued").await;
    assert!(issued["number"].as_str().unwrap().starts_with("INV-"));
    let stats = one_effect(&app, &peer, token, id_of(&invoice), "happy path").await;
    assert_eq!(calls(&stats), ["execute"]);
    let events = expect_status(
        app.get(&format!("/v1/invoices/{}/events", id_of(&invoice)), token)
            .await,
        StatusCode::OK,
    )
    .await;
    let issue = events["items"].as_array().unwrap().last().unwrap().clone();
    assert_eq!(issue["action"], "issue");
    assert_eq!(issue["actor_kind"], "system");
    assert_eq!(issue["interface"], "job");
    assert_eq!(issue["note"], issued["number"]);
    // Issuing again is a replay, whoever asks.
    let again = expect_status(
        app.post(
            &format!("/v1/invoices/{}/issue", id_of(&invoice)),
            token,
            json!({}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(again["replayed"], true);
    // With an issuer configured, an approved invoice is issued by the job, not by hand.
    let second = app.pending(&b, "second").await;
    expect_status(app.approve(token, &second).await, StatusCode::OK).await;
    let by_hand = app
        .post(
            &format!("/v1/invoices/{}/issue", id_of(&second)),
            token,
            json!({}),
        )
        .await;
    // Either the job was faster (a replay of issued) or it is still to come: 202 with the job
    // the approval enqueued (the claim admitted within the request).
    match by_hand.status() {
        StatusCode::OK => assert_eq!(by_hand.json::<Value>().await.unwrap()["replayed"], true),
        _ => {
            let job = expect_status(by_hand, StatusCode::ACCEPTED).await;
            assert_eq!(job["kind"], "invoice.issue.v1");
            assert_eq!(job["submission_id"], id_of(&second));
        }
    }
    until_state(&app, token, id_of(&second), "issued").await;
    assert_eq!(peer.stats().await["effects"], 2);
}

/// Kills a real worker at `point` while it issues an approved invoice, lets a fresh worker
/// finish, checks one effect on each side, and answers the peer's calls before the restart and
/// in all.
async fn crash_at(backend: Backend, point: &str, scenario: &str) -> (Vec<String>, Vec<String>) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let first = worker_process(&app, &peer, &[("TAUROS_TEST_PAUSE_AT", point)]);
    kill_at(first, point);
    let before = calls(&peer.stats().await);
    let state = app.invoice(token, id_of(&invoice)).await["state"].clone();
    assert_eq!(state, "approved", "nothing finalised before the crash");
    // The admitted claim is the recovery point: a fresh worker picks the job up again.
    let _second = worker_process(&app, &peer, &[]);
    until_state(&app, token, id_of(&invoice), "issued").await;
    let stats = one_effect(&app, &peer, token, id_of(&invoice), scenario).await;
    (before, calls(&stats))
}

async fn a_worker_killed_before_the_peer_call_recovers_then_executes_once(backend: Backend) {
    let (before, all) = crash_at(backend, "before_execute", "crash before the peer call").await;
    assert!(
        before.is_empty(),
        "no peer call before the crash: {before:?}"
    );
    assert_eq!(all, ["recover", "execute"]);
}

async fn a_worker_killed_after_the_peer_committed_does_not_execute_again(backend: Backend) {
    let (before, all) = crash_at(backend, "after_execute", "crash after the peer committed").await;
    assert_eq!(before, ["execute"]);
    assert_eq!(all, ["execute", "recover"]);
}

async fn a_worker_killed_before_finalising_recovers_the_peers_answer(backend: Backend) {
    let (before, all) = crash_at(backend, "before_finalise", "crash before finalising").await;
    assert_eq!(before, ["execute"]);
    assert_eq!(all, ["execute", "recover"]);
}

async fn a_lost_reply_is_recovered_within_the_attempt(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let _workers = workers(&app, &peer);
    until_state(&app, token, id_of(&invoice), "issued").await;
    let stats = one_effect(
        &app,
        &peer,
        token,
        id_of(&invoice),
        "execute unknown after landing",
    )
    .await;
    assert_eq!(calls(&stats), ["execute", "recover"]);
}

async fn an_unknown_recovery_leaves_the_claim_processing_until_a_later_attempt(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    peer.arm(json!({"mode": "recover_unknown"})).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    // One attempt by hand: execute (reply lost), recover (unknown): nothing is finalised.
    let issuer = issuer(&peer);
    let failed = issuer
        .issue(
            &app.app,
            b.org.org_id,
            crate::helpers::uuid_of(&invoice["id"]),
        )
        .await;
    assert_eq!(
        failed.unwrap_err().to_string(),
        tauros_domain::effect::EffectFailure::OutcomeUnknown.to_string()
    );
    assert_eq!(
        app.invoice(token, id_of(&invoice)).await["state"],
        "approved"
    );
    let processing = app
        .sql_count("select count(*) from effect_claims where state = 'processing'")
        .await;
    assert_eq!(processing, 1, "the claim stays the recovery point");
    // The job's attempt recovers the answer, without a second execute.
    let _workers = workers(&app, &peer);
    until_state(&app, token, id_of(&invoice), "issued").await;
    let stats = one_effect(
        &app,
        &peer,
        token,
        id_of(&invoice),
        "recover unknown, then retried",
    )
    .await;
    assert_eq!(calls(&stats), ["execute", "recover", "recover"]);
}

async fn a_lying_absent_is_absorbed_by_a_deduplicating_peer_and_only_by_one(backend: Backend) {
    for dedupe in [true, false] {
        let (app, peer, _dir) = issuing_app(backend).await;
        peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
        peer.arm(json!({"mode": "lie_absent", "times": 2})).await;
        if !dedupe {
            peer.arm(json!({"mode": "no_dedupe"})).await;
        }
        let (b, invoice) = approved(&app).await;
        let token = &b.org.approver_token;
        let issuer = issuer(&peer);
        let id = crate::helpers::uuid_of(&invoice["id"]);
        // Attempt 1: execute (reply lost), recover lies "absent": no second execute in it.
        let first = issuer.issue(&app.app, b.org.org_id, id).await;
        assert_eq!(
            first.unwrap_err().to_string(),
            tauros_domain::effect::EffectFailure::Unavailable.to_string()
        );
        // Attempt 2: recover lies again, so it executes under the same key.
        issuer.issue(&app.app, b.org.org_id, id).await.unwrap();
        until_state(&app, token, id_of(&invoice), "issued").await;
        let stats = peer.stats().await;
        let local = local_effects(&app, token, id_of(&invoice)).await;
        let scenario = if dedupe {
            "issuing: lying absent, the peer deduplicates"
        } else {
            "issuing: lying absent, the peer does not deduplicate (negative control)"
        };
        figures(
            scenario,
            app.backend,
            &[
                ("peer calls", format!("{:?}", calls(&stats))),
                ("peer effects", stats["effects"].to_string()),
                ("local effects", local.to_string()),
            ],
        );
        assert_eq!(calls(&stats), ["execute", "recover", "recover", "execute"]);
        let keys: Vec<&Value> = stats["calls"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| &c["op_key"])
            .collect();
        assert!(
            keys.windows(2).all(|w| w[0] == w[1]),
            "one operation key throughout"
        );
        assert_eq!(local, 1);
        // What the protocol cannot prevent: a lying adapter and a peer that does not
        // deduplicate make a second effect. Both defences are needed.
        assert_eq!(stats["effects"], if dedupe { 1 } else { 2 });
    }
}

async fn concurrent_attempts_finalise_once(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    peer.arm(json!({"mode": "slow", "millis": 300, "times": 4}))
        .await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = crate::helpers::uuid_of(&invoice["id"]);
    let issuer = Arc::new(issuer(&peer));
    let mut attempts = Vec::new();
    for _ in 0..4 {
        let issuer = Arc::clone(&issuer);
        let app = app.app.clone();
        let org = b.org.org_id;
        attempts.push(tokio::spawn(
            async move { issuer.issue(&app, org, id).await },
        ));
    }
    let mut ok = 0;
    for attempt in attempts {
        if attempt.await.unwrap().is_ok() {
            ok += 1;
        }
    }
    // An attempt that found the claim processing may hear `unavailable` or `unknown` and
    // leave it to a retry; at least one finalises, and only once.
    assert!(ok >= 1);
    until_state(&app, token, id_of(&invoice), "issued").await;
    let stats = one_effect(
        &app,
        &peer,
        token,
        id_of(&invoice),
        "four concurrent attempts",
    )
    .await;
    assert!(calls(&stats).len() >= 2);
}

async fn cancel_and_issue_race_and_exactly_one_wins(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let b = app.billing().await;
    let token = b.org.approver_token.clone();
    let mut approved_ids = Vec::new();
    for i in 0..8 {
        let pending = app.pending(&b, &format!("race-{i}")).await;
        expect_status(app.approve(&token, &pending).await, StatusCode::OK).await;
        approved_ids.push(id_of(&pending).to_owned());
    }
    let workers = workers(&app, &peer);
    let cancels: Vec<_> = approved_ids
        .iter()
        .map(|id| {
            app.command_request(
                &token,
                id,
                "cancel",
                &json!({"reason": "Changed our mind."}),
            )
        })
        .collect();
    let answers = crate::helpers::parallel(cancels).await;
    let mut cancelled = 0;
    for (id, res) in approved_ids.iter().zip(answers) {
        match res.status() {
            StatusCode::OK => cancelled += 1,
            StatusCode::CONFLICT => {
                let body: Value = res.json().await.unwrap();
                let code = body["code"].as_str().unwrap().to_owned();
                assert!(
                    code == "issue_in_progress" || code == "invalid_transition",
                    "{body}"
                );
                until_state(&app, &token, id, "issued").await;
            }
            other => panic!("cancel answered {other}"),
        }
    }
    // Every issue job has settled (completed, or found its invoice cancelled) before both
    // sides are compared.
    until_issue_jobs_settled(&app).await;
    drop(workers);
    let stats = peer.stats().await;
    let mut issued = 0;
    for id in &approved_ids {
        let invoice = app.invoice(&token, id).await;
        match invoice["state"].as_str().unwrap() {
            "issued" => issued += 1,
            "cancelled" => assert!(
                invoice["number"].is_null(),
                "a cancelled invoice was never numbered"
            ),
            other => panic!("left {other}"),
        }
    }
    figures(
        "issuing: cancel races issue",
        app.backend,
        &[
            ("invoices", approved_ids.len().to_string()),
            ("cancelled", cancelled.to_string()),
            ("issued", issued.to_string()),
            ("peer effects", stats["effects"].to_string()),
        ],
    );
    assert_eq!(cancelled + issued, approved_ids.len());
    assert_eq!(
        stats["effects"], issued,
        "an effect exactly for each issued invoice"
    );
}

async fn claims_are_kept_cleaned_and_reaped_only_as_allowed(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = crate::helpers::uuid_of(&invoice["id"]);
    issuer(&peer)
        .issue(&app.app, b.org.org_id, id)
        .await
        .unwrap();
    until_state(&app, token, id_of(&invoice), "issued").await;
    let sqlite = app.database_url.starts_with("sqlite");
    let past = "'2000-01-01T00:00:00+00:00'";
    // A completed claim within its retention: no delete, not even by hand.
    assert!(!app.sql_exec("delete from effect_claims").await);
    assert_eq!(app.app.clean_claims(10).await.unwrap(), 0);
    // Past its retention (moved there here), cleanup deletes it.
    let key = app
        .sql_scalar::<String>(if sqlite {
            "select lower(hex(id)) from effect_claims"
        } else {
            "select replace(id::text, '-', '') from effect_claims"
        })
        .await;
    let key = format!(
        "{}-{}-{}-{}-{}",
        &key[0..8],
        &key[8..12],
        &key[12..16],
        &key[16..20],
        &key[20..32]
    );
    let where_key = format!("where id = {}", sql_uuid(&app.database_url, &key));
    assert!(
        app.sql_exec(&format!(
            "update effect_claims set admitted_at = '1999-01-01T00:00:00+00:00', retain_until = {past} {where_key}"
        ))
        .await
    );
    // Strictly after retention: at the very instant it ends the claim stays, a microsecond
    // later it goes.
    let ended = chrono::DateTime::parse_from_rfc3339("2000-01-01T00:00:00+00:00")
        .unwrap()
        .to_utc();
    let mut tx = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    assert_eq!(tx.clean_claims(ended, 10).await.unwrap(), 0);
    let later = ended + chrono::Duration::microseconds(1);
    assert_eq!(tx.clean_claims(later, 10).await.unwrap(), 1);
    tx.commit().await.unwrap();

    // A processing claim (a recovery point): never deleted by hand or by cleanup, and reaped
    // only past both its retention and the abandonment horizon.
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    peer.arm(json!({"mode": "recover_unknown"})).await;
    let pending = app.pending(&b, "stuck").await;
    expect_status(app.approve(token, &pending).await, StatusCode::OK).await;
    let stuck = crate::helpers::uuid_of(&pending["id"]);
    assert!(
        issuer(&peer)
            .issue(&app.app, b.org.org_id, stuck)
            .await
            .is_err()
    );
    let processing = "select count(*) from effect_claims where state = 'processing'";
    assert_eq!(app.sql_count(processing).await, 1);
    assert!(!app.sql_exec("delete from effect_claims").await);
    assert_eq!(app.app.clean_claims(10).await.unwrap(), 0);
    let week = chrono::Duration::days(7);
    assert_eq!(app.app.reap_claims(week, 10).await.unwrap(), 0, "young");
    // Past its retention but still authoritative: a retry recovers, it does not re-admit.
    assert!(
        app.sql_exec(&format!(
            "update effect_claims set admitted_at = '1999-06-01T00:00:00+00:00', retain_until = {past}
             where state = 'processing'"
        ))
        .await
    );
    assert!(
        !app.sql_exec("delete from effect_claims where state = 'processing'")
            .await
    );
    issuer(&peer)
        .issue(&app.app, b.org.org_id, stuck)
        .await
        .unwrap();
    until_state(&app, token, id_of(&pending), "issued").await;
    let stats = peer.stats().await;
    assert_eq!(stats["effects"], 2, "one per invoice: {stats}");
    // A reaped processing claim: make one, age it, reap it.
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    peer.arm(json!({"mode": "recover_unknown"})).await;
    let third = app.pending(&b, "abandoned").await;
    expect_status(app.approve(token, &third).await, StatusCode::OK).await;
    let abandoned = crate::helpers::uuid_of(&third["id"]);
    assert!(
        issuer(&peer)
            .issue(&app.app, b.org.org_id, abandoned)
            .await
            .is_err()
    );
    assert!(
        app.sql_exec(&format!(
            "update effect_claims set admitted_at = '1999-06-01T00:00:00+00:00', retain_until = {past}
             where state = 'processing'"
        ))
        .await
    );
    assert_eq!(app.app.reap_claims(week, 10).await.unwrap(), 1);
    assert_eq!(app.sql_count(processing).await, 0);
    // The operation key is derived, not stored: a retry after the reap sends the same key,
    // and the peer's deduplication keeps it one effect.
    issuer(&peer)
        .issue(&app.app, b.org.org_id, abandoned)
        .await
        .unwrap();
    until_state(&app, token, id_of(&third), "issued").await;
    let stats = peer.stats().await;
    figures(
        "issuing: cleanup and reaper, three invoices",
        app.backend,
        &[
            ("peer calls", format!("{:?}", calls(&stats))),
            ("peer effects", stats["effects"].to_string()),
        ],
    );
    assert_eq!(stats["effects"], 3);
}

/// A server with an issuer whose webhook deliveries to one endpoint stay queued as rows (no
/// worker here runs them), and a peer.
async fn issuing_app_with_webhooks(backend: Backend) -> (TestApp, Peer, PeerDir) {
    let config = AppConfig {
        issuer_configured: true,
        webhooks: WebhookConfig {
            allow_hosts: AllowList::parse("127.0.0.1").unwrap(),
            secret_key: None,
            ..WebhookConfig::default()
        },
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    (app, peer, dir)
}

async fn an_inactive_destination_blocks_issuing_before_the_number_and_tells_a_human(
    backend: Backend,
) {
    let (app, peer, _dir) = issuing_app_with_webhooks(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let hook = json!({"url": "http://127.0.0.1:9/hooks", "events": ["invoice.issue_blocked"]});
    expect_status(
        app.post("/v1/webhook-endpoints", token, hook).await,
        StatusCode::CREATED,
    )
    .await;
    // Deactivated after the approval, before the issue job runs.
    app.deactivate(token, b.destination_id).await;
    let workers = workers(&app, &peer);
    until_issue_jobs_settled(&app).await;
    drop(workers);
    let blocked = app.invoice(token, id_of(&invoice)).await;
    assert_eq!(blocked["state"], "approved");
    assert!(blocked["number"].is_null(), "no number was taken");
    let events = expect_status(
        app.get(&format!("/v1/invoices/{}/events", id_of(&invoice)), token)
            .await,
        StatusCode::OK,
    )
    .await;
    let actions: Vec<&str> = events["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions.iter().filter(|a| **a == "issue_blocked").count(),
        1,
        "{actions:?}"
    );
    assert!(!actions.contains(&"issue"));
    let last = events["items"].as_array().unwrap().last().unwrap();
    assert_eq!(last["action"], "issue_blocked");
    assert_eq!(last["actor_kind"], "system");
    // A subscriber hears of it: one delivery queued, of that event.
    let deliveries = "select count(*) from jobs where kind = 'webhook.deliver.v1'";
    assert_eq!(app.sql_count(deliveries).await, 1);
    // Nothing reached the peer and no claim was made, so a human can cancel it.
    let stats = peer.stats().await;
    assert_eq!(stats["executes"], 0, "{stats}");
    assert_eq!(stats["recovers"], 0, "{stats}");
    assert_eq!(app.sql_count("select count(*) from effect_claims").await, 0);
    let cancelled = expect_status(
        app.command(
            token,
            id_of(&invoice),
            "cancel",
            json!({"reason": "Destination closed."}),
        )
        .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(cancelled["invoice"]["state"], "cancelled");
    figures(
        "issuing: destination inactive before the job",
        app.backend,
        &[
            ("issue_blocked events", "1".to_owned()),
            ("peer calls", format!("{:?}", calls(&stats))),
            ("claims", "0".to_owned()),
        ],
    );
}

async fn a_destination_deactivated_after_a_claim_still_issues_exactly_once(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    arm_unknown_attempt(&peer).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let id = uuid_of(&invoice["id"]);
    // Attempt 1: the peer committed, its reply was lost and the recovery unclear.
    let failed = issuer(&peer).issue(&app.app, b.org.org_id, id).await;
    assert_eq!(
        failed.unwrap_err().to_string(),
        EffectFailure::OutcomeUnknown.to_string()
    );
    let numbered = app.invoice(token, id_of(&invoice)).await;
    assert_eq!(numbered["state"], "approved");
    assert!(numbered["number"].is_string(), "{numbered}");
    // Now the destination goes: the peer may hold the invoice, so cancel stays refused ...
    app.deactivate(token, b.destination_id).await;
    expect_problem(
        app.command(
            token,
            id_of(&invoice),
            "cancel",
            json!({"reason": "Destination closed."}),
        )
        .await,
        StatusCode::CONFLICT,
        "issue_in_progress",
    )
    .await;
    // ... and the job goes on under the claim: it recovers the peer's answer and finalises.
    let _workers = workers(&app, &peer);
    let issued = until_state(&app, token, id_of(&invoice), "issued").await;
    assert_eq!(issued["number"], numbered["number"]);
    let stats = one_effect(
        &app,
        &peer,
        token,
        id_of(&invoice),
        "destination deactivated after a claim",
    )
    .await;
    assert_eq!(calls(&stats), ["execute", "recover", "recover"]);
    let actions = app.event_actions(token, id_of(&invoice)).await;
    assert!(!actions.iter().any(|a| a == "issue_blocked"), "{actions:?}");
}

async fn a_failed_finalisation_rolls_back_and_the_retry_finalises_once(backend: Backend) {
    // Points inside the finalisation transaction (after the claim is completed and the event
    // written; after the invoice is read back, the last statement), and after its commit.
    for point in [
        Failpoint::EventInserted,
        Failpoint::InvoiceReadBack,
        Failpoint::CommandCommitted,
    ] {
        let committed = point == Failpoint::CommandCommitted;
        let (app, peer, _dir) = issuing_app(backend).await;
        let (b, invoice) = approved(&app).await;
        let token = &b.org.approver_token;
        let id = uuid_of(&invoice["id"]);
        let issuer = issuer(&peer);
        let armed = arm(b.org.org_id, point);
        let failed = issuer.issue(&app.app, b.org.org_id, id).await;
        assert!(armed.fired(), "{point:?} is on the finalisation path");
        assert!(
            matches!(failed, Err(IssueError::App(AppError::Unavailable(_)))),
            "{point:?}: {failed:?}"
        );
        let claim = app
            .sql_scalar::<String>("select state from effect_claims")
            .await;
        let state = app.invoice(token, id_of(&invoice)).await["state"].clone();
        let after_failure = (
            peer.stats().await["effects"].clone(),
            local_effects(&app, token, id_of(&invoice)).await,
        );
        if committed {
            // The answer is lost after the commit: everything stands.
            assert_eq!(
                (claim.as_str(), state.as_str()),
                ("complete", Some("issued"))
            );
            assert_eq!(after_failure, (json!(1), 1));
        } else {
            // Rolled back: the claim is still the recovery point, nothing local happened.
            assert_eq!(
                (claim.as_str(), state.as_str()),
                ("processing", Some("approved")),
                "{point:?}"
            );
            assert_eq!(after_failure, (json!(1), 0), "{point:?}");
        }
        issuer.issue(&app.app, b.org.org_id, id).await.unwrap();
        until_state(&app, token, id_of(&invoice), "issued").await;
        let stats = one_effect(
            &app,
            &peer,
            token,
            id_of(&invoice),
            &format!("finalisation fails at {}", point.name()),
        )
        .await;
        let expected: &[&str] = if committed {
            &["execute"]
        } else {
            &["execute", "recover"]
        };
        assert_eq!(calls(&stats), expected, "{point:?}");
    }
}

async fn the_reaper_passes_over_a_claim_a_finaliser_holds(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    arm_unknown_attempt(&peer).await;
    let (b, invoice) = approved(&app).await;
    let org = b.org.org_id;
    let id = uuid_of(&invoice["id"]);
    assert!(issuer(&peer).issue(&app.app, org, id).await.is_err());
    abandon_processing_claims(&app).await;
    // A finaliser's transaction, not committed yet: the invoice and the claim locked, the
    // claim completed.
    let key = op_key(org, id);
    let mut finaliser = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    finaliser.lock_invoice(org, id).await.unwrap().unwrap();
    let held = finaliser.lock_claim(org, key).await.unwrap().unwrap();
    assert_eq!(held.state, "processing");
    let at = chrono::Utc::now();
    let retained = at + chrono::Duration::days(30);
    assert!(
        finaliser
            .complete_claim(org, key, "{}", at, retained)
            .await
            .unwrap()
    );
    let reaper = {
        let app = app.app.clone();
        tokio::spawn(async move { app.reap_claims(chrono::Duration::days(7), 10).await })
    };
    let during = if backend == Backend::Postgres {
        // SKIP LOCKED: the reaper passes over the held claim at once, without waiting.
        let reaped = tokio::time::timeout(Duration::from_secs(30), reaper)
            .await
            .expect("the reaper does not wait for the finaliser's lock")
            .unwrap()
            .unwrap();
        assert_eq!(reaped, 0, "a held claim is never reaped");
        None
    } else {
        // SQLite has one writer: the reaper's transaction waits for the finaliser's to end.
        Some(reaper)
    };
    finaliser.commit().await.unwrap();
    let reaped = match during {
        Some(reaper) => reaper.await.unwrap().unwrap(),
        None => app
            .app
            .reap_claims(chrono::Duration::days(7), 10)
            .await
            .unwrap(),
    };
    assert_eq!(reaped, 0, "the finaliser won: the claim is complete");
    let complete = "select count(*) from effect_claims where state = 'complete'";
    assert_eq!(app.sql_count(complete).await, 1);
    figures(
        "issuing: the reaper races a finaliser",
        app.backend,
        &[
            ("reaped", reaped.to_string()),
            ("claims complete", "1".to_owned()),
        ],
    );
}

/// The `http` adapter, except that the first execute, once the peer has answered, tells the
/// test (`reached`) and waits for it (`go`) before answering: a handshake that holds an
/// attempt between the peer's answer and its finalisation.
struct Held {
    inner: HttpIssuer,
    gate: Mutex<Option<(oneshot::Sender<()>, oneshot::Receiver<()>)>>,
}

impl Held {
    /// The adapter and the test's ends: `reached` fires when the execute is held, `go`
    /// releases it.
    fn new(peer: &Peer) -> (Held, oneshot::Receiver<()>, oneshot::Sender<()>) {
        let (reached_tx, reached) = oneshot::channel();
        let (go, go_rx) = oneshot::channel();
        let held = Held {
            inner: http_adapter(peer, Duration::from_secs(5)),
            gate: Mutex::new(Some((reached_tx, go_rx))),
        };
        (held, reached, go)
    }
}

#[async_trait]
impl IssuerAdapter for Held {
    async fn execute(&self, op_key: Uuid, invoice: &Value) -> Executed<Value> {
        let answer = self.inner.execute(op_key, invoice).await;
        if let Some((reached, go)) = self.gate.lock().await.take() {
            let _ = reached.send(());
            let _ = go.await;
        }
        answer
    }

    async fn recover(&self, op_key: Uuid) -> Recovered<Value> {
        self.inner.recover(op_key).await
    }
}

/// Starts an issue attempt through a [`Held`] adapter (with a bound long enough for the
/// handshake) and returns once the peer has answered it and it is held before finalising: the
/// attempt's task, and the sender that lets it go on.
async fn held_attempt(
    app: &TestApp,
    peer: &Peer,
    org: Uuid,
    id: Uuid,
) -> (
    tokio::task::JoinHandle<Result<(), IssueError>>,
    oneshot::Sender<()>,
) {
    let (held, reached, go) = Held::new(peer);
    let issuer = Issuer::new(Arc::new(held), Duration::from_secs(60), None);
    let app = app.app.clone();
    let attempt = tokio::spawn(async move { issuer.issue(&app, org, id).await });
    reached.await.unwrap();
    (attempt, go)
}

async fn a_finalisation_after_a_reap_is_refused_and_the_retry_issues_once(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let org = b.org.org_id;
    let id = uuid_of(&invoice["id"]);
    // The peer has committed; before the attempt finalises, its claim is reaped.
    let (attempt, go) = held_attempt(&app, &peer, org, id).await;
    abandon_processing_claims(&app).await;
    let reaped = app
        .app
        .reap_claims(chrono::Duration::days(7), 10)
        .await
        .unwrap();
    assert_eq!(reaped, 1);
    go.send(()).unwrap();
    let refused = attempt.await.unwrap();
    assert!(
        matches!(refused, Err(IssueError::App(AppError::Internal(_)))),
        "{refused:?}"
    );
    let after = app.invoice(token, id_of(&invoice)).await;
    assert_eq!(after["state"], "approved", "the finalisation rolled back");
    assert_eq!(local_effects(&app, token, id_of(&invoice)).await, 0);
    assert_eq!(peer.stats().await["effects"], 1);
    // The key is derived, so the retry asks for the same one: a claim re-admitted after a
    // reap (the invoice already has its number) recovers before it executes, and the peer's
    // record finalises it.
    issuer_within(&peer, Duration::from_secs(5))
        .issue(&app.app, org, id)
        .await
        .unwrap();
    let issued = until_state(&app, token, id_of(&invoice), "issued").await;
    assert_eq!(issued["number"], after["number"]);
    let stats = one_effect(&app, &peer, token, id_of(&invoice), "finalise after a reap").await;
    assert_eq!(calls(&stats), ["execute", "recover"]);
}

async fn a_finaliser_held_after_the_peer_answered_loses_to_another_and_replays(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let org = b.org.org_id;
    let id = uuid_of(&invoice["id"]);
    // The first attempt has the peer's answer and is held before finalising; a second one
    // finds the claim processing, recovers the answer and finalises.
    let (first, go) = held_attempt(&app, &peer, org, id).await;
    issuer(&peer).issue(&app.app, org, id).await.unwrap();
    let issued = app.invoice(token, id_of(&invoice)).await;
    assert_eq!(issued["state"], "issued");
    // Released, the first finds the claim complete: a replay, nothing written.
    go.send(()).unwrap();
    first.await.unwrap().unwrap();
    assert_eq!(app.invoice(token, id_of(&invoice)).await, issued);
    let stats = one_effect(
        &app,
        &peer,
        token,
        id_of(&invoice),
        "two finalisers, one held after the peer answered",
    )
    .await;
    assert_eq!(calls(&stats), ["execute", "recover"]);
}

/// The `http` adapter, except that its first execute panics once the peer has answered.
struct PanicsOnce {
    inner: HttpIssuer,
    panicked: AtomicBool,
}

#[async_trait]
impl IssuerAdapter for PanicsOnce {
    async fn execute(&self, op_key: Uuid, invoice: &Value) -> Executed<Value> {
        let answer = self.inner.execute(op_key, invoice).await;
        assert!(
            self.panicked.swap(true, Ordering::SeqCst),
            "the adapter panics after the peer committed (on purpose)"
        );
        answer
    }

    async fn recover(&self, op_key: Uuid) -> Recovered<Value> {
        self.inner.recover(op_key).await
    }
}

async fn every_unclear_answer_of_the_peer_ends_in_one_effect_after_recovery(backend: Backend) {
    // (scenario, fault armed at the peer, whether the adapter panics, the issuer's bound)
    let cases = [
        (
            "the peer answers 500 after committing",
            Some(json!({"mode": "error_after_commit"})),
            false,
            Duration::from_secs(5),
        ),
        (
            "the peer answers 2xx with a body that is not JSON",
            Some(json!({"mode": "garbage_after_commit"})),
            false,
            Duration::from_secs(5),
        ),
        (
            "the peer is slower than the issuer's bound",
            Some(json!({"mode": "slow", "millis": 2000})),
            false,
            Duration::from_millis(500),
        ),
        (
            "the adapter panics after the peer committed",
            None,
            true,
            Duration::from_secs(5),
        ),
    ];
    for (scenario, fault, panics, bound) in cases {
        let (app, peer, _dir) = issuing_app(backend).await;
        if let Some(fault) = fault {
            peer.arm(fault).await;
        }
        let (b, invoice) = approved(&app).await;
        let token = &b.org.approver_token;
        let issuer = if panics {
            let adapter = PanicsOnce {
                inner: http_adapter(&peer, bound),
                panicked: AtomicBool::new(false),
            };
            Issuer::new(Arc::new(adapter), bound, None)
        } else {
            issuer_within(&peer, bound)
        };
        let workers = workers_with(&app, issuer);
        until_state(&app, token, id_of(&invoice), "issued").await;
        drop(workers);
        let stats = one_effect(&app, &peer, token, id_of(&invoice), scenario).await;
        let calls = calls(&stats);
        // The unclear execute is followed by a recovery, never by a blind second execute.
        assert_eq!(calls[..2], ["execute", "recover"], "{scenario}: {calls:?}");
        assert!(
            calls.iter().filter(|c| *c == "execute").count() <= 2,
            "{scenario}: {calls:?}"
        );
    }
}

async fn a_worker_with_the_local_issuer_issues_through_the_job(backend: Backend) {
    let app = spawn_app_with(
        backend,
        AppConfig {
            issuer_configured: true,
            ..AppConfig::default()
        },
        HttpConfig::default(),
    )
    .await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let _worker = start_worker(&app, 1, 2, &[("TAUROS_ISSUER", "none")]);
    let issued = until_state(&app, token, id_of(&invoice), "issued").await;
    let year = chrono::Utc::now().format("%Y").to_string();
    assert_eq!(issued["number"], format!("INV-{year}-000001"));
    let local = local_effects(&app, token, id_of(&invoice)).await;
    assert_eq!(local, 1);
    let complete = "select count(*) from effect_claims where state = 'complete'";
    assert_eq!(app.sql_count(complete).await, 1);
    figures(
        "issuing: TAUROS_ISSUER=none through the job",
        app.backend,
        &[("local effects", local.to_string())],
    );
}

async fn a_failed_local_issue_keeps_its_number_and_a_rolled_back_one_leaves_no_gap(app: TestApp) {
    let b = app.billing().await;
    let token = &b.org.approver_token;
    let year = chrono::Utc::now().format("%Y").to_string();
    let first = app.pending(&b, "first").await;
    expect_status(app.approve(token, &first).await, StatusCode::OK).await;
    // A number taken in a transaction that rolls back is given back.
    {
        let mut tx = app
            .app
            .store()
            .begin(tauros_store::Lane::Unattributed)
            .await
            .unwrap();
        let taken = tx
            .next_invoice_number(b.org.org_id, year.parse().unwrap())
            .await
            .unwrap();
        assert_eq!(taken, 1);
        drop(tx);
    }
    // An issue whose finalisation fails keeps the number its admission committed.
    let path = format!("/v1/invoices/{}/issue", id_of(&first));
    let armed = arm(b.org.org_id, Failpoint::EventInserted);
    expect_problem(
        app.post(&path, token, json!({})).await,
        StatusCode::SERVICE_UNAVAILABLE,
        "unavailable",
    )
    .await;
    assert!(armed.fired());
    let failed = app.invoice(token, id_of(&first)).await;
    assert_eq!(failed["state"], "approved");
    assert_eq!(failed["number"], format!("INV-{year}-000001"));
    let issued = expect_status(app.post(&path, token, json!({})).await, StatusCode::OK).await;
    assert_eq!(issued["invoice"]["number"], format!("INV-{year}-000001"));
    assert_eq!(local_effects(&app, token, id_of(&first)).await, 1);
    let second = app.pending(&b, "second").await;
    expect_status(app.approve(token, &second).await, StatusCode::OK).await;
    let path2 = format!("/v1/invoices/{}/issue", id_of(&second));
    let issued2 = expect_status(app.post(&path2, token, json!({})).await, StatusCode::OK).await;
    assert_eq!(issued2["invoice"]["number"], format!("INV-{year}-000002"));
}

/// Makes one claim of each kind for `tauros reap` and the gauges: a complete one (its invoice
/// issued) and a processing one (the peer's answer unclear). Answers the stuck invoice's id.
async fn one_complete_one_processing(
    app: &TestApp,
    peer: &Peer,
    b: &crate::helpers::Billing,
) -> Uuid {
    let token = &b.org.approver_token;
    let done = app.pending(b, "done").await;
    expect_status(app.approve(token, &done).await, StatusCode::OK).await;
    issuer(peer)
        .issue(&app.app, b.org.org_id, uuid_of(&done["id"]))
        .await
        .unwrap();
    arm_unknown_attempt(peer).await;
    let stuck = app.pending(b, "stuck").await;
    expect_status(app.approve(token, &stuck).await, StatusCode::OK).await;
    let stuck = uuid_of(&stuck["id"]);
    assert!(
        issuer(peer)
            .issue(&app.app, b.org.org_id, stuck)
            .await
            .is_err()
    );
    stuck
}

async fn tauros_reap_deletes_only_what_retention_and_the_horizon_allow(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let b = app.billing().await;
    one_complete_one_processing(&app, &peer, &b).await;
    // Both past their time: the complete one past retention, the processing one abandoned.
    abandon_processing_claims(&app).await;
    assert!(
        app.sql_exec(
            "update effect_claims set admitted_at = '1999-06-01T00:00:00+00:00', \
             retain_until = '2000-01-01T00:00:00+00:00' where state = 'complete'"
        )
        .await
    );
    // A young processing claim stays.
    arm_unknown_attempt(&peer).await;
    let young = app.pending(&b, "young").await;
    expect_status(
        app.approve(&b.org.approver_token, &young).await,
        StatusCode::OK,
    )
    .await;
    let young = uuid_of(&young["id"]);
    assert!(
        issuer(&peer)
            .issue(&app.app, b.org.org_id, young)
            .await
            .is_err()
    );
    let url = app.database_url.clone();
    let output = tokio::task::spawn_blocking(move || {
        Command::new(env!("CARGO_BIN_EXE_tauros"))
            .arg("reap")
            .env("DATABASE_URL", url)
            .env("TAUROS_LOG", "warn")
            .stdin(Stdio::null())
            .output()
            .expect("run tauros reap")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        stdout.contains("1 completed past retention deleted, 1 abandoned processing reaped"),
        "{stdout}"
    );
    let left: Vec<(String,)> = app.sql_rows("select state from effect_claims").await;
    assert_eq!(
        left,
        [("processing".to_owned(),)],
        "only the young claim is left"
    );
    let key = op_key(b.org.org_id, young).to_string();
    let key_sql = sql_uuid(&app.database_url, &key);
    let young_left = format!("select count(*) from effect_claims where id = {key_sql}");
    assert_eq!(app.sql_count(&young_left).await, 1);
    figures(
        "issuing: tauros reap",
        app.backend,
        &[
            ("printed", stdout.trim().to_owned()),
            ("claims left", "1".to_owned()),
        ],
    );
}

/// `tauros serve` on the test's database (its own process, so its gauges are its alone);
/// killed when dropped.
struct Served {
    child: std::process::Child,
    base: String,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(app: &TestApp) -> Served {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", &app.database_url)
        .env("TAUROS_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros serve");
    let log = child_lines(child.stderr.take().unwrap(), None);
    let address = listening_address(&log);
    Served {
        child,
        base: format!("http://{address}"),
    }
}

async fn get_text(url: &str) -> String {
    let res = reqwest::get(url).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    res.text().await.unwrap()
}

/// The value of the sample `name` (with its labels) in a metrics text.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("{name} in {text}"))
        .trim()
        .parse()
        .unwrap()
}

async fn the_claim_gauges_count_claims_by_state_and_age_the_oldest_processing(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let b = app.billing().await;
    let stuck = one_complete_one_processing(&app, &peer, &b).await;
    // An hour old: visible in the age, far from the reaper's horizon.
    assert!(
        app.sql_exec(&format!(
            "update effect_claims set admitted_at = '{}' where state = 'processing'",
            (chrono::Utc::now() - chrono::Duration::hours(1)).to_rfc3339()
        ))
        .await
    );
    let server = serve(&app);
    let metrics = format!("{}/metrics", server.base);
    let text = get_text(&metrics).await;
    let processing = "tauros_effect_claims{state=\"processing\"}";
    let complete = "tauros_effect_claims{state=\"complete\"}";
    let age = "tauros_effect_claims_oldest_processing_age_seconds";
    assert_eq!(sample(&text, processing), 1.0);
    assert_eq!(sample(&text, complete), 1.0);
    let oldest = sample(&text, age);
    assert!((3600.0..7200.0).contains(&oldest), "{oldest}");
    // Once the stuck one is issued, nothing is processing and nothing ages.
    issuer(&peer)
        .issue(&app.app, b.org.org_id, stuck)
        .await
        .unwrap();
    let text = get_text(&metrics).await;
    assert_eq!(sample(&text, processing), 0.0);
    assert_eq!(sample(&text, complete), 2.0);
    assert_eq!(sample(&text, age), 0.0);
    figures(
        "issuing: claim gauges",
        app.backend,
        &[
            ("processing", "1 then 0".to_owned()),
            ("complete", "1 then 2".to_owned()),
            (
                "oldest processing age seconds",
                format!("{oldest:.0} then 0"),
            ),
        ],
    );
}

async fn the_reaper_needs_both_the_horizon_and_the_retention_and_never_goes_below_a_day(
    backend: Backend,
) {
    let (app, peer, _dir) = issuing_app(backend).await;
    arm_unknown_attempt(&peer).await;
    let (b, invoice) = approved(&app).await;
    let id = uuid_of(&invoice["id"]);
    assert!(
        issuer(&peer)
            .issue(&app.app, b.org.org_id, id)
            .await
            .is_err()
    );
    let now = chrono::Utc::now();
    let set = |admitted: chrono::DateTime<chrono::Utc>, retained: chrono::DateTime<chrono::Utc>| {
        format!(
            "update effect_claims set admitted_at = '{}', retain_until = '{}' \
             where state = 'processing'",
            admitted.to_rfc3339(),
            retained.to_rfc3339()
        )
    };
    let week = chrono::Duration::days(7);
    let day = chrono::Duration::days(1);
    // Past the horizon, inside its retention: kept.
    assert!(app.sql_exec(&set(now - week * 2, now + day)).await);
    assert_eq!(app.app.reap_claims(week, 10).await.unwrap(), 0);
    // Past its retention, younger than the horizon: kept.
    assert!(app.sql_exec(&set(now - day * 3, now - day * 2)).await);
    assert_eq!(app.app.reap_claims(week, 10).await.unwrap(), 0);
    // A horizon below the one-day floor is raised to it.
    assert!(
        app.sql_exec(&set(
            now - chrono::Duration::hours(3),
            now - chrono::Duration::hours(2)
        ))
        .await
    );
    assert_eq!(
        app.app
            .reap_claims(chrono::Duration::minutes(1), 10)
            .await
            .unwrap(),
        0
    );
    // Even a sanctioned reap that asks for less (straight through the store) is refused by the
    // database below the floor.
    let mut tx = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    assert!(tx.reap_claims(Duration::ZERO, 10).await.is_err());
    drop(tx);
    let processing = "select count(*) from effect_claims where state = 'processing'";
    assert_eq!(app.sql_count(processing).await, 1);
    // Past both: reaped.
    assert!(app.sql_exec(&set(now - week * 2, now - day)).await);
    assert_eq!(app.app.reap_claims(week, 10).await.unwrap(), 1);
    assert_eq!(app.sql_count(processing).await, 0);
}

/// Runs `tauros ARGS` on `app`'s database with `env` until it exits (killed, and the test
/// failed, if it is still running after a minute); answers whether it succeeded and its stderr.
async fn run_tauros(app: &TestApp, args: &[&str], env: &[(&str, &str)]) -> (bool, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(args)
        .env("DATABASE_URL", &app.database_url)
        .env_remove("TAUROS_ISSUER")
        .env_remove("TAUROS_ISSUER_URL")
        .env_remove("TAUROS_CLAIM_ABANDON_DAYS")
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros");
    let pid = child.id().to_string();
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || child.wait_with_output()),
    )
    .await;
    let Ok(output) = waited else {
        let _ = Command::new("kill").args(["-KILL", &pid]).status();
        panic!("tauros {args:?} did not exit");
    };
    let output = output.unwrap().unwrap();
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

async fn the_binary_refuses_an_http_issuer_without_a_url_and_a_horizon_below_a_day(app: TestApp) {
    let (ok, stderr) = run_tauros(&app, &["worker"], &[("TAUROS_ISSUER", "http")]).await;
    assert!(!ok);
    assert!(
        stderr.contains("TAUROS_ISSUER=http needs TAUROS_ISSUER_URL"),
        "{stderr}"
    );
    let (ok, stderr) = run_tauros(&app, &["reap"], &[("TAUROS_CLAIM_ABANDON_DAYS", "0")]).await;
    assert!(!ok);
    assert!(
        stderr.contains("the abandonment horizon must be at least 1 day"),
        "{stderr}"
    );
    // The same reap with the defaults runs (nothing to do).
    let (ok, stderr) = run_tauros(&app, &["reap"], &[]).await;
    assert!(ok, "{stderr}");
}

async fn a_finaliser_waits_for_one_inside_its_transaction_and_then_replays(backend: Backend) {
    let (app, peer, _dir) = issuing_app(backend).await;
    let (b, invoice) = approved(&app).await;
    let token = &b.org.approver_token;
    let org = b.org.org_id;
    let id = uuid_of(&invoice["id"]);
    // The later finaliser: admitted and executed first, then held (a handshake) once the peer
    // has answered.
    let (later, go) = held_attempt(&app, &peer, org, id).await;
    // The first finaliser: admitted on the processing claim, recovers the answer, and stops
    // inside its finalisation transaction, the claim completed and the event written, its
    // locks held.
    let mut inside = failpoints::hold(org, Failpoint::EventInserted);
    let first = {
        let app = app.app.clone();
        let issuer = issuer(&peer);
        tokio::spawn(async move { issuer.issue(&app, org, id).await })
    };
    assert!(
        inside.reached().await,
        "the first finaliser reaches the point"
    );
    // The later one now finalises, and must wait for the first's locks.
    go.send(()).unwrap();
    if backend == Backend::Postgres {
        let waiting = "select count(*) from pg_stat_activity \
                       where datname = current_database() and wait_event_type = 'Lock'";
        let deadline = Instant::now() + Duration::from_secs(30);
        while app.sql_count(waiting).await < 1 {
            assert!(
                Instant::now() < deadline,
                "the later finaliser waits on a lock"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        assert!(!later.is_finished(), "it waits for the first to commit");
    }
    // SQLite: one writer, so the later finaliser's transaction cannot start before the first's
    // ends; the outcome below is the same.
    inside.release();
    first.await.unwrap().unwrap();
    later.await.unwrap().unwrap();
    let issued = app.invoice(token, id_of(&invoice)).await;
    assert_eq!(issued["state"], "issued");
    let stats = one_effect(
        &app,
        &peer,
        token,
        id_of(&invoice),
        "a finaliser waits for another inside its transaction",
    )
    .await;
    assert_eq!(calls(&stats), ["execute", "recover"]);
}
