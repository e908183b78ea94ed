//! The job queue's use cases (effects.md §1): enqueueing inside the caller's transaction, what
//! approvers see and do with jobs, and the workers' side: claim, heartbeat, settle, rescue the
//! executions whose lease expired, prune finished jobs. The rules are `domain::job`'s; the
//! store applies each outcome fenced by the execution's lease token.

use super::{Actor, App, AppError, AppResult, AuditActor, PageRequest, Replayed, audit, now};
use crate::domain::error::{Coded, FieldError};
use crate::domain::fingerprint::key_is_valid;
use crate::domain::job::{
    self as rules, Cancel, Definition, FailureKind, JobMoveError, JobState, Next, Progress, Retry,
};
use crate::store::{
    Claim, Fence, JobCount, JobFilter, JobRow, JobUpdate, SubmissionRow, TestExecutionRow, Tx,
};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;
use uuid::Uuid;

/// A job to enqueue.
#[derive(Clone, Debug)]
pub struct NewJob {
    pub org_id: Uuid,
    /// A versioned kind (`invoice.issue.v1`).
    pub kind: String,
    /// A JSON object, at most 64 KiB.
    pub args: Value,
    /// The caller's stable id for this job (an event id, an invoice id): enqueueing the same
    /// definition under it again returns the existing job, another definition is refused.
    pub submission_id: Option<String>,
    /// Counted attempts (1–1000); 25 when `None`.
    pub max_attempts: Option<i32>,
    /// Not before this time; now when `None`.
    pub run_at: Option<DateTime<Utc>>,
}

/// The job an enqueue stands for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Enqueued {
    pub id: Uuid,
    /// The submission id already named this definition: nothing was written (the job may
    /// have run and even been pruned since).
    pub replayed: bool,
}

/// Enqueues a job inside the caller's transaction, so it commits or rolls back with the state
/// change it belongs to. With a submission id, the unique keys of the submission record (not a
/// read before the insert) decide whether this is a new job.
pub async fn enqueue(tx: &mut dyn Tx, job: NewJob) -> AppResult<Enqueued> {
    let mut errors = Vec::new();
    if !rules::kind_is_valid(&job.kind) {
        errors.push(FieldError::plain(
            "kind",
            "invalid_kind",
            "a job kind is lowercase dot-separated names ending in a version, such as \
             `invoice.issue.v1`",
        ));
    }
    let args = rules::canonical_args(&job.args)
        .map_err(|e| errors.push(FieldError::new("args", &e)))
        .ok();
    if job
        .submission_id
        .as_deref()
        .is_some_and(|s| !key_is_valid(s))
    {
        errors.push(FieldError::plain(
            "submission_id",
            "invalid_submission_id",
            "a submission id is 1–200 characters, without surrounding spaces or control \
             characters",
        ));
    }
    let max_attempts = job.max_attempts.unwrap_or(rules::DEFAULT_MAX_ATTEMPTS);
    if !(1..=rules::MAX_MAX_ATTEMPTS).contains(&max_attempts) {
        errors.push(FieldError::plain(
            "max_attempts",
            "out_of_range",
            "max_attempts must be from 1 to 1000",
        ));
    }
    let Some(args) = args else {
        return Err(AppError::Validation(errors));
    };
    if !errors.is_empty() {
        return Err(AppError::Validation(errors));
    }
    let now = now();
    let scheduled_at = job.run_at.map(truncate);
    let definition_hash = rules::definition_hash(&Definition {
        kind: &job.kind,
        args: &args,
        max_attempts,
        scheduled_at,
    });
    let id = match &job.submission_id {
        None => Uuid::now_v7(),
        Some(submission_id) => {
            let id = rules::job_id_for_submission(job.org_id, &job.kind, submission_id);
            let submission = SubmissionRow {
                job_id: id,
                org_id: job.org_id,
                kind: job.kind.clone(),
                submission_id: submission_id.clone(),
                definition_hash: definition_hash.clone(),
                created_at: now,
            };
            if !tx.insert_submission(&submission).await? {
                let existing = tx.submission(job.org_id, id).await?.ok_or_else(|| {
                    AppError::Internal(format!("submission record of job {id} is missing"))
                })?;
                if existing.definition_hash == definition_hash {
                    return Ok(Enqueued { id, replayed: true });
                }
                return Err(AppError::Conflict {
                    code: "submission_conflict",
                    detail: format!(
                        "submission id {submission_id:?} of kind {} already names job {id} with \
                         another definition; nothing was enqueued. Enqueue the original \
                         definition, or use a new submission id for a new job",
                        job.kind
                    ),
                });
            }
            id
        }
    };
    let run_at = scheduled_at.map_or(now, |t| t.max(now));
    let row = JobRow {
        id,
        org_id: job.org_id,
        kind: job.kind,
        args,
        submission_id: job.submission_id,
        definition_hash,
        state: if run_at > now {
            JobState::Scheduled
        } else {
            JobState::Available
        },
        attempt: 1,
        max_attempts,
        executions: 0,
        interruptions: 0,
        run_at,
        lease_token: None,
        lease_expires_at: None,
        worker: None,
        last_error_code: None,
        last_error_message: None,
        created_at: now,
        updated_at: now,
        started_at: None,
        finished_at: None,
    };
    tx.insert_job(&row).await?;
    Ok(Enqueued {
        id,
        replayed: false,
    })
}

/// A job as operators see it.
#[derive(Clone, Debug)]
pub struct JobView {
    pub id: Uuid,
    pub kind: String,
    pub state: JobState,
    pub args: Value,
    pub submission_id: Option<String>,
    pub definition_hash: String,
    /// The counted attempt the current or next execution is.
    pub attempt: i32,
    pub max_attempts: i32,
    /// Every start, counted or not.
    pub executions: i32,
    /// Executions that ended by an expired lease.
    pub interruptions: i32,
    /// When it may run next (or ran last).
    pub run_at: DateTime<Utc>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub worker: Option<String>,
    /// The last failure: its code and message.
    pub last_error: Option<(String, String)>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
}

fn view(row: JobRow) -> AppResult<JobView> {
    let args = serde_json::from_str(&row.args).map_err(|e| {
        AppError::Internal(format!("stored args of job {} are not JSON: {e}", row.id))
    })?;
    Ok(JobView {
        id: row.id,
        kind: row.kind,
        state: row.state,
        args,
        submission_id: row.submission_id,
        definition_hash: row.definition_hash,
        attempt: row.attempt,
        max_attempts: row.max_attempts,
        executions: row.executions,
        interruptions: row.interruptions,
        run_at: row.run_at,
        lease_expires_at: row.lease_expires_at,
        worker: row.worker,
        last_error: row.last_error_code.zip(row.last_error_message),
        created_at: row.created_at,
        updated_at: row.updated_at,
        started_at: row.started_at,
        finished_at: row.finished_at,
    })
}

/// Which jobs to list.
#[derive(Clone, Debug, Default)]
pub struct JobQuery {
    pub state: Option<String>,
    pub kind: Option<String>,
}

/// The error an operator's refused move answers.
fn move_error(e: JobMoveError) -> AppError {
    AppError::Conflict {
        code: e.code(),
        detail: e.to_string(),
    }
}

impl App {
    /// Enqueues one job in a transaction of its own (callers with a state change to commit
    /// with it use [`enqueue`] inside theirs).
    pub async fn submit_job(&self, job: NewJob) -> AppResult<Enqueued> {
        let mut tx = self.store.begin().await?;
        let enqueued = enqueue(&mut *tx, job).await?;
        tx.commit().await?;
        Ok(enqueued)
    }

    /// The organisation's jobs by id, descending (approvers).
    pub async fn list_jobs(
        &self,
        actor: &Actor,
        query: JobQuery,
        page: PageRequest,
    ) -> AppResult<Vec<JobView>> {
        let human = actor.human()?.approver()?;
        let mut errors = Vec::new();
        let state = super::list_filter(
            "state",
            query.state.as_deref(),
            &JobState::ALL,
            JobState::as_str,
            &mut errors,
        );
        if query
            .kind
            .as_deref()
            .is_some_and(|k| !rules::kind_is_valid(k))
        {
            errors.push(FieldError::plain(
                "kind",
                "invalid_kind",
                "`kind` must be a job kind such as `invoice.issue.v1`",
            ));
        }
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let filter = JobFilter {
            state,
            kind: query.kind,
        };
        let rows = self
            .store
            .reader()
            .await?
            .jobs(human.org_id, &filter, page.into())
            .await?;
        rows.into_iter().map(view).collect()
    }

    /// One job of the organisation (approvers).
    pub async fn get_job(&self, actor: &Actor, id: Uuid) -> AppResult<JobView> {
        let human = actor.human()?.approver()?;
        let row = self.store.reader().await?.job(human.org_id, id).await?;
        view(row.ok_or(AppError::NotFound)?)
    }

    /// Makes a discarded, cancelled, retryable or scheduled job available now (approvers).
    /// Discarded and cancelled jobs start a new cycle at attempt 1; an available job is left
    /// as it is.
    pub async fn retry_job(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<JobView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        let row = tx
            .lock_job(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        let now = now();
        let (attempt, interruptions) = match rules::retry(row.state).map_err(move_error)? {
            Retry::Unchanged => return Ok(Replayed::replay(view(row)?)),
            Retry::Expedite => (row.attempt, row.interruptions),
            Retry::NewCycle => (1, 0),
        };
        let update = JobUpdate {
            state: JobState::Available,
            attempt,
            interruptions,
            run_at: now,
            finished_at: None,
            last_error: None,
            now,
        };
        tx.update_job(human.org_id, id, &update).await?;
        audit(
            &mut *tx,
            human.org_id,
            AuditActor::human(human),
            "job.retried",
            ("job", id),
            serde_json::json!({ "kind": row.kind, "from": row.state.as_str(), "attempt": attempt }),
        )
        .await?;
        let row = tx.job(human.org_id, id).await?.ok_or(AppError::NotFound)?;
        tx.commit().await?;
        Ok(Replayed::fresh(view(row)?))
    }

    /// Stops a job that has not started: it will not run (approvers). Already cancelled is
    /// left as it is; a running or finished job cannot be cancelled.
    pub async fn cancel_job(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<JobView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin().await?;
        let row = tx
            .lock_job(human.org_id, id)
            .await?
            .ok_or(AppError::NotFound)?;
        if rules::cancel(row.state).map_err(move_error)? == Cancel::Unchanged {
            return Ok(Replayed::replay(view(row)?));
        }
        let now = now();
        let update = JobUpdate {
            state: JobState::Cancelled,
            attempt: row.attempt,
            interruptions: row.interruptions,
            run_at: row.run_at,
            finished_at: Some(now),
            last_error: None,
            now,
        };
        tx.update_job(human.org_id, id, &update).await?;
        audit(
            &mut *tx,
            human.org_id,
            AuditActor::human(human),
            "job.cancelled",
            ("job", id),
            serde_json::json!({ "kind": row.kind, "from": row.state.as_str() }),
        )
        .await?;
        let row = tx.job(human.org_id, id).await?.ok_or(AppError::NotFound)?;
        tx.commit().await?;
        Ok(Replayed::fresh(view(row)?))
    }
}

/// A job a worker holds: what its handler needs, and the lease its outcome must still hold.
#[derive(Clone, Debug)]
pub struct ClaimedJob {
    pub id: Uuid,
    pub org_id: Uuid,
    pub kind: String,
    /// The canonical JSON object it was enqueued with.
    pub args: String,
    pub submission_id: Option<String>,
    /// The counted attempt this execution is (1-based).
    pub attempt: i32,
    pub max_attempts: i32,
    pub interruptions: i32,
    /// Every start so far, this one included.
    pub executions: i32,
    pub lease_token: Uuid,
    pub lease_expires_at: DateTime<Utc>,
    pub worker: String,
}

impl ClaimedJob {
    fn fence(&self) -> Fence {
        Fence {
            org_id: self.org_id,
            id: self.id,
            lease_token: self.lease_token,
            expired_before: None,
        }
    }

    fn progress(&self) -> Progress {
        Progress {
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            interruptions: self.interruptions,
        }
    }
}

/// Why an execution did not complete, as its handler (or the runtime) says.
#[derive(Clone, Debug)]
pub struct JobFailure {
    pub kind: FailureKind,
    /// A short snake_case code (`timeout`, `http_503`, …).
    pub code: String,
    /// A sentence for operators; never a payload or a secret.
    pub message: String,
}

/// How long finished jobs are kept before they are pruned.
#[derive(Clone, Copy, Debug)]
pub struct Retention {
    pub completed: Duration,
    pub discarded: Duration,
    pub cancelled: Duration,
}

impl Default for Retention {
    fn default() -> Self {
        Retention {
            completed: Duration::from_secs(24 * 3600),
            discarded: Duration::from_secs(7 * 24 * 3600),
            cancelled: Duration::from_secs(7 * 24 * 3600),
        }
    }
}

/// An execution ended by an expired lease, as the rescue settled it.
#[derive(Clone, Debug)]
pub struct Rescued {
    pub id: Uuid,
    pub kind: String,
    pub next: Next,
}

/// What the gauges show.
#[derive(Clone, Debug)]
pub struct JobStats {
    /// Jobs by kind and state, every organisation.
    pub counts: Vec<JobCount>,
    /// How long the oldest due job has waited for a worker.
    pub oldest_due_age: Option<Duration>,
}

/// Applies a completion inside the caller's transaction (a handler that finishes its work in
/// one transaction completes its job in the same one); false when the lease no longer holds,
/// and then the caller must roll back.
pub async fn complete_in(tx: &mut dyn Tx, job: &ClaimedJob) -> AppResult<bool> {
    let now = now();
    let update = JobUpdate {
        state: JobState::Completed,
        attempt: job.attempt,
        interruptions: job.interruptions,
        run_at: now,
        finished_at: Some(now),
        last_error: None,
        now,
    };
    Ok(tx.settle_job(job.fence(), &update).await?)
}

impl App {
    /// Claims the next due job of one of `kinds` under a fresh lease of `lease`; the claim has
    /// committed when this returns.
    pub async fn claim_job(
        &self,
        kinds: &[&str],
        lease: Duration,
        worker: &str,
    ) -> AppResult<Option<ClaimedJob>> {
        let now = now();
        let claim = Claim {
            now,
            lease_token: Uuid::new_v4(),
            lease_expires_at: rules::due_after(now, lease),
            worker,
            kinds,
        };
        let Some(row) = self.store.claim_job(&claim).await? else {
            return Ok(None);
        };
        let (Some(lease_token), Some(lease_expires_at)) = (row.lease_token, row.lease_expires_at)
        else {
            return Err(AppError::Internal(format!(
                "claimed job {} has no lease",
                row.id
            )));
        };
        Ok(Some(ClaimedJob {
            id: row.id,
            org_id: row.org_id,
            kind: row.kind,
            args: row.args,
            submission_id: row.submission_id,
            attempt: row.attempt,
            max_attempts: row.max_attempts,
            interruptions: row.interruptions,
            executions: row.executions,
            lease_token,
            lease_expires_at,
            worker: worker.to_owned(),
        }))
    }

    /// Extends the lease by `lease` from now; false when it was lost (the job was rescued
    /// after it expired): the worker must stop and report nothing.
    pub async fn heartbeat(&self, job: &ClaimedJob, lease: Duration) -> AppResult<bool> {
        let now = now();
        let mut tx = self.store.begin().await?;
        let held = tx
            .extend_lease(job.fence(), rules::due_after(now, lease), now)
            .await?;
        tx.commit().await?;
        Ok(held)
    }

    /// Records a completion; false (nothing written) for a stale worker's late result.
    pub async fn complete_job(&self, job: &ClaimedJob) -> AppResult<bool> {
        let mut tx = self.store.begin().await?;
        let done = complete_in(&mut *tx, job).await?;
        tx.commit().await?;
        Ok(done)
    }

    /// Records a failure: a retry after the backoff (capped at `cap`, jittered) while attempts
    /// remain, else `discarded`. `None` (nothing written) for a stale worker's late result.
    pub async fn fail_job(
        &self,
        job: &ClaimedJob,
        failure: &JobFailure,
        cap: Duration,
    ) -> AppResult<Option<Next>> {
        let now = now();
        let next = rules::after_failure(
            job.progress(),
            failure.kind,
            &failure.code,
            now,
            cap,
            random_u64(),
        );
        let update = settlement(&next, &rules::bounded_message(&failure.message), now);
        let mut tx = self.store.begin().await?;
        let applied = tx.settle_job(job.fence(), &update).await?;
        tx.commit().await?;
        Ok(applied.then_some(next))
    }

    /// Settles up to `limit` executions whose lease expired before now: each becomes
    /// `retryable` at the same attempt after its backoff (`cap_of` its kind), or `discarded`
    /// once it was interrupted `max_interruptions` times. A lease extended meanwhile, or an
    /// execution another process settled first, is left alone.
    pub async fn rescue_expired_leases(
        &self,
        max_interruptions: i32,
        cap_of: &(dyn Fn(&str) -> Duration + Sync),
        limit: i64,
    ) -> AppResult<Vec<Rescued>> {
        let now = now();
        let expired = self
            .store
            .reader()
            .await?
            .expired_leases(now, limit)
            .await?;
        let mut rescued = Vec::new();
        for row in expired {
            let Some(lease_token) = row.lease_token else {
                continue;
            };
            let progress = Progress {
                attempt: row.attempt,
                max_attempts: row.max_attempts,
                interruptions: row.interruptions,
            };
            let next = rules::after_interruption(
                progress,
                max_interruptions,
                now,
                cap_of(&row.kind),
                random_u64(),
            );
            let message = format!(
                "the lease of {} expired before it reported an outcome",
                row.worker.as_deref().unwrap_or("its worker")
            );
            let fence = Fence {
                org_id: row.org_id,
                id: row.id,
                lease_token,
                expired_before: Some(now),
            };
            let mut tx = self.store.begin().await?;
            let applied = tx
                .settle_job(fence, &settlement(&next, &message, now))
                .await?;
            tx.commit().await?;
            if applied {
                rescued.push(Rescued {
                    id: row.id,
                    kind: row.kind,
                    next,
                });
            }
        }
        Ok(rescued)
    }

    /// Deletes finished jobs older than their retention, at most `batch` per state; their
    /// submission records stay, so a submission id keeps naming its job.
    pub async fn prune_jobs(&self, retention: &Retention, batch: i64) -> AppResult<u64> {
        let now = now();
        let mut pruned = 0;
        for (state, keep) in [
            (JobState::Completed, retention.completed),
            (JobState::Discarded, retention.discarded),
            (JobState::Cancelled, retention.cancelled),
        ] {
            let before = chrono::Duration::from_std(keep)
                .ok()
                .and_then(|keep| now.checked_sub_signed(keep))
                .unwrap_or(DateTime::<Utc>::MIN_UTC);
            let mut tx = self.store.begin().await?;
            pruned += tx.prune_jobs(state, before, batch).await?;
            tx.commit().await?;
        }
        Ok(pruned)
    }

    /// Jobs by kind and state and the wait of the oldest due job, for the gauges.
    pub async fn job_stats(&self) -> AppResult<JobStats> {
        let now = now();
        let mut conn = self.store.reader().await?;
        let counts = conn.job_counts().await?;
        let oldest_due_age = conn
            .oldest_due(now)
            .await?
            .and_then(|due| (now - due).to_std().ok());
        Ok(JobStats {
            counts,
            oldest_due_age,
        })
    }

    /// Waits until a committed enqueue may have made work available, or `timeout`.
    pub async fn wait_for_jobs(&self, timeout: Duration) {
        self.store.wait_for_jobs(timeout).await;
    }

    /// Records one execution of a built-in test job kind (`jobs::testing`).
    pub async fn record_test_execution(
        &self,
        job: &ClaimedJob,
        outcome: &str,
        started_at: DateTime<Utc>,
    ) -> AppResult<()> {
        let mut tx = self.store.begin().await?;
        tx.insert_test_execution(&TestExecutionRow {
            id: Uuid::now_v7(),
            org_id: job.org_id,
            job_id: job.id,
            lease_token: job.lease_token,
            worker: job.worker.clone(),
            attempt: job.attempt,
            outcome: outcome.to_owned(),
            started_at,
            finished_at: now(),
        })
        .await?;
        tx.commit().await?;
        Ok(())
    }
}

/// What the domain's decision writes.
fn settlement(next: &Next, message: &str, now: DateTime<Utc>) -> JobUpdate {
    JobUpdate {
        state: next.state,
        attempt: next.attempt,
        interruptions: next.interruptions,
        run_at: next.run_at,
        finished_at: next.discarded().then_some(now),
        last_error: Some((next.error_code.clone(), message.to_owned())),
        now,
    }
}

fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    t.duration_trunc(chrono::Duration::microseconds(1))
        .unwrap_or(t)
}

/// 64 bits from the operating system's CSPRNG (the retry jitter).
fn random_u64() -> u64 {
    use rand_core::{OsRng, RngCore};
    OsRng.next_u64()
}
