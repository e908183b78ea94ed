//! The job queue (docs/contract/effects.md §1), on both backends: enqueue inside the caller's
//! transaction and submission ids, leases and fencing, a worker process killed right after its
//! claim, retries and discards, retention that keeps deduplication, what approvers see and do over
//! HTTP, the gauges, and three worker processes running a thousand jobs.
//!
//! Jobs are enqueued through the library (`tauros_app::enqueue`, `App::submit_job`): there is
//! no public enqueue route. They are of the built-in test kind `test.echo.v1`, which worker
//! processes register with `TAUROS_TEST_JOBS=1` and which records each of its executions.
//! Waiting for a job to reach a state polls the database with a deadline; signals are sent at
//! named points the worker announces on its stdout: SIGKILL at the pause after a claim
//! (`TAUROS_TEST_PAUSE_AFTER_CLAIM`), SIGTERM once an echo job with `"announce": true` says
//! its handler runs. Each scenario prints its figures (`helpers::figures`).

use crate::helpers::{
    Backend, TestApp, both_backends, child_lines, expect_problem, expect_status, figures,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};
use tauros_app::runtime::testing::ECHO;
use tauros_app::runtime::{Defaults, WorkerConfig, Workers};
use tauros_app::{AppError, NewJob, Retention};
use tauros_domain::job::JobState;
use tauros_store::{Fence, JobRow, JobUpdate, TestExecutionRow};
use uuid::Uuid;

both_backends!(
    a_rolled_back_transaction_leaves_no_job,
    concurrent_identical_submissions_make_one_job,
    another_definition_under_a_submission_id_is_refused,
    a_stale_workers_late_result_changes_nothing,
    a_worker_killed_after_its_claim_leaves_the_job_to_run_again_without_using_an_attempt,
    sigterm_lets_a_running_job_finish,
    sigterm_past_the_grace_period_leaves_the_job_to_its_lease,
    max_attempts_ends_in_discarded_and_an_approver_can_retry,
    a_failure_schedules_its_retry_within_the_backoff_and_its_jitter,
    pruning_keeps_deduplication,
    approvers_see_retry_and_cancel_jobs,
    metrics_show_jobs_by_kind_and_state,
    three_worker_processes_run_a_thousand_jobs_once_each,
    a_worker_whose_lease_is_stolen_stops_its_handler_and_reports_nothing,
    a_worker_whose_heartbeat_fails_stops_its_handler_before_its_lease_ends,
    leases_are_set_and_rescued_by_the_databases_clock_whatever_the_apps_says,
);

/// A job of the test kind that answers its arguments.
pub(crate) fn echo(org_id: Uuid, args: Value) -> NewJob {
    NewJob {
        org_id,
        kind: ECHO.to_owned(),
        args,
        submission_id: None,
        max_attempts: None,
        run_at: None,
    }
}

fn submitted(org_id: Uuid, submission_id: &str, args: Value) -> NewJob {
    NewJob {
        submission_id: Some(submission_id.to_owned()),
        ..echo(org_id, args)
    }
}

async fn job(app: &TestApp, org_id: Uuid, id: Uuid) -> Option<JobRow> {
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    conn.job(org_id, id).await.unwrap()
}

/// The executions `test.echo.v1` recorded for a job, oldest first.
async fn runs_of(app: &TestApp, org_id: Uuid, id: Uuid) -> Vec<TestExecutionRow> {
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    conn.test_executions(org_id, id).await.unwrap()
}

/// Polls the job until `done` holds (or fails the test after `within`).
pub(crate) async fn wait_for(
    app: &TestApp,
    org_id: Uuid,
    id: Uuid,
    within: Duration,
    done: impl Fn(&JobRow) -> bool,
) -> JobRow {
    let deadline = Instant::now() + within;
    loop {
        let row = job(app, org_id, id).await.expect("the job exists");
        if done(&row) {
            return row;
        }
        assert!(
            Instant::now() < deadline,
            "the job did not get there within {within:?}: {row:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Workers inside the test process, with the test kinds and a short lease.
pub(crate) fn in_process_workers(app: &TestApp, workers: usize) -> Workers {
    let registry = Arc::new(tauros_app::runtime::registry(
        Defaults::default(),
        tauros_app::runtime::webhooks::DeliveryPolicy::default(),
        true,
    ));
    let config = WorkerConfig {
        workers,
        webhook_workers: 1,
        lease: Duration::from_secs(5),
        poll: Duration::from_millis(50),
        max_interruptions: 10,
        retention: Retention::default(),
        prune_batch: 100,
        pause_after_claim: false,
        name: "in-test".to_owned(),
    };
    Workers::start(app.app.clone(), registry, config)
}

/// A `tauros worker` child process; killed (if still running) when dropped.
pub(crate) struct WorkerProcess {
    pub(crate) child: Child,
    pub(crate) stdout: Receiver<String>,
    stderr: Receiver<String>,
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `tauros worker` on `app`'s database with the test kinds, a lease of `lease_seconds`
/// and `extra` environment; returns once it logs that it runs.
pub(crate) fn start_worker(
    app: &TestApp,
    workers: usize,
    lease_seconds: u64,
    extra: &[(&str, &str)],
) -> WorkerProcess {
    let echo = std::env::var_os("TEST_LOG").is_some_and(|v| !v.is_empty() && v != "0");
    let mut child = Command::new(env!("CARGO_BIN_EXE_tauros"))
        .args(["worker", "--workers", &workers.to_string()])
        .env("DATABASE_URL", &app.database_url)
        .env("TAUROS_TEST_JOBS", "1")
        .env("TAUROS_JOB_LEASE_SECONDS", lease_seconds.to_string())
        .env("TAUROS_JOB_POLL_MS", "100")
        .env("TAUROS_SHUTDOWN_GRACE_SECONDS", "30")
        .env("TAUROS_LOG", "info")
        .envs(extra.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tauros worker");
    let stdout = child_lines(child.stdout.take().unwrap(), echo.then_some("worker"));
    let stderr = child_lines(child.stderr.take().unwrap(), echo.then_some("worker"));
    let process = WorkerProcess {
        child,
        stdout,
        stderr,
    };
    loop {
        let line = process
            .stderr
            .recv_timeout(Duration::from_secs(60))
            .expect("the worker logs that it runs");
        if line.contains("tauros worker running") {
            return process;
        }
    }
}

async fn sigterm_and_wait(process: WorkerProcess) -> std::process::ExitStatus {
    sigterm_and_collect(process).await.0
}

/// Sends SIGTERM, waits for the exit, and returns its status with the log lines the process
/// wrote to stderr after its start.
async fn sigterm_and_collect(
    mut process: WorkerProcess,
) -> (std::process::ExitStatus, Vec<String>) {
    let status = Command::new("kill")
        .args(["-TERM", &process.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let pid = process.child.id();
    let waited = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::task::spawn_blocking(move || {
            let status = process.child.wait();
            // The pipe closes with the process: read to its end.
            let mut logs = Vec::new();
            while let Ok(line) = process.stderr.recv_timeout(Duration::from_secs(10)) {
                logs.push(line);
            }
            (status, logs)
        }),
    );
    let (status, logs) = waited
        .await
        .unwrap_or_else(|_| panic!("worker {pid} exits after SIGTERM"))
        .unwrap();
    (status.unwrap(), logs)
}

/// Waits for the worker to print `line` on stdout (a named handshake, not a sleep).
fn wait_for_line(process: &WorkerProcess, line: &str) {
    loop {
        let next = process
            .stdout
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("the worker prints {line:?}: {e}"));
        if next.contains(line) {
            return;
        }
    }
}

/// Submits an echo job that says when it runs (`test job {id} running …`), then sleeps `ms`.
async fn sleeper(app: &TestApp, org_id: Uuid, ms: u64) -> Uuid {
    app.app
        .submit_job(echo(org_id, json!({"sleep_ms": ms, "announce": true})))
        .await
        .unwrap()
        .id
}

/// Waits for the worker to log `text` on stderr (a named handshake, not a sleep).
fn wait_for_log(process: &WorkerProcess, text: &str) {
    loop {
        let next = process
            .stderr
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("the worker logs {text:?}: {e}"));
        if next.contains(text) {
            return;
        }
    }
}

/// The database's clock now, read in SQL (the clock leases are measured by).
async fn db_now(app: &TestApp) -> chrono::DateTime<chrono::Utc> {
    let text: String = app
        .sql_scalar(if app.backend == Backend::Sqlite {
            "select strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')"
        } else {
            "select to_char(now() at time zone 'utc', 'YYYY-MM-DD\"T\"HH24:MI:SS.US+00:00')"
        })
        .await;
    chrono::DateTime::parse_from_rfc3339(&text)
        .unwrap()
        .to_utc()
}

async fn a_rolled_back_transaction_leaves_no_job(app: TestApp) {
    let org = app.org().await;
    let mut tx = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let enqueued = tauros_app::enqueue(&mut *tx, submitted(org.org_id, "order-1", json!({})))
        .await
        .unwrap();
    assert!(!enqueued.replayed);
    drop(tx);
    let jobs_after_rollback = app.sql_count("select count(*) from jobs").await;
    let submissions_after_rollback = app.sql_count("select count(*) from job_submissions").await;
    assert_eq!(jobs_after_rollback, 0);
    assert_eq!(submissions_after_rollback, 0);
    let res = app
        .get(&format!("/v1/jobs/{}", enqueued.id), &org.approver_token)
        .await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;

    // The same enqueue, committed: visible, and the same id (it derives from the submission).
    let mut tx = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let again = tauros_app::enqueue(&mut *tx, submitted(org.org_id, "order-1", json!({})))
        .await
        .unwrap();
    tx.commit().await.unwrap();
    let jobs_after_commit = app.sql_count("select count(*) from jobs").await;
    figures(
        "jobs: a rolled-back transaction leaves no job",
        app.backend,
        &[
            ("jobs after the rollback", jobs_after_rollback.to_string()),
            (
                "submissions after the rollback",
                submissions_after_rollback.to_string(),
            ),
            (
                "jobs after the same enqueue committed",
                jobs_after_commit.to_string(),
            ),
        ],
    );
    assert_eq!(jobs_after_commit, 1);
    assert_eq!(again.id, enqueued.id);
    let res = app
        .get(&format!("/v1/jobs/{}", again.id), &org.approver_token)
        .await;
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(body["state"], "available");
    assert_eq!(body["kind"], ECHO);
    assert_eq!(body["submission_id"], "order-1");
    assert_eq!(body["attempt"], 1);
    assert_eq!(body["max_attempts"], 25);
}

async fn concurrent_identical_submissions_make_one_job(app: TestApp) {
    let org = app.org().await;
    let barrier = Arc::new(tokio::sync::Barrier::new(16));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let core = app.app.clone();
            let barrier = Arc::clone(&barrier);
            let job = submitted(org.org_id, "event-42", json!({"b": 2, "a": [1, 2]}));
            tokio::spawn(async move {
                barrier.wait().await;
                core.submit_job(job).await.unwrap()
            })
        })
        .collect();
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.push(task.await.unwrap());
    }
    let first = outcomes[0].id;
    let ids: std::collections::BTreeSet<Uuid> = outcomes.iter().map(|o| o.id).collect();
    let created = outcomes.iter().filter(|o| !o.replayed).count();
    let jobs = app.sql_count("select count(*) from jobs").await;
    let records = app.sql_count("select count(*) from job_submissions").await;
    figures(
        "jobs: 16 concurrent identical submissions",
        app.backend,
        &[
            ("submissions", outcomes.len().to_string()),
            ("job ids answered", ids.len().to_string()),
            ("created", created.to_string()),
            ("replayed", (outcomes.len() - created).to_string()),
            ("jobs", jobs.to_string()),
            ("submission records", records.to_string()),
        ],
    );
    assert_eq!(ids.len(), 1, "{outcomes:?}");
    assert_eq!(created, 1);
    assert_eq!(jobs, 1);
    assert_eq!(records, 1);
    // Key order does not make another definition.
    let again = app
        .app
        .submit_job(submitted(
            org.org_id,
            "event-42",
            json!({"a": [1, 2], "b": 2}),
        ))
        .await
        .unwrap();
    assert_eq!((again.id, again.replayed), (first, true));
    // Another organisation's identical submission is its own job.
    let other = app.org().await;
    let theirs = app
        .app
        .submit_job(submitted(
            other.org_id,
            "event-42",
            json!({"b": 2, "a": [1, 2]}),
        ))
        .await
        .unwrap();
    assert_ne!(theirs.id, first);
    assert!(!theirs.replayed);
}

async fn another_definition_under_a_submission_id_is_refused(app: TestApp) {
    let org = app.org().await;
    let original = app
        .app
        .submit_job(submitted(org.org_id, "event-7", json!({"note": 1})))
        .await
        .unwrap();
    let mut conflicts = 0;
    for changed in [
        submitted(org.org_id, "event-7", json!({"note": 2})),
        NewJob {
            max_attempts: Some(3),
            ..submitted(org.org_id, "event-7", json!({"note": 1}))
        },
    ] {
        match app.app.submit_job(changed).await {
            Err(AppError::Conflict { code, detail }) => {
                assert_eq!(code, "submission_conflict");
                assert!(detail.contains(&original.id.to_string()), "{detail}");
                conflicts += 1;
            }
            other => panic!("expected submission_conflict, got {other:?}"),
        }
    }
    let jobs = app.sql_count("select count(*) from jobs").await;
    figures(
        "jobs: another definition under a submission id",
        app.backend,
        &[
            ("other definitions submitted", "2".to_owned()),
            ("submission_conflict", conflicts.to_string()),
            ("jobs", jobs.to_string()),
        ],
    );
    assert_eq!(conflicts, 2);
    assert_eq!(jobs, 1);
    // Bad definitions name their fields.
    let bad = NewJob {
        kind: "Echo".to_owned(),
        max_attempts: Some(0),
        submission_id: Some(" padded".to_owned()),
        ..echo(org.org_id, json!([1]))
    };
    match app.app.submit_job(bad).await {
        Err(AppError::Validation(errors)) => {
            let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
            assert_eq!(fields, ["kind", "args", "submission_id", "max_attempts"]);
        }
        other => panic!("expected a validation error, got {other:?}"),
    }
    let huge = echo(org.org_id, json!({"blob": "x".repeat(70_000)}));
    assert!(matches!(
        app.app.submit_job(huge).await,
        Err(AppError::Validation(_))
    ));
}

async fn a_stale_workers_late_result_changes_nothing(app: TestApp) {
    let org = app.org().await;
    let id = app
        .app
        .submit_job(echo(org.org_id, json!({})))
        .await
        .unwrap()
        .id;
    // Worker A claims with a lease that has already run out, as if it froze.
    let a = app
        .app
        .claim_job(&[ECHO], Duration::ZERO, "worker-a")
        .await
        .unwrap()
        .expect("a claim");
    assert_eq!((a.id, a.attempt, a.executions), (id, 1, 1));
    let rescued = app
        .app
        .rescue_expired_leases(10, &|_| Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(rescued.len(), 1);
    let row = job(&app, org.org_id, id).await.unwrap();
    assert_eq!(row.state, JobState::Retryable);
    assert_eq!((row.attempt, row.interruptions), (1, 1), "no attempt used");
    assert_eq!(row.last_error_code.as_deref(), Some("interrupted"));
    assert!(row.lease_token.is_none());
    // Its retry is due after the backoff (1–1.25 s); make it due now rather than wait.
    assert!(app.sql_exec("update jobs set run_at = created_at").await);
    let b = app
        .app
        .claim_job(&[ECHO], Duration::from_secs(60), "worker-b")
        .await
        .unwrap()
        .expect("b claims the retry");
    assert_ne!(a.lease_token, b.lease_token);
    assert_eq!((b.attempt, b.executions), (1, 2));

    // A wakes up: its heartbeat, completion and failure all miss the fence.
    let failure = tauros_app::JobFailure {
        kind: tauros_domain::job::FailureKind::Permanent,
        code: "late".to_owned(),
        message: "a late failure".to_owned(),
    };
    let cap = Duration::from_secs(60);
    let mut late = vec![
        app.app
            .heartbeat(&a, Duration::from_secs(60))
            .await
            .unwrap(),
        app.app.complete_job(&a).await.unwrap(),
        app.app.fail_job(&a, &failure, cap).await.unwrap().is_some(),
    ];
    assert_eq!(late, [false; 3], "heartbeat, completion, failure of A");
    let row = job(&app, org.org_id, id).await.unwrap();
    assert_eq!(row.state, JobState::Running);
    assert_eq!(row.lease_token, Some(b.lease_token));
    assert_eq!(row.worker.as_deref(), Some("worker-b"));
    // The same at the store: only B's token (on a running job) passes the fence.
    let now = chrono::Utc::now();
    let done = JobUpdate {
        state: JobState::Completed,
        attempt: 1,
        interruptions: 1,
        run_at: now,
        finished_at: Some(now),
        last_error: None,
        now,
    };
    let fence = |lease_token| Fence {
        org_id: org.org_id,
        id,
        lease_token,
        expired: false,
    };
    let other_org = Fence {
        org_id: Uuid::new_v4(),
        ..fence(b.lease_token)
    };
    let unexpired = Fence {
        expired: true,
        ..fence(b.lease_token)
    };
    let mut tx = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let fenced = [
        tx.settle_job(fence(a.lease_token), &done).await.unwrap(),
        tx.settle_job(fence(Uuid::new_v4()), &done).await.unwrap(),
        tx.extend_lease(fence(a.lease_token), Duration::from_secs(60), now)
            .await
            .unwrap(),
        tx.settle_job(other_org, &done).await.unwrap(),
        // A rescue cannot take a lease that still holds.
        tx.settle_job(unexpired, &done).await.unwrap(),
    ];
    drop(tx);
    assert_eq!(
        fenced, [false; 5],
        "A's token, a random token, A's heartbeat, another organisation, an unexpired rescue"
    );

    // B's lease holds; its result stands, and A's after it changes nothing either.
    assert!(
        app.app
            .heartbeat(&b, Duration::from_secs(60))
            .await
            .unwrap()
    );
    assert!(app.app.complete_job(&b).await.unwrap());
    late.extend([
        app.app.complete_job(&a).await.unwrap(),
        app.app.fail_job(&a, &failure, cap).await.unwrap().is_some(),
    ]);
    assert_eq!(late, [false; 5], "A after B's completion too");
    assert!(!app.app.complete_job(&b).await.unwrap(), "settled once");
    let row = job(&app, org.org_id, id).await.unwrap();
    figures(
        "jobs: a stale worker's late result",
        app.backend,
        &[
            ("executions", row.executions.to_string()),
            ("interruptions", row.interruptions.to_string()),
            ("attempt", row.attempt.to_string()),
            (
                "late results of A refused",
                format!("{} of {}", late.iter().filter(|r| !**r).count(), late.len()),
            ),
            (
                "store writes off the fence refused",
                format!(
                    "{} of {}",
                    fenced.iter().filter(|r| !**r).count(),
                    fenced.len()
                ),
            ),
            ("final state", format!("{:?}", row.state)),
        ],
    );
    assert_eq!(row.state, JobState::Completed);
    assert_eq!((row.attempt, row.executions, row.interruptions), (1, 2, 1));
    assert!(row.finished_at.is_some());
}

async fn a_worker_killed_after_its_claim_leaves_the_job_to_run_again_without_using_an_attempt(
    app: TestApp,
) {
    let org = app.org().await;
    let id = app
        .app
        .submit_job(echo(org.org_id, json!({})))
        .await
        .unwrap()
        .id;
    let paused = start_worker(&app, 1, 1, &[("TAUROS_TEST_PAUSE_AFTER_CLAIM", "1")]);
    wait_for_line(&paused, &format!("paused after claim of job {id}"));
    // SIGKILL at the pause point: the claim has committed, the handler never ran.
    drop(paused);
    let row = job(&app, org.org_id, id).await.unwrap();
    assert_eq!(row.state, JobState::Running);
    assert_eq!((row.attempt, row.executions), (1, 1));

    // Another worker finds the lease expired, and runs the job again at the same attempt.
    let rescuer = start_worker(&app, 1, 1, &[]);
    let row = wait_for(&app, org.org_id, id, Duration::from_secs(60), |r| {
        r.state == JobState::Completed
    })
    .await;
    assert_eq!(row.attempt, 1, "the interruption used no attempt");
    assert_eq!((row.executions, row.interruptions), (2, 1));
    assert_eq!(row.last_error_code.as_deref(), Some("interrupted"));
    let mut conn = app
        .app
        .store()
        .reader(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let runs = conn.test_executions(org.org_id, id).await.unwrap();
    let completed_runs = runs.iter().filter(|r| r.outcome == "completed").count();
    figures(
        "jobs: a worker SIGKILLed after its claim",
        app.backend,
        &[
            ("jobs", "1".to_owned()),
            ("executions", row.executions.to_string()),
            ("interruptions", row.interruptions.to_string()),
            ("attempt", row.attempt.to_string()),
            ("handler runs", runs.len().to_string()),
            ("completed runs", completed_runs.to_string()),
            ("final state", format!("{:?}", row.state)),
        ],
    );
    assert_eq!(runs.len(), 1, "the killed worker never ran the handler");
    assert_eq!(
        (runs[0].attempt, runs[0].outcome.as_str()),
        (1, "completed")
    );
    assert!(sigterm_and_wait(rescuer).await.success());
}

async fn sigterm_lets_a_running_job_finish(app: TestApp) {
    let org = app.org().await;
    let id = sleeper(&app, org.org_id, 1500).await;
    let worker = start_worker(&app, 1, 30, &[]);
    // SIGTERM once the handler is under way (it says so), with a grace of 30 s.
    wait_for_line(&worker, &format!("test job {id} running"));
    let status = sigterm_and_wait(worker).await;
    assert!(status.success(), "graceful exit: {status:?}");
    let row = job(&app, org.org_id, id).await.unwrap();
    let runs = runs_of(&app, org.org_id, id).await;
    figures(
        "jobs: SIGTERM within the grace period",
        app.backend,
        &[
            ("executions", row.executions.to_string()),
            ("interruptions", row.interruptions.to_string()),
            ("handler runs", runs.len().to_string()),
            ("state at exit", format!("{:?}", row.state)),
        ],
    );
    assert_eq!(
        row.state,
        JobState::Completed,
        "it finished before the exit"
    );
    assert_eq!((row.executions, row.interruptions), (1, 0));
    assert_eq!(runs.len(), 1);
}

/// SIGTERM to a worker whose job outlasts the grace period: the worker exits at the end of
/// the grace, the job stays `running` until its lease runs out, then another worker's upkeep
/// makes it retryable without using an attempt and runs it. Its second run lasts twice the
/// lease: the heartbeats keep it.
async fn sigterm_past_the_grace_period_leaves_the_job_to_its_lease(app: TestApp) {
    const GRACE_S: u64 = 1;
    const LEASE_S: u64 = 2;
    const JOB_MS: u64 = 4000;
    let org = app.org().await;
    let id = sleeper(&app, org.org_id, JOB_MS).await;
    let grace = GRACE_S.to_string();
    let first = start_worker(
        &app,
        1,
        LEASE_S,
        &[("TAUROS_SHUTDOWN_GRACE_SECONDS", &grace)],
    );
    let first_pid = first.child.id();
    wait_for_line(
        &first,
        &format!("test job {id} running (attempt 1, execution 1)"),
    );
    let signalled = Instant::now();
    let (status, logs) = sigterm_and_collect(first).await;
    let took = signalled.elapsed();
    assert!(status.success(), "the worker exits cleanly: {status:?}");
    assert!(
        logs.iter()
            .any(|l| l.contains("grace period over; running jobs are left to their leases")),
        "{logs:?}"
    );
    assert!(
        took >= Duration::from_millis(GRACE_S * 1000 - 50),
        "it waited its grace: {took:?}"
    );
    let left = job(&app, org.org_id, id).await.unwrap();
    let runs_at_exit = runs_of(&app, org.org_id, id).await.len();
    assert_eq!(left.state, JobState::Running, "left to its lease");
    assert_eq!(
        (left.attempt, left.executions, left.interruptions),
        (1, 1, 0)
    );
    assert!(left.lease_token.is_some());
    assert_eq!(runs_at_exit, 0, "the handler was stopped before its end");

    // A second worker takes it once the lease has run out, at the same attempt.
    let second = start_worker(&app, 1, LEASE_S, &[]);
    let second_pid = second.child.id();
    wait_for_line(
        &second,
        &format!("test job {id} running (attempt 1, execution 2)"),
    );
    let row = wait_for(&app, org.org_id, id, Duration::from_secs(60), |r| {
        r.state.is_terminal()
    })
    .await;
    assert!(sigterm_and_wait(second).await.success());
    let runs = runs_of(&app, org.org_id, id).await;
    figures(
        "jobs: SIGTERM past the grace period",
        app.backend,
        &[
            ("grace s", GRACE_S.to_string()),
            ("lease s", LEASE_S.to_string()),
            ("job ms", JOB_MS.to_string()),
            ("exit after SIGTERM s", format!("{:.2}", took.as_secs_f64())),
            ("state at exit", format!("{:?}", left.state)),
            ("handler runs at exit", runs_at_exit.to_string()),
            ("executions", row.executions.to_string()),
            ("interruptions", row.interruptions.to_string()),
            ("attempt", row.attempt.to_string()),
            ("completed runs", runs.len().to_string()),
            ("final state", format!("{:?}", row.state)),
        ],
    );
    assert_eq!(row.state, JobState::Completed);
    assert_eq!(row.attempt, 1, "the interruption used no attempt");
    assert_eq!((row.executions, row.interruptions), (2, 1));
    assert_eq!(runs.len(), 1);
    assert_eq!(runs[0].outcome, "completed");
    assert!(
        runs[0].worker.contains(&format!(":{second_pid}/")),
        "{:?}",
        runs[0]
    );
    assert!(!runs[0].worker.contains(&format!(":{first_pid}/")));
}

async fn max_attempts_ends_in_discarded_and_an_approver_can_retry(app: TestApp) {
    let org = app.org().await;
    let flaky = app
        .app
        .submit_job(NewJob {
            max_attempts: Some(2),
            ..echo(org.org_id, json!({"fail": "retryable"}))
        })
        .await
        .unwrap()
        .id;
    let doomed = app
        .app
        .submit_job(echo(org.org_id, json!({"fail": "permanent"})))
        .await
        .unwrap()
        .id;
    let recovering = app
        .app
        .submit_job(echo(org.org_id, json!({"fail_attempts": 1})))
        .await
        .unwrap()
        .id;
    let workers = in_process_workers(&app, 2);
    let within = Duration::from_secs(60);
    let finished = |r: &JobRow| r.state.is_terminal();
    let flaky_row = wait_for(&app, org.org_id, flaky, within, finished).await;
    let doomed_row = wait_for(&app, org.org_id, doomed, within, finished).await;
    let recovered = wait_for(&app, org.org_id, recovering, within, finished).await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);

    assert_eq!(flaky_row.state, JobState::Discarded);
    assert_eq!((flaky_row.attempt, flaky_row.executions), (2, 2));
    assert_eq!(flaky_row.last_error_code.as_deref(), Some("echo_retryable"));
    assert_eq!(doomed_row.state, JobState::Discarded, "permanent: no retry");
    assert_eq!((doomed_row.attempt, doomed_row.executions), (1, 1));
    assert_eq!(recovered.state, JobState::Completed);
    assert_eq!((recovered.attempt, recovered.executions), (2, 2));
    // The retry waited its backoff: at least a second after the first execution.
    let runs = runs_of(&app, org.org_id, flaky).await;
    assert_eq!(runs.len(), 2);
    let gap = runs[1].started_at - runs[0].finished_at;
    let rows = [&flaky_row, &doomed_row, &recovered];
    let count = |state: JobState| rows.iter().filter(|r| r.state == state).count();
    figures(
        "jobs: max_attempts and discards",
        app.backend,
        &[
            ("jobs", rows.len().to_string()),
            (
                "executions",
                rows.iter().map(|r| r.executions).sum::<i32>().to_string(),
            ),
            (
                "retries",
                rows.iter()
                    .map(|r| r.executions - 1)
                    .sum::<i32>()
                    .to_string(),
            ),
            ("discarded", count(JobState::Discarded).to_string()),
            ("completed", count(JobState::Completed).to_string()),
            ("backoff gap ms", gap.num_milliseconds().to_string()),
        ],
    );
    assert!(gap >= chrono::Duration::milliseconds(990), "{gap}");

    // An approver retries the discarded job: a new cycle from attempt 1.
    let path = format!("/v1/jobs/{flaky}/retry");
    let res = app.post(&path, &org.approver_token, json!({})).await;
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(body["state"], "available");
    assert_eq!(body["attempt"], 1);
    assert_eq!(body["executions"], 2);
    assert_eq!(body["last_error"]["code"], "echo_retryable");
    let audit = app.audit_actions(org.org_id, flaky).await;
    assert_eq!(audit, ["job.retried"]);
    // Again: already available, nothing written.
    let res = app.post(&path, &org.approver_token, json!({})).await;
    assert_eq!(
        expect_status(res, StatusCode::OK).await["state"],
        "available"
    );
    assert_eq!(app.audit_actions(org.org_id, flaky).await.len(), 1);
}

/// The retry's due time against the backend: after a failure of attempt 1 the stored `run_at`
/// lies 1–1.25 s after the end of the execution; after attempt 7 (64 s of backoff) it lies
/// 60–75 s after (the cap, plus its quarter of jitter). Each job draws its own jitter.
async fn a_failure_schedules_its_retry_within_the_backoff_and_its_jitter(app: TestApp) {
    const EACH: usize = 10;
    let org = app.org().await;
    for n in 0..EACH {
        app.app
            .submit_job(echo(org.org_id, json!({"note": ["first", n]})))
            .await
            .unwrap();
        app.app
            .submit_job(echo(org.org_id, json!({"note": ["capped", n]})))
            .await
            .unwrap();
    }
    assert!(
        app.sql_exec("update jobs set attempt = 7 where args like '%capped%'")
            .await
    );
    let failure = tauros_app::JobFailure {
        kind: tauros_domain::job::FailureKind::Retryable,
        code: "boom".to_owned(),
        message: "a retryable failure".to_owned(),
    };
    let cap = Duration::from_secs(60);
    let tolerance = chrono::Duration::milliseconds(2);
    // Delays in ms by the attempt that failed.
    let mut delays = std::collections::BTreeMap::<i32, Vec<i64>>::new();
    while let Some(claimed) = app
        .app
        .claim_job(&[ECHO], Duration::from_secs(60), "backoff-test")
        .await
        .unwrap()
    {
        let before = chrono::Utc::now();
        let next = app
            .app
            .fail_job(&claimed, &failure, cap)
            .await
            .unwrap()
            .expect("the failure is recorded");
        let after = chrono::Utc::now();
        let row = job(&app, org.org_id, claimed.id).await.unwrap();
        assert_eq!(row.state, JobState::Retryable);
        assert_eq!(row.attempt, claimed.attempt + 1);
        assert_eq!(row.run_at, next.run_at, "the due time is stored");
        // The end of the execution: the failure's time, stored with the row.
        let ended = row.updated_at;
        assert!(
            ended >= before - tolerance && ended <= after + tolerance,
            "{before} <= {ended} <= {after}"
        );
        delays
            .entry(claimed.attempt)
            .or_default()
            .push((row.run_at - ended).num_milliseconds());
    }
    let bounds = |attempt: i32| match attempt {
        1 => (1000, 1250),
        7 => (60_000, 75_000),
        other => panic!("unexpected attempt {other}"),
    };
    let lines: Vec<(String, String)> = delays
        .iter()
        .map(|(attempt, ms)| {
            let distinct: std::collections::BTreeSet<&i64> = ms.iter().collect();
            let text = format!(
                "{}, due {}..{} ms after the failure, {} distinct delays",
                ms.len(),
                ms.iter().min().unwrap(),
                ms.iter().max().unwrap(),
                distinct.len()
            );
            (format!("retries after attempt {attempt}"), text)
        })
        .collect();
    let pairs: Vec<(&str, String)> = lines
        .iter()
        .map(|(label, text)| (label.as_str(), text.clone()))
        .collect();
    figures("jobs: backoff and jitter", app.backend, &pairs);
    assert_eq!(delays.keys().copied().collect::<Vec<_>>(), [1, 7]);
    for (attempt, ms) in &delays {
        let (low, high) = bounds(*attempt);
        assert_eq!(ms.len(), EACH);
        for delay in ms {
            assert!(
                (low - 2..=high + 2).contains(delay),
                "after attempt {attempt}: {delay} ms not in [{low}, {high}]"
            );
        }
        let distinct: std::collections::BTreeSet<&i64> = ms.iter().collect();
        assert!(distinct.len() > 1, "jitter varies the delay: {ms:?}");
    }
}

async fn pruning_keeps_deduplication(app: TestApp) {
    let org = app.org().await;
    let kept = app
        .app
        .submit_job(submitted(org.org_id, "invoice-9", json!({"note": 1})))
        .await
        .unwrap()
        .id;
    let waiting = app
        .app
        .submit_job(echo(org.org_id, json!({})))
        .await
        .unwrap()
        .id;
    let res = app
        .post(
            &format!("/v1/jobs/{kept}/cancel"),
            &org.approver_token,
            json!({}),
        )
        .await;
    assert_eq!(
        expect_status(res, StatusCode::OK).await["state"],
        "cancelled"
    );
    // A retention of zero: every finished job is past it; waiting jobs are never pruned.
    let now = Retention {
        completed: Duration::ZERO,
        discarded: Duration::ZERO,
        cancelled: Duration::ZERO,
    };
    assert_eq!(
        app.app
            .prune_jobs(&Retention::default(), 100)
            .await
            .unwrap(),
        0
    );
    let pruned = app.app.prune_jobs(&now, 100).await.unwrap();
    assert_eq!(pruned, 1);
    assert!(job(&app, org.org_id, kept).await.is_none());
    assert!(job(&app, org.org_id, waiting).await.is_some());
    let res = app
        .get(&format!("/v1/jobs/{kept}"), &org.approver_token)
        .await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;

    // The submission record outlives the row: the same definition is still the same job (it
    // is not run again), another one is still refused.
    let again = app
        .app
        .submit_job(submitted(org.org_id, "invoice-9", json!({"note": 1})))
        .await
        .unwrap();
    assert_eq!((again.id, again.replayed), (kept, true));
    assert!(job(&app, org.org_id, kept).await.is_none());
    let conflict = match app
        .app
        .submit_job(submitted(org.org_id, "invoice-9", json!({"note": 2})))
        .await
    {
        Err(AppError::Conflict { code, .. }) => code,
        other => panic!("expected submission_conflict, got {other:?}"),
    };
    let jobs = app.sql_count("select count(*) from jobs").await;
    let records = app.sql_count("select count(*) from job_submissions").await;
    figures(
        "jobs: pruning keeps deduplication",
        app.backend,
        &[
            ("pruned", pruned.to_string()),
            ("jobs left (waiting)", jobs.to_string()),
            ("submission records", records.to_string()),
            (
                "same definition after pruning",
                format!("replayed {}", again.replayed),
            ),
            ("other definition after pruning", conflict.to_string()),
        ],
    );
    assert_eq!(conflict, "submission_conflict");
    assert_eq!(jobs, 1);
    assert_eq!(records, 1);
}

async fn approvers_see_retry_and_cancel_jobs(app: TestApp) {
    let org = app.org().await;
    let token = &org.approver_token;
    let mut ids = Vec::new();
    for n in 0..3 {
        let job = app
            .app
            .submit_job(echo(org.org_id, json!({"note": n})))
            .await
            .unwrap();
        ids.push(job.id);
    }
    let scheduled = app
        .app
        .submit_job(NewJob {
            run_at: Some(chrono::Utc::now() + chrono::Duration::hours(1)),
            ..echo(org.org_id, json!({"note": "later"}))
        })
        .await
        .unwrap()
        .id;
    let other_kind = app
        .app
        .submit_job(NewJob {
            kind: "other.thing.v2".to_owned(),
            ..echo(org.org_id, json!({}))
        })
        .await
        .unwrap()
        .id;

    // Lists: filtered, paginated, newest id first.
    let res = app.get("/v1/jobs?state=scheduled", token).await;
    let body = expect_status(res, StatusCode::OK).await;
    let listed: Vec<&str> = body["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|j| j["id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [scheduled.to_string()]);
    assert_eq!(body["items"][0]["args"], json!({"note": "later"}));
    let res = app.get("/v1/jobs?kind=other.thing.v2", token).await;
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(body["items"][0]["id"], other_kind.to_string());
    assert_eq!(body["items"].as_array().unwrap().len(), 1);
    let mut seen = Vec::new();
    let mut path = "/v1/jobs?limit=2&state=available".to_owned();
    loop {
        let body = expect_status(app.get(&path, token).await, StatusCode::OK).await;
        for item in body["items"].as_array().unwrap() {
            seen.push(item["id"].as_str().unwrap().parse::<Uuid>().unwrap());
        }
        match body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/v1/jobs?limit=2&state=available&cursor={cursor}"),
            None => break,
        }
    }
    let mut expected = ids.clone();
    expected.push(other_kind);
    expected.sort();
    expected.reverse();
    assert_eq!(seen, expected);
    let res = app.get("/v1/jobs?state=done&kind=Nope", token).await;
    let problem = expect_problem(res, StatusCode::UNPROCESSABLE_ENTITY, "validation_failed").await;
    assert_eq!(problem.fields(), ["state", "kind"]);

    // Cancel: a waiting job stops; again is a no-op; the audit trail has one entry.
    let cancel = |id: Uuid| format!("/v1/jobs/{id}/cancel");
    let retry = |id: Uuid| format!("/v1/jobs/{id}/retry");
    let res = app.post(&cancel(scheduled), token, json!({})).await;
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(body["state"], "cancelled");
    assert!(body["finished_at"].is_string());
    let res = app.post(&cancel(scheduled), token, json!({})).await;
    assert_eq!(
        expect_status(res, StatusCode::OK).await["state"],
        "cancelled"
    );
    assert_eq!(
        app.audit_actions(org.org_id, scheduled).await,
        ["job.cancelled"]
    );
    // Retry of a cancelled job: available now, from attempt 1.
    let res = app.post(&retry(scheduled), token, json!({})).await;
    let body = expect_status(res, StatusCode::OK).await;
    assert_eq!(body["state"], "available");
    assert!(body["finished_at"].is_null());

    // Running and finished jobs refuse both, with their own codes.
    let running = app
        .app
        .claim_job(&[ECHO], Duration::from_secs(60), "operator-test")
        .await
        .unwrap()
        .expect("a claim");
    let res = app.post(&cancel(running.id), token, json!({})).await;
    expect_problem(res, StatusCode::CONFLICT, "job_running").await;
    let res = app.post(&retry(running.id), token, json!({})).await;
    expect_problem(res, StatusCode::CONFLICT, "job_running").await;
    let body = expect_status(
        app.get(&format!("/v1/jobs/{}", running.id), token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(body["state"], "running");
    assert_eq!(body["worker"], "operator-test");
    assert!(body["lease_expires_at"].is_string());
    assert!(app.app.complete_job(&running).await.unwrap());
    let res = app.post(&cancel(running.id), token, json!({})).await;
    expect_problem(res, StatusCode::CONFLICT, "job_finished").await;
    let res = app.post(&retry(running.id), token, json!({})).await;
    expect_problem(res, StatusCode::CONFLICT, "job_finished").await;

    // Approvers only, and only their organisation's.
    let (_, operator) = app.human(token, "operator").await;
    let res = app.get("/v1/jobs", &operator).await;
    expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    let res = app.post(&cancel(ids[0]), &org.agent_key, json!({})).await;
    expect_problem(res, StatusCode::FORBIDDEN, "forbidden").await;
    let stranger = app.org().await;
    let res = app
        .get(&format!("/v1/jobs/{}", ids[0]), &stranger.approver_token)
        .await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    let res = app
        .post(&cancel(ids[0]), &stranger.approver_token, json!({}))
        .await;
    expect_problem(res, StatusCode::NOT_FOUND, "not_found").await;
    let body = expect_status(
        app.get("/v1/jobs", &stranger.approver_token).await,
        StatusCode::OK,
    )
    .await;
    assert_eq!(body["items"], json!([]));
    let res = app.get("/v1/jobs/not-a-uuid", token).await;
    expect_problem(res, StatusCode::BAD_REQUEST, "invalid_type").await;
}

async fn metrics_show_jobs_by_kind_and_state(app: TestApp) {
    let org = app.org().await;
    // A kind of its own: no other test's scrape reports a count for it but 0.
    let kind = format!("test.k{}.v1", &Uuid::new_v4().simple().to_string()[..12]);
    for n in 0..3 {
        app.app
            .submit_job(NewJob {
                kind: kind.clone(),
                ..echo(org.org_id, json!({"note": n}))
            })
            .await
            .unwrap();
    }
    let stats = app.app.job_stats().await.unwrap();
    let count = |state: JobState| {
        stats
            .counts
            .iter()
            .find(|c| c.kind == kind && c.state == state)
            .map_or(0, |c| c.count)
    };
    assert_eq!(count(JobState::Available), 3);
    assert_eq!(count(JobState::Running), 0);
    assert!(stats.oldest_due_age.is_some());
    let text = app.metrics().await;
    let available = format!("tauros_jobs{{kind=\"{kind}\",state=\"available\"}}");
    let running = format!("tauros_jobs{{kind=\"{kind}\",state=\"running\"}}");
    assert!(text.contains(&available), "{text}");
    assert!(text.contains(&running), "every state is reported: {text}");
    assert!(text.contains("tauros_jobs_oldest_available_age_seconds"));

    // The counters of what this process's workers did. One execution of the test's own kind
    // has a lease that has already run out (a frozen worker): the upkeep rescues it.
    let frozen = app
        .app
        .claim_job(&[kind.as_str()], Duration::ZERO, "frozen")
        .await
        .unwrap()
        .expect("a claim");
    app.app
        .submit_job(echo(org.org_id, json!({"fail_attempts": 1})))
        .await
        .unwrap();
    let discarded = app
        .app
        .submit_job(echo(org.org_id, json!({"fail": "permanent"})))
        .await
        .unwrap()
        .id;
    let workers = in_process_workers(&app, 1);
    wait_for(&app, org.org_id, discarded, Duration::from_secs(60), |r| {
        r.state == JobState::Discarded
    })
    .await;
    let rescued = wait_for(&app, org.org_id, frozen.id, Duration::from_secs(60), |r| {
        r.state == JobState::Retryable
    })
    .await;
    assert_eq!((rescued.attempt, rescued.interruptions), (1, 1));
    let deadline = Instant::now() + Duration::from_secs(60);
    while app
        .sql_count("select count(*) from jobs where state = 'completed'")
        .await
        < 1
    {
        assert!(Instant::now() < deadline, "the retried job completes");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(workers.shutdown(Duration::from_secs(10)).await);
    let text = app.metrics().await;
    for counter in [
        "tauros_job_retries_total{kind=\"test.echo.v1\"}",
        "tauros_job_discards_total{kind=\"test.echo.v1\"}",
        "tauros_job_completions_total{kind=\"test.echo.v1\"}",
    ] {
        assert!(text.contains(counter), "{counter} in {text}");
    }
    // The kind is this test's alone, so its counter holds exactly what this test did (the
    // gauges are shared with other tests' scrapes, which may zero them meanwhile: read the
    // database's counts instead).
    let name = format!("tauros_job_interruptions_total{{kind=\"{kind}\"}} ");
    let interruptions = text
        .lines()
        .find_map(|line| line.strip_prefix(name.as_str())?.trim().parse::<f64>().ok());
    let stats = app.app.job_stats().await.unwrap();
    let retryable = stats
        .counts
        .iter()
        .find(|c| c.kind == kind && c.state == JobState::Retryable)
        .map_or(0, |c| c.count);
    figures(
        "jobs: metrics",
        app.backend,
        &[
            (
                "interruptions counted",
                interruptions.map_or("none".to_owned(), |n| n.to_string()),
            ),
            ("retryable jobs of the kind", retryable.to_string()),
        ],
    );
    assert_eq!(interruptions, Some(1.0), "{text}");
    assert_eq!(retryable, 1);
}

/// The acceptance scenario: three `tauros worker` processes (three workers each) on one
/// database, 1,000 jobs, one in ten failing its first attempt. Every job completes once, no
/// two executions of a job overlap, none is lost; the figures are printed.
async fn three_worker_processes_run_a_thousand_jobs_once_each(app: TestApp) {
    const JOBS: usize = 1000;
    let org = app.org().await;
    let started = Instant::now();
    let processes: Vec<WorkerProcess> = (0..3).map(|_| start_worker(&app, 3, 10, &[])).collect();
    for batch in 0..JOBS / 100 {
        let mut tx = app
            .app
            .store()
            .begin(tauros_store::Lane::Unattributed)
            .await
            .unwrap();
        for n in batch * 100..(batch + 1) * 100 {
            let args = if n % 10 == 0 {
                json!({"note": n, "fail_attempts": 1})
            } else {
                json!({"note": n})
            };
            let job = submitted(org.org_id, &format!("job-{n}"), args);
            tauros_app::enqueue(&mut *tx, job).await.unwrap();
        }
        tx.commit().await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let completed = app
            .sql_count("select count(*) from jobs where state = 'completed'")
            .await;
        if completed == JOBS as i64 {
            break;
        }
        let discarded = app
            .sql_count("select count(*) from jobs where state = 'discarded'")
            .await;
        assert_eq!(discarded, 0, "no job is discarded");
        assert!(
            Instant::now() < deadline,
            "only {completed} of {JOBS} jobs completed in time"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let elapsed = started.elapsed();
    for process in processes {
        assert!(sigterm_and_wait(process).await.success());
    }

    let count = |sql: &'static str| app.sql_count(sql);
    let executions = count("select count(*) from test_job_executions").await;
    let claims = count("select coalesce(sum(executions), 0) from jobs").await;
    let retries = count("select coalesce(sum(attempt - 1), 0) from jobs").await;
    let interruptions = count("select coalesce(sum(interruptions), 0) from jobs").await;
    let failed_runs =
        count("select count(*) from test_job_executions where outcome <> 'completed'").await;
    let overlaps = count(
        "select count(*) from test_job_executions a join test_job_executions b
           on a.org_id = b.org_id and a.job_id = b.job_id and a.id <> b.id
          and a.started_at < b.finished_at and b.started_at < a.finished_at",
    )
    .await;
    let completed_twice = count(
        "select count(*) from (select job_id from test_job_executions where outcome = 'completed'
           group by job_id having count(*) > 1) twice",
    )
    .await;
    let completed_jobs =
        count("select count(distinct job_id) from test_job_executions where outcome = 'completed'")
            .await;
    let tokens = count("select count(distinct lease_token) from test_job_executions").await;
    let by_worker: Vec<(String, i64)> = app
        .sql_rows("select worker, count(*) from test_job_executions group by worker")
        .await;
    let mut by_process = std::collections::BTreeMap::<String, i64>::new();
    for (worker, n) in by_worker {
        let process = worker.split('/').next().unwrap_or_default().to_owned();
        *by_process.entry(process).or_default() += n;
    }
    let lost = JOBS as i64 - completed_jobs;
    figures(
        "jobs: three worker processes, 1,000 jobs",
        app.backend,
        &[
            ("jobs", JOBS.to_string()),
            ("seconds", format!("{:.1}", elapsed.as_secs_f64())),
            ("executions", executions.to_string()),
            ("claims", claims.to_string()),
            ("retries", retries.to_string()),
            ("failed runs", failed_runs.to_string()),
            ("interruptions", interruptions.to_string()),
            ("overlapping executions", overlaps.to_string()),
            ("completed twice", completed_twice.to_string()),
            ("lost", lost.to_string()),
            (
                "executions per process",
                format!("{:?}", by_process.values().collect::<Vec<_>>()),
            ),
        ],
    );
    assert_eq!(overlaps, 0, "no job ran in two places at once");
    assert_eq!(completed_twice, 0, "no job completed twice");
    assert_eq!(lost, 0, "every job ran to completion");
    assert_eq!(retries, (JOBS / 10) as i64, "one retry per failing job");
    assert_eq!(failed_runs, retries);
    assert_eq!(
        executions,
        JOBS as i64 + retries,
        "every execution recorded once"
    );
    assert_eq!(claims, executions + interruptions);
    assert_eq!(tokens, executions, "a fresh lease token per execution");
    assert_eq!(by_process.len(), 3, "all three processes took part");
    assert_eq!(
        count("select count(*) from job_submissions").await,
        JOBS as i64
    );
}

/// A job row another transaction holds does not stop the queue: the claimer passes over it to
/// the next due job (`FOR UPDATE SKIP LOCKED`). PostgreSQL only: SQLite has one writer, so a
/// row cannot be held apart from the whole database and there is nothing to pass over.
/// PostgreSQL only: a row held by another transaction exists only there. SQLite has one writer
/// and no row locks, so its claims never meet a held job (its claim runs inside the writer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claimer_passes_over_a_locked_job() {
    let app = crate::helpers::spawn_app(Backend::Postgres).await;
    let org = app.org().await;
    let first = app
        .app
        .submit_job(echo(org.org_id, json!({})))
        .await
        .unwrap()
        .id;
    let second = app
        .app
        .submit_job(echo(org.org_id, json!({})))
        .await
        .unwrap()
        .id;
    // Another transaction holds the job that is due first.
    let mut holder = <sqlx::PgConnection as sqlx::Connection>::connect(&app.database_url)
        .await
        .unwrap();
    sqlx::query("begin").execute(&mut holder).await.unwrap();
    let held: Uuid = sqlx::query_scalar(
        "select id from jobs where state = 'available' order by run_at, id limit 1 for update",
    )
    .fetch_one(&mut holder)
    .await
    .unwrap();
    let other = if held == first { second } else { first };
    let workers = in_process_workers(&app, 1);
    wait_for(&app, org.org_id, other, Duration::from_secs(30), |r| {
        r.state == JobState::Completed
    })
    .await;
    let still = job(&app, org.org_id, held).await.unwrap();
    assert_eq!(still.state, JobState::Available, "the held job waited");
    sqlx::query("rollback").execute(&mut holder).await.unwrap();
    wait_for(&app, org.org_id, held, Duration::from_secs(30), |r| {
        r.state == JobState::Completed
    })
    .await;
    assert!(workers.shutdown(Duration::from_secs(10)).await);
}

/// Fencing (docs/JOBS.md, "Fencing"): a worker whose lease is taken from it (expired in the
/// database, rescued, claimed by another worker) stops its handler at its next heartbeat,
/// long before the handler would have finished; its completion never comes, and the other
/// worker's outcome is the one that stands.
async fn a_worker_whose_lease_is_stolen_stops_its_handler_and_reports_nothing(app: TestApp) {
    const LEASE_S: u64 = 3;
    const JOB_MS: u64 = 8000;
    let org = app.org().await;
    let id = sleeper(&app, org.org_id, JOB_MS).await;
    let worker = start_worker(&app, 1, LEASE_S, &[]);
    wait_for_line(&worker, &format!("test job {id} running (attempt 1"));
    let first = job(&app, org.org_id, id).await.unwrap();
    let stolen_at = Instant::now();
    // The lease runs out in the database (as if the worker had frozen) and is rescued. A
    // heartbeat may slip in between the two and extend it again (or hold the row while a
    // loaded machine runs it slowly): then expire it again, for up to 5 s (the handler sleeps
    // 8 s), a short pause between tries so a slow heartbeat can finish.
    let cap = |_: &str| Duration::from_secs(60);
    let mut rescued = 0;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        assert!(
            app.sql_exec(
                "update jobs set lease_expires_at = '2000-01-01T00:00:00+00:00'
                 where state = 'running'"
            )
            .await
        );
        rescued = app
            .app
            .rescue_expired_leases(10, &cap, 10)
            .await
            .unwrap()
            .len();
        if rescued == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(rescued, 1, "the expired lease is rescued");
    assert!(app.sql_exec("update jobs set run_at = created_at").await);
    let thief = app
        .app
        .claim_job(&[ECHO], Duration::from_secs(60), "thief")
        .await
        .unwrap()
        .expect("another worker claims it");
    assert_eq!(thief.id, id);
    // The first worker's next heartbeat finds the lease gone and stops the handler.
    wait_for_log(&worker, "lease lost while running: handler stopped");
    let noticed = stolen_at.elapsed();
    let (status, _) = sigterm_and_collect(worker).await;
    assert!(status.success(), "{status:?}");
    let runs_after_stop = runs_of(&app, org.org_id, id).await.len();
    let row = job(&app, org.org_id, id).await.unwrap();
    assert_eq!(runs_after_stop, 0, "the stopped handler never finished");
    assert_eq!(row.state, JobState::Running);
    assert_eq!(
        row.lease_token,
        Some(thief.lease_token),
        "the thief's lease stands"
    );
    assert_eq!(row.worker.as_deref(), Some("thief"));
    assert!(app.app.complete_job(&thief).await.unwrap());
    let row = job(&app, org.org_id, id).await.unwrap();
    figures(
        "jobs: a stolen lease stops its handler",
        app.backend,
        &[
            ("lease s", LEASE_S.to_string()),
            ("job ms", JOB_MS.to_string()),
            (
                "stop noticed after s",
                format!("{:.2}", noticed.as_secs_f64()),
            ),
            ("runs of the stopped handler", runs_after_stop.to_string()),
            ("executions", row.executions.to_string()),
            ("interruptions", row.interruptions.to_string()),
            ("final state", format!("{:?}", row.state)),
        ],
    );
    assert!(first.lease_token.is_some());
    assert_ne!(first.lease_token, Some(thief.lease_token));
    assert_eq!(row.state, JobState::Completed);
    // Each stolen lease is one interruption and uses no attempt; the thief's execution is the
    // last. The worker's own upkeep (every half lease) may rescue the expired lease before
    // this test does and run the job again, to be stolen again: then there are two of each.
    assert_eq!(row.attempt, 1, "no attempt used by an interruption");
    assert!(row.interruptions >= 1, "the stolen lease counted");
    assert_eq!(
        row.executions,
        row.interruptions + 1,
        "every interrupted execution counted, and the thief's"
    );
}

/// Fencing: a worker whose heartbeats cannot get through (the job's row is held: a database
/// that does not answer) stops its handler before its lease could run out, reports nothing,
/// and the job is rescued once the lease has expired, without using an attempt.
async fn a_worker_whose_heartbeat_fails_stops_its_handler_before_its_lease_ends(app: TestApp) {
    const LEASE_S: u64 = 3;
    const JOB_MS: u64 = 8000;
    let org = app.org().await;
    let id = sleeper(&app, org.org_id, JOB_MS).await;
    let worker = start_worker(&app, 1, LEASE_S, &[]);
    wait_for_line(&worker, &format!("test job {id} running (attempt 1"));
    // Hold the row (PostgreSQL: `FOR UPDATE`; SQLite: the database's write lock): no
    // heartbeat gets through from now on.
    let mut hold = app
        .app
        .store()
        .begin(tauros_store::Lane::Unattributed)
        .await
        .unwrap();
    let held = hold.lock_job(org.org_id, id).await.unwrap().unwrap();
    let held_since = Instant::now();
    wait_for_log(
        &worker,
        "no heartbeat succeeded before the lease could run out",
    );
    let stopped_after = held_since.elapsed();
    let stopped_at = chrono::Utc::now();
    drop(hold);
    let lease_end = held.lease_expires_at.expect("a running job has a lease");
    assert!(
        stopped_at < lease_end,
        "stopped at {stopped_at}, before the lease's end {lease_end}"
    );
    let (status, _) = sigterm_and_collect(worker).await;
    assert!(status.success(), "{status:?}");
    assert_eq!(
        runs_of(&app, org.org_id, id).await.len(),
        0,
        "the stopped handler never finished"
    );
    // Once the lease has run out (by the database's clock), the rescue makes it retryable.
    let cap = |_: &str| Duration::from_secs(60);
    let deadline = Instant::now() + Duration::from_secs(30);
    let row = loop {
        app.app.rescue_expired_leases(10, &cap, 10).await.unwrap();
        let row = job(&app, org.org_id, id).await.unwrap();
        if row.state != JobState::Running {
            break row;
        }
        assert!(Instant::now() < deadline, "the lease runs out: {row:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    figures(
        "jobs: a failing heartbeat stops its handler",
        app.backend,
        &[
            ("lease s", LEASE_S.to_string()),
            ("job ms", JOB_MS.to_string()),
            (
                "stopped after the hold s",
                format!("{:.2}", stopped_after.as_secs_f64()),
            ),
            (
                "stopped before the lease's end s",
                format!(
                    "{:.2}",
                    (lease_end - stopped_at).num_milliseconds() as f64 / 1000.0
                ),
            ),
            ("state after the lease", format!("{:?}", row.state)),
            ("interruptions", row.interruptions.to_string()),
        ],
    );
    assert_eq!(row.state, JobState::Retryable);
    assert_eq!((row.attempt, row.interruptions), (1, 1), "no attempt used");
}

/// Lease deadlines are the database's now plus the lease: a claim and a heartbeat made with
/// the application's clock an hour off (fast, then slow) still set them from the database's
/// clock, and a rescue does not take a lease that holds by it.
async fn leases_are_set_and_rescued_by_the_databases_clock_whatever_the_apps_says(app: TestApp) {
    let org = app.org().await;
    let id = app
        .app
        .submit_job(echo(org.org_id, json!({})))
        .await
        .unwrap()
        .id;
    let skew = chrono::Duration::hours(1);
    let lease = Duration::from_secs(60);
    let store = app.app.store();
    let before = db_now(&app).await;
    let row = store
        .claim_job(&tauros_store::Claim {
            now: chrono::Utc::now() + skew,
            lease_token: Uuid::new_v4(),
            lease,
            worker: "fast-clock",
            kinds: &[ECHO],
            pool: tauros_app::MAIN_POOL,
            lane_limit: None,
        })
        .await
        .unwrap()
        .expect("claimed");
    let after = db_now(&app).await;
    let ms = |d: Duration| chrono::Duration::milliseconds(d.as_millis() as i64);
    let claimed_until = row.lease_expires_at.unwrap();
    let claimed_from = before;
    assert!(
        before + ms(lease) <= claimed_until && claimed_until <= after + ms(lease),
        "{before} + 60 s <= {claimed_until} <= {after} + 60 s"
    );
    // A heartbeat from an app whose clock is an hour slow.
    let fence = Fence {
        org_id: org.org_id,
        id,
        lease_token: row.lease_token.unwrap(),
        expired: false,
    };
    let before = db_now(&app).await;
    let mut tx = store.begin(tauros_store::Lane::Unattributed).await.unwrap();
    assert!(
        tx.extend_lease(fence, Duration::from_secs(30), chrono::Utc::now() - skew)
            .await
            .unwrap()
    );
    tx.commit().await.unwrap();
    let after = db_now(&app).await;
    let extended = job(&app, org.org_id, id)
        .await
        .unwrap()
        .lease_expires_at
        .unwrap();
    let half = Duration::from_secs(30);
    assert!(
        before + ms(half) <= extended && extended <= after + ms(half),
        "{before} + 30 s <= {extended} <= {after} + 30 s"
    );
    // The lease holds by the database's clock: nothing to rescue, nor to settle as expired.
    let rescued = app
        .app
        .rescue_expired_leases(10, &|_| Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert!(rescued.is_empty());
    figures(
        "jobs: leases by the database's clock",
        app.backend,
        &[
            ("app clock skew s", format!("±{}", skew.num_seconds())),
            (
                "claimed lease from the db now before the claim s",
                format!(
                    "{:.3}",
                    (claimed_until - claimed_from).num_milliseconds() as f64 / 1000.0
                ),
            ),
            ("rescued while held", rescued.len().to_string()),
        ],
    );
    // Once it has run out by the database's clock (moved there here), the rescue takes it.
    assert!(
        app.sql_exec("update jobs set lease_expires_at = '2000-01-01T00:00:00+00:00'")
            .await
    );
    let rescued = app
        .app
        .rescue_expired_leases(10, &|_| Duration::from_secs(60), 10)
        .await
        .unwrap();
    assert_eq!(rescued.len(), 1);
}
