//! Issuing by the claim protocol (docs/contract/effects.md §3, docs/EFFECTS.md).

mod http;

pub use http::HttpIssuer;

use crate::app::App;
use crate::audit::AuditActor;
use crate::error::AppError;
use crate::invoices::{ISSUE_JOB, IssueClaim, IssueStart, IssueStop};
use crate::runtime::{JobContext, JobError, JobResult, KindPolicy, Registry};
use async_trait::async_trait;
use futures_util::FutureExt;
use serde_json::Value;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tauros_domain::effect::{self, Admission, Attempt, EffectFailure, Executed, Recovered, Step};
use uuid::Uuid;

/// A system approved invoices are issued to, given the operation key unchanged. `Absent` must
/// come from a real query of the peer; anything unclear is `Unknown`.
#[async_trait]
pub trait IssuerAdapter: Send + Sync + 'static {
    /// Issues the invoice under `op_key` (the peer deduplicates by it).
    async fn execute(&self, op_key: Uuid, invoice: &Value) -> Executed<Value>;
    /// Asks the peer whether it holds `op_key`.
    async fn recover(&self, op_key: Uuid) -> Recovered<Value>;
}

/// Issuing locally: no other system, so the issue is the local change alone.
pub struct LocalIssuer;

#[async_trait]
impl IssuerAdapter for LocalIssuer {
    async fn execute(&self, op_key: Uuid, _invoice: &Value) -> Executed<Value> {
        Executed::Done(tauros_domain::effect::local_issue_response(op_key))
    }

    async fn recover(&self, _op_key: Uuid) -> Recovered<Value> {
        // Nothing outside ever held it: absence is the truth, and executing is local.
        Recovered::Absent
    }
}

/// Where a test may hold the issue job (tests only; see `TAUROS_TEST_PAUSE_AT`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PausePoint {
    BeforeExecute,
    AfterExecute,
    BeforeFinalise,
}

impl PausePoint {
    pub fn parse(s: &str) -> Option<PausePoint> {
        match s {
            "before_execute" => Some(PausePoint::BeforeExecute),
            "after_execute" => Some(PausePoint::AfterExecute),
            "before_finalise" => Some(PausePoint::BeforeFinalise),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            PausePoint::BeforeExecute => "before_execute",
            PausePoint::AfterExecute => "after_execute",
            PausePoint::BeforeFinalise => "before_finalise",
        }
    }
}

/// The configured issuer: its adapter, a bound on each call, and (tests only) a pause point.
#[derive(Clone)]
pub struct Issuer {
    adapter: Arc<dyn IssuerAdapter>,
    timeout: Duration,
    pause: Option<PausePoint>,
}

impl Issuer {
    pub fn new(
        adapter: Arc<dyn IssuerAdapter>,
        timeout: Duration,
        pause: Option<PausePoint>,
    ) -> Issuer {
        Issuer {
            adapter,
            timeout,
            pause,
        }
    }

    /// A test's pause point: announced on stdout, then waits for the test to kill the process.
    async fn pause_at(&self, point: PausePoint, op_key: Uuid) {
        if self.pause == Some(point) {
            println!("paused at {} {op_key}", point.as_str());
            std::future::pending::<()>().await;
        }
    }

    /// `execute`, where a panic, a timeout or an error is `Unknown`. Runs inside the attempt (no
    /// task), so a stopped attempt (lease lost) drops the call with it.
    async fn execute(&self, op_key: Uuid, invoice: &Value) -> Executed<Value> {
        let call = AssertUnwindSafe(self.adapter.execute(op_key, invoice)).catch_unwind();
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(answer)) => answer,
            _ => Executed::Unknown,
        }
    }

    /// `recover`, where a panic, a timeout or an error is `Unknown` (never `Absent`).
    async fn recover(&self, op_key: Uuid) -> Recovered<Value> {
        let call = AssertUnwindSafe(self.adapter.recover(op_key)).catch_unwind();
        match tokio::time::timeout(self.timeout, call).await {
            Ok(Ok(answer)) => answer,
            _ => Recovered::Unknown,
        }
    }

    /// One attempt on an admitted claim: at most one execute, `Unknown` authorising nothing; the
    /// peer's response to finalise with (checked against the request), or why issuing stops.
    pub async fn attempt(&self, claim: &IssueClaim) -> Result<Outcome, EffectFailure> {
        let mut attempt = Attempt::on_claim(claim.stale);
        let mut step = Attempt::start(claim.admission);
        loop {
            step = match step {
                Step::Execute => {
                    if !attempt.begin_execute() {
                        return Err(EffectFailure::Unavailable);
                    }
                    self.pause_at(PausePoint::BeforeExecute, claim.op_key).await;
                    let answer = self.execute(claim.op_key, &claim.body).await;
                    self.pause_at(PausePoint::AfterExecute, claim.op_key).await;
                    attempt.after_execute(answer)
                }
                Step::Recover => attempt.after_recover(self.recover(claim.op_key).await),
                Step::Finalise(response) => {
                    return Ok(match effect::compare_held(&claim.body, &response) {
                        Ok(()) => Outcome::Done(response),
                        Err(conflict) => Outcome::Stop(IssueStop::Conflict(conflict)),
                    });
                }
                Step::Reject(reason) => return Ok(Outcome::Stop(IssueStop::Rejected(reason))),
                Step::NeedsReview => return Ok(Outcome::Stop(IssueStop::NeedsReview)),
                Step::Fail(failure) => return Err(failure),
            };
        }
    }

    /// Issues one approved invoice: admit, call the peer, finalise; `Ok` when nothing is left.
    pub async fn issue(&self, app: &App, org_id: Uuid, invoice_id: Uuid) -> Result<(), IssueError> {
        self.issue_version(app, org_id, invoice_id, None).await
    }

    /// [`Issuer::issue`] as the job of one version (`submission`); a superseded job does nothing.
    pub async fn issue_version(
        &self,
        app: &App,
        org_id: Uuid,
        invoice_id: Uuid,
        submission: Option<&str>,
    ) -> Result<(), IssueError> {
        let actor = AuditActor::job();
        let claim = match app
            .admit_issue(org_id, invoice_id, submission, actor)
            .await?
        {
            IssueStart::Admitted(claim) => claim,
            IssueStart::Settled(_)
            | IssueStart::Blocked
            | IssueStart::Stopped(_)
            | IssueStart::Superseded => {
                return Ok(());
            }
        };
        let response = match claim.admission {
            Admission::Replay => Value::Null,
            Admission::KeyReused => {
                return Err(IssueError::Effect(EffectFailure::KeyReused));
            }
            // Closed as rejected: this version is over; an approver issues again.
            Admission::Refused => return Ok(()),
            Admission::Execute | Admission::Recover => match self.attempt(&claim).await? {
                Outcome::Done(response) => response,
                Outcome::Stop(stop) => {
                    // The job ends here, not retried: a human decides.
                    app.stop_issue(&claim, &stop, actor).await?;
                    return Ok(());
                }
            },
        };
        self.pause_at(PausePoint::BeforeFinalise, claim.op_key)
            .await;
        app.finalise_issue(&claim, &response, actor).await?;
        Ok(())
    }
}

/// How an attempt ended when it did not fail.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// The peer's response: finalise with it.
    Done(Value),
    /// Issuing stops for a human (rejected, conflict, needs review).
    Stop(IssueStop),
}

/// Why an issue attempt did not finish.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    #[error("{0}")]
    Effect(#[from] EffectFailure),
    #[error("{0}")]
    App(#[from] AppError),
}

impl From<IssueError> for JobError {
    fn from(e: IssueError) -> JobError {
        match e {
            IssueError::Effect(f) if !f.is_retryable() => {
                JobError::permanent(f.code(), f.to_string())
            }
            IssueError::Effect(f) => JobError::retryable(f.code(), f.to_string()),
            IssueError::App(AppError::NotFound) => {
                JobError::permanent("not_found", "the invoice no longer exists")
            }
            IssueError::App(e) => JobError::retryable("issue_failed", e.to_string()),
        }
    }
}

/// Where the issue job's backoff stops doubling: ten minutes, so 25 attempts span about three
/// hours of a peer outage, not twenty minutes (docs/EFFECTS.md, "The peer is down for a day").
pub const ISSUE_BACKOFF_CAP: Duration = Duration::from_secs(600);

/// Registers `invoice.issue.v1` (args `{"invoice_id": …}`) with `issuer`.
pub fn register(registry: &mut Registry, issuer: Issuer) {
    let issuer = Arc::new(issuer);
    registry.register(
        ISSUE_JOB,
        KindPolicy {
            backoff_cap: Some(ISSUE_BACKOFF_CAP),
            timeout: None,
        },
        move |ctx: JobContext, args: Value| {
            let issuer = Arc::clone(&issuer);
            async move { run_issue_job(&issuer, &ctx, &args).await }
        },
    );
}

async fn run_issue_job(issuer: &Issuer, ctx: &JobContext, args: &Value) -> JobResult {
    let invoice_id = args
        .get("invoice_id")
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<Uuid>().ok())
        .ok_or_else(|| JobError::permanent("bad_args", "args must be {\"invoice_id\": UUID}"))?;
    issuer
        .issue_version(
            &ctx.app,
            ctx.job.org_id,
            invoice_id,
            ctx.job.submission_id.as_deref(),
        )
        .await
        .map_err(JobError::from)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::Defaults;
    use tauros_domain::job::{DEFAULT_BACKOFF_CAP, DEFAULT_MAX_ATTEMPTS, backoff};

    /// The backoff waited (no jitter) across the default attempts before the job is discarded.
    fn waited(cap: Duration) -> Duration {
        (1..DEFAULT_MAX_ATTEMPTS)
            .map(|attempt| backoff(attempt, cap))
            .sum()
    }

    #[test]
    fn issue_jobs_back_off_to_ten_minutes_so_their_attempts_span_hours() {
        let mut registry = Registry::new(Defaults::default());
        let issuer = Issuer::new(Arc::new(LocalIssuer), Duration::from_secs(1), None);
        register(&mut registry, issuer);
        assert_eq!(registry.backoff_cap(ISSUE_JOB), ISSUE_BACKOFF_CAP);
        // 1 + 2 + … + 32 s, then 60 s: about 19 minutes under the queue's default cap; 1 + 2 +
        // … + 512 s, then 600 s: about 2 h 37 min under the issue cap (plus up to a quarter
        // of jitter, and the attempts themselves).
        assert_eq!(
            waited(DEFAULT_BACKOFF_CAP),
            Duration::from_secs(63 + 18 * 60)
        );
        assert_eq!(
            waited(ISSUE_BACKOFF_CAP),
            Duration::from_secs(1023 + 14 * 600)
        );
    }
}
