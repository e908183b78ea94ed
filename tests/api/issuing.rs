//! Issuing approved invoices exactly once through a peer (effects.md §3 and §5): the claim
//! protocol against the reference peer (`tauros peer`) over real HTTP, with crashes made by
//! killing a real `tauros worker` at a named pause point (`TAUROS_TEST_PAUSE_AT`), never by
//! sleeping. Each scenario prints the calls the peer saw, the effects it made and the local
//! effects (issue events): one effect wherever the peer deduplicates.

use crate::helpers::{
    Backend, TestApp, both_backends, expect_problem, expect_status, figures, id_of, spawn_app_with,
    sql_uuid,
};
use crate::jobs::{WorkerProcess, start_worker};
use crate::peer::{Peer, PeerDir};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tauros::app::AppConfig;
use tauros::effects::{HttpIssuer, Issuer};
use tauros::http::HttpConfig;
use tauros::jobs::{Defaults, Registry, WorkerConfig, Workers};

both_backends!(without_an_issuer_an_approver_issues_locally);

both_backends!(
    backend: approving_issues_through_the_peer_exactly_once,
    a_worker_killed_before_the_peer_call_recovers_then_executes_once,
    a_worker_killed_after_the_peer_committed_does_not_execute_again,
    a_worker_killed_inside_finalisation_recovers_the_peers_answer,
    a_lost_reply_is_recovered_within_the_attempt,
    an_unknown_recovery_leaves_the_claim_processing_until_a_later_attempt,
    a_lying_absent_is_absorbed_by_a_deduplicating_peer_and_only_by_one,
    concurrent_attempts_finalise_once,
    cancel_and_issue_race_and_exactly_one_wins,
    claims_are_kept_cleaned_and_reaped_only_as_allowed,
);

/// A server whose approvals enqueue the issue job, and a peer.
async fn issuing_app(backend: Backend) -> (TestApp, Peer, PeerDir) {
    let config = AppConfig {
        issuer_configured: true,
        ..AppConfig::default()
    };
    let app = spawn_app_with(backend, config, HttpConfig::default()).await;
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    (app, peer, dir)
}

fn issuer(peer: &Peer) -> Issuer {
    let adapter = HttpIssuer::new(&format!("{}/invoices", peer.base), Duration::from_secs(5))
        .expect("client");
    Issuer::new(Arc::new(adapter), Duration::from_secs(5), None)
}

/// Workers inside the test process that run the issue job against `peer`.
fn workers(app: &TestApp, peer: &Peer) -> Workers {
    let mut registry = Registry::new(Defaults {
        backoff_cap: Duration::from_secs(1),
        timeout: Duration::from_secs(30),
    });
    tauros::effects::register(&mut registry, issuer(peer));
    let config = WorkerConfig {
        workers: 2,
        lease: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        max_interruptions: 10,
        retention: tauros::app::Retention::default(),
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
async fn approved(app: &TestApp) -> (crate::helpers::Billing, Value) {
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
async fn until_state(app: &TestApp, token: &str, id: &str, state: &str) -> Value {
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

/// The peer's calls as `execute`/`recover` in order.
fn calls(stats: &Value) -> Vec<String> {
    stats["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["kind"].as_str().unwrap().to_owned())
        .collect()
}

/// The number of `issue` events of an invoice (the local effect).
async fn local_effects(app: &TestApp, token: &str, id: &str) -> usize {
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
    // Either the job was faster (a replay of issued) or it is still to come (409).
    match by_hand.status() {
        StatusCode::OK => assert_eq!(by_hand.json::<Value>().await.unwrap()["replayed"], true),
        _ => {
            expect_problem(by_hand, StatusCode::CONFLICT, "issuer_configured").await;
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

async fn a_worker_killed_inside_finalisation_recovers_the_peers_answer(backend: Backend) {
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
        tauros::domain::effect::EffectFailure::OutcomeUnknown.to_string()
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
            tauros::domain::effect::EffectFailure::Unavailable.to_string()
        );
        // Attempt 2: recover lies again, so it executes under the same key.
        issuer.issue(&app.app, b.org.org_id, id).await.unwrap();
        until_state(&app, token, id_of(&invoice), "issued").await;
        let stats = peer.stats().await;
        let local = local_effects(&app, token, id_of(&invoice)).await;
        println!(
            "issuing [lying absent, peer {}] on {:?}: peer calls {:?}, peer effects {}, local effects {}",
            if dedupe {
                "deduplicates"
            } else {
                "does not deduplicate (negative control)"
            },
            app.backend,
            calls(&stats),
            stats["effects"],
            local
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
    // sides are compared: polled, with a deadline, never a fixed sleep.
    let deadline = Instant::now() + Duration::from_secs(60);
    let unsettled = "select count(*) from jobs where state in ('available', 'scheduled', 'running', 'retryable')";
    while app.sql_count(unsettled).await > 0 {
        assert!(Instant::now() < deadline, "issue jobs still unsettled");
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
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
    println!(
        "issuing [cancel races issue] on {:?}: {} invoices, {} cancelled, {} issued, peer effects {}",
        app.backend,
        approved_ids.len(),
        cancelled,
        issued,
        stats["effects"]
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
    let mut tx = app.app.store().begin().await.unwrap();
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
    println!(
        "issuing [cleanup and reaper] on {:?}: peer calls {:?}, peer effects {}",
        app.backend,
        calls(&stats),
        stats["effects"]
    );
    assert_eq!(stats["effects"], 3);
}
