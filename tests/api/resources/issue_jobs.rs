//! Issue jobs without dead ends (docs/contract/effects.md §6, "Issuing redrive"), on both
//! backends: an issue job whose claim is processing cannot be cancelled (409
//! `issue_in_progress`) and is finished by a retry instead; an issue job whose invoice is
//! still approved outlives the retention window, and its retry issues the invoice; an
//! invoice approved while no issuer was configured is issued after a restart with one, by the
//! redrive sweep (at start-up of a real `tauros serve`, and page by page in the library).

use crate::helpers::{
    Backend, TestApp, both_backends, child_lines, expect_problem, expect_status, figures, id_of,
    listening_address, spawn_app_with, uuid_of,
};
use crate::operations::peer::{Peer, PeerDir};
use reqwest::StatusCode;
use serde_json::json;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tauros_api::HttpConfig;
use tauros_app::issuing::{HttpIssuer, Issuer, LocalIssuer};
use tauros_app::runtime::{Defaults, Registry, WorkerConfig, Workers};
use tauros_app::{App, AppConfig, ISSUE_JOB, JobFailure, Retention};
use tauros_domain::job::{FailureKind, job_id_for_submission};
use uuid::Uuid;

both_backends!(
    backend: an_issue_job_whose_claim_is_processing_cannot_be_cancelled_and_a_retry_finishes_it,
    an_issue_job_outlives_retention_while_its_invoice_is_approved_and_its_retry_issues_it,
    an_invoice_approved_without_an_issuer_is_issued_by_the_redrive_after_a_restart_with_one,
);

fn with_issuer() -> AppConfig {
    AppConfig {
        issuer_configured: true,
        ..AppConfig::default()
    }
}

/// Workers inside the test process that run the issue job with `issuer`.
fn workers(app: &TestApp, issuer: Issuer) -> Workers {
    let mut registry = Registry::new(Defaults {
        backoff_cap: Duration::from_secs(1),
        timeout: Duration::from_secs(30),
    });
    tauros_app::issuing::register(&mut registry, issuer);
    let config = WorkerConfig {
        workers: 1,
        webhook_workers: 1,
        lease: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        max_interruptions: 10,
        retention: Retention::default(),
        prune_batch: 100,
        pause_after_claim: false,
        name: "in-test".to_owned(),
    };
    Workers::start(app.app.clone(), Arc::new(registry), config)
}

/// The issue job of `invoice_id` (its id derives from the submission id, the invoice id).
fn issue_job_id(org_id: Uuid, invoice_id: Uuid) -> Uuid {
    job_id_for_submission(org_id, ISSUE_JOB, &invoice_id.to_string())
}

/// Polls the invoice until it is `state` (or fails after a minute).
async fn until_state(app: &TestApp, token: &str, id: &str, state: &str) -> serde_json::Value {
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

async fn an_issue_job_whose_claim_is_processing_cannot_be_cancelled_and_a_retry_finishes_it(
    backend: Backend,
) {
    let app = spawn_app_with(backend, with_issuer(), HttpConfig::default()).await;
    let dir = PeerDir::new();
    let peer = Peer::start(&dir).await;
    let b = app.billing().await;
    let token = &b.org.approver_token;
    let pending = app.pending(&b, "in-progress").await;
    expect_status(app.approve(token, &pending).await, StatusCode::OK).await;
    let invoice_id = uuid_of(&pending["id"]);
    let job_id = issue_job_id(b.org.org_id, invoice_id);
    // One attempt whose outcome is unknown: the peer commits, its reply is lost, and the
    // recovery answers "unknown". The claim stays processing; the job waits to run again.
    peer.arm(json!({"mode": "drop_reply_after_commit"})).await;
    peer.arm(json!({"mode": "recover_unknown"})).await;
    let url = format!("{}/invoices", peer.base);
    let timeout = Duration::from_secs(5);
    let issuer = || {
        Issuer::new(
            Arc::new(HttpIssuer::new(&url, timeout).unwrap()),
            timeout,
            None,
        )
    };
    assert!(
        issuer()
            .issue(&app.app, b.org.org_id, invoice_id)
            .await
            .is_err()
    );
    let processing = "select count(*) from effect_claims where state = 'processing'";
    assert_eq!(app.sql_count(processing).await, 1);
    let jobs_before = app.sql_count("select count(*) from jobs").await;
    let cancel = format!("/v1/jobs/{job_id}/cancel");
    let refused = expect_problem(
        app.post(&cancel, token, json!({})).await,
        StatusCode::CONFLICT,
        "issue_in_progress",
    )
    .await;
    let detail = refused.detail.as_str();
    assert!(detail.contains("retry"), "{detail}");
    assert!(detail.contains(&invoice_id.to_string()), "{detail}");
    let job = app
        .get(&format!("/v1/jobs/{job_id}"), token)
        .await
        .json::<serde_json::Value>()
        .await
        .unwrap();
    assert_eq!(job["state"], "available", "nothing changed: {job}");
    assert_eq!(
        app.sql_count("select count(*) from jobs").await,
        jobs_before
    );
    let audit = app.audit_actions(b.org.org_id, job_id).await;
    assert!(!audit.iter().any(|a| a == "job.cancelled"), "{audit:?}");

    // The way out: the job runs (a retry makes it due now) and finishes the issue through
    // recovery, one effect at the peer.
    expect_status(
        app.post(&format!("/v1/jobs/{job_id}/retry"), token, json!({}))
            .await,
        StatusCode::OK,
    )
    .await;
    let running = workers(&app, issuer());
    let issued = until_state(&app, token, id_of(&pending), "issued").await;
    assert!(running.shutdown(Duration::from_secs(10)).await);
    let stats = peer.stats().await;
    // Another approved invoice whose issue has not started: its job can be cancelled.
    let other = app.pending(&b, "not-started").await;
    expect_status(app.approve(token, &other).await, StatusCode::OK).await;
    let other_job = issue_job_id(b.org.org_id, uuid_of(&other["id"]));
    let cancelled = expect_status(
        app.post(&format!("/v1/jobs/{other_job}/cancel"), token, json!({}))
            .await,
        StatusCode::OK,
    )
    .await;
    figures(
        "issue jobs: cancel while the claim is processing",
        app.backend,
        &[
            ("cancel answered", "409 issue_in_progress".to_owned()),
            ("peer effects", stats["effects"].to_string()),
            ("final state", issued["state"].to_string()),
            ("not started job cancelled", cancelled["state"].to_string()),
        ],
    );
    assert_eq!(stats["effects"], 1, "{stats}");
    assert_eq!(cancelled["state"], "cancelled");
}

async fn an_issue_job_outlives_retention_while_its_invoice_is_approved_and_its_retry_issues_it(
    backend: Backend,
) {
    let app = spawn_app_with(backend, with_issuer(), HttpConfig::default()).await;
    let b = app.billing().await;
    let token = &b.org.approver_token;
    let pending = app.pending(&b, "kept").await;
    expect_status(app.approve(token, &pending).await, StatusCode::OK).await;
    let invoice_id = uuid_of(&pending["id"]);
    let job_id = issue_job_id(b.org.org_id, invoice_id);
    // Its attempts run out (a permanent failure, as a worker would record it): discarded.
    let claimed = app
        .app
        .claim_job(&[ISSUE_JOB], Duration::from_secs(30), "w")
        .await
        .unwrap()
        .expect("the issue job is due");
    assert_eq!(claimed.id, job_id);
    let failure = JobFailure {
        kind: FailureKind::Permanent,
        code: "peer_down".to_owned(),
        message: "the peer refused".to_owned(),
    };
    let next = app
        .app
        .fail_job(&claimed, &failure, Duration::from_secs(1))
        .await
        .unwrap()
        .unwrap();
    assert!(next.discarded());
    // A test job finished as long ago, for comparison.
    let echo = app
        .app
        .submit_job(tauros_app::NewJob {
            org_id: b.org.org_id,
            kind: "test.echo.v1".to_owned(),
            args: json!({}),
            submission_id: None,
            max_attempts: None,
            run_at: None,
        })
        .await
        .unwrap()
        .id;
    let echo_claim = app
        .app
        .claim_job(&["test.echo.v1"], Duration::from_secs(30), "w")
        .await
        .unwrap()
        .unwrap();
    assert_eq!(echo_claim.id, echo);
    app.app
        .fail_job(&echo_claim, &failure, Duration::from_secs(1))
        .await
        .unwrap();
    // Both finished a year ago: far past the discarded retention (7 days).
    let long_ago = "update jobs set finished_at = '2000-01-01T00:00:00+00:00'";
    assert!(app.sql_exec(long_ago).await);
    let pruned = app
        .app
        .prune_jobs(&Retention::default(), 100)
        .await
        .unwrap();
    let left: Vec<String> = app
        .sql_rows::<(String,)>("select kind from jobs")
        .await
        .into_iter()
        .map(|(k,)| k)
        .collect();
    assert_eq!(pruned, 1, "the test job only");
    assert_eq!(
        left,
        [ISSUE_JOB],
        "the issue job of an approved invoice is kept"
    );

    // The way out is still there: retry runs it, and the invoice is issued.
    let retried = expect_status(
        app.post(&format!("/v1/jobs/{job_id}/retry"), token, json!({}))
            .await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(retried["state"], "available");
    let running = workers(
        &app,
        Issuer::new(Arc::new(LocalIssuer), Duration::from_secs(5), None),
    );
    let issued = until_state(&app, token, id_of(&pending), "issued").await;
    assert!(running.shutdown(Duration::from_secs(10)).await);
    // Its work done, the job is pruned like any other once past retention.
    assert!(app.sql_exec(long_ago).await);
    let pruned_after = app
        .app
        .prune_jobs(&Retention::default(), 100)
        .await
        .unwrap();
    figures(
        "issue jobs: retention keeps unfinished work",
        app.backend,
        &[
            ("pruned while approved", pruned.to_string()),
            ("issue jobs kept", left.len().to_string()),
            ("state after retry", issued["state"].to_string()),
            ("pruned once issued", pruned_after.to_string()),
        ],
    );
    assert_eq!(pruned_after, 1);
    assert_eq!(app.sql_count("select count(*) from jobs").await, 0);
}

async fn an_invoice_approved_without_an_issuer_is_issued_by_the_redrive_after_a_restart_with_one(
    backend: Backend,
) {
    // Approved while no issuer is configured: no issue job.
    let app = spawn_app_with(backend, AppConfig::default(), HttpConfig::default()).await;
    let b = app.billing().await;
    let token = &b.org.approver_token;
    let mut invoices = Vec::new();
    for key in ["a", "b", "c"] {
        let pending = app.pending(&b, key).await;
        expect_status(app.approve(token, &pending).await, StatusCode::OK).await;
        invoices.push(pending);
    }
    assert_eq!(app.sql_count("select count(*) from jobs").await, 0);
    // The sweep of an app with an issuer, in pages of two: one job per approved invoice, and
    // a second sweep enqueues nothing.
    let with = App::new(app.app.store().clone(), with_issuer());
    let first = with.redrive_issuing(2).await.unwrap();
    let second = with.redrive_issuing(2).await.unwrap();
    assert_eq!((first.approved, first.enqueued, first.failed), (3, 3, 0));
    assert_eq!((second.approved, second.enqueued, second.failed), (3, 0, 0));
    // Each shows its issue pending under its job, as after an approval with an issuer.
    let shown = app.invoice(token, id_of(&invoices[0])).await;
    assert_eq!(shown["issuing"]["status"], "pending", "{shown}");
    assert!(shown["issuing"]["job_id"].is_string(), "{shown}");
    // Without an issuer, the sweep does nothing.
    let without = app.app.redrive_issuing(2).await.unwrap();
    assert_eq!(without.approved, 0);
    // One more approved without an issuer; then `tauros serve` starts with one: its
    // start-up sweep enqueues the missing job and its workers issue all four.
    let last = app.pending(&b, "d").await;
    expect_status(app.approve(token, &last).await, StatusCode::OK).await;
    invoices.push(last);
    assert_eq!(app.sql_count("select count(*) from jobs").await, 3);
    let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(["serve", "--bind", "127.0.0.1:0"])
        .env("DATABASE_URL", &app.database_url)
        .env("TAUROS_ISSUER", "none")
        .env("TAUROS_JOB_POLL_MS", "100")
        .env("TAUROS_LOG", "info")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros serve");
    let stderr = child_lines(child.stderr.take().unwrap(), None);
    let _address = listening_address(&stderr);
    let started = Instant::now();
    for invoice in &invoices {
        until_state(&app, token, id_of(invoice), "issued").await;
    }
    let took = started.elapsed();
    // Each job settles just after its invoice's issue commits.
    let completed_sql = "select count(*) from jobs where state = 'completed'";
    let deadline = Instant::now() + Duration::from_secs(60);
    while app.sql_count(completed_sql).await < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
    let jobs = app
        .sql_count("select count(*) from jobs where kind = 'invoice.issue.v1'")
        .await;
    let completed = app.sql_count(completed_sql).await;
    figures(
        "issue jobs: redrive after a restart with an issuer",
        app.backend,
        &[
            ("approved without an issuer", invoices.len().to_string()),
            ("enqueued by the library sweep", first.enqueued.to_string()),
            ("enqueued by a second sweep", second.enqueued.to_string()),
            ("issue jobs", jobs.to_string()),
            ("completed", completed.to_string()),
            ("all issued after s", format!("{:.2}", took.as_secs_f64())),
        ],
    );
    assert_eq!(jobs, 4, "one job per invoice");
    assert_eq!(completed, 4);
}
