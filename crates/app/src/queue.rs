//! The job queue's core (docs/contract/effects.md §1): enqueue, submissions by key, job view.

use crate::app::App;
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::idempotency::{self, Keyed};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tauros_domain::error::FieldError;
use tauros_domain::fingerprint::key_is_valid;
use tauros_domain::job::{self as rules, Definition, JobState, Progress};
use tauros_store::{Fence, JobRow, Lane, Reader, SubmissionRow, Tx};
use uuid::Uuid;

/// A job to enqueue.
#[derive(Clone, Debug)]
pub struct NewJob {
    pub org_id: Uuid,
    /// A versioned kind (`invoice.issue.v1`).
    pub kind: String,
    /// A JSON object, at most 64 KiB.
    pub args: Value,
    /// The caller's stable id: the same definition again answers its job, another is refused.
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
    /// The submission id already named this definition: nothing written (the job may be gone).
    pub replayed: bool,
}

/// Enqueues a job inside the caller's transaction, so it commits or rolls back with its change;
/// a submission id's unique keys (not a read first) decide whether the job is new.
pub async fn enqueue(tx: &mut dyn Tx, job: NewJob) -> AppResult<Enqueued> {
    enqueue_in_lane(tx, job, None).await
}

/// [`enqueue`] into a lane, whose jobs run at most the pool's cap at once (an endpoint's).
pub(crate) async fn enqueue_in_lane(
    tx: &mut dyn Tx,
    job: NewJob,
    lane: Option<String>,
) -> AppResult<Enqueued> {
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
                let replayed = idempotency::winner(&Submitted(submission), tx).await?;
                return Ok(Enqueued {
                    id: replayed.value,
                    replayed: replayed.replayed,
                });
            }
            failpoint!(job.org_id, JobSubmissionInserted);
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
        lane,
    };
    tx.insert_job(&row).await?;
    failpoint!(row.org_id, JobInserted);
    Ok(Enqueued {
        id,
        replayed: false,
    })
}

/// A submission whose (org, kind, submission id) was taken: the same definition replays it.
struct Submitted(SubmissionRow);

#[async_trait]
impl Keyed for Submitted {
    type Stored = SubmissionRow;
    type Answer = Uuid;

    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<SubmissionRow>> {
        Ok(conn.submission(self.0.org_id, self.0.job_id).await?)
    }

    fn stored_fingerprint<'s>(&self, existing: &'s SubmissionRow) -> Option<&'s str> {
        Some(&existing.definition_hash)
    }

    async fn fingerprint(
        &self,
        _: &mut dyn Reader,
        _: &SubmissionRow,
    ) -> AppResult<Option<String>> {
        Ok(Some(self.0.definition_hash.clone()))
    }

    fn conflict(&self, _: &SubmissionRow) -> AppError {
        let s = &self.0;
        AppError::Conflict {
            code: "submission_conflict",
            detail: format!(
                "submission id {:?} of kind {} already names job {} with another definition; \
                 nothing was enqueued. Enqueue the original definition, or use a new submission \
                 id for a new job",
                s.submission_id, s.kind, s.job_id
            ),
        }
    }

    async fn replay(&self, _: &mut dyn Reader, existing: SubmissionRow) -> AppResult<Uuid> {
        Ok(existing.job_id)
    }

    fn vanished(&self) -> AppError {
        AppError::Internal(format!(
            "submission record of job {} is missing",
            self.0.job_id
        ))
    }
}

impl App {
    /// Enqueues one job in a transaction of its own ([`enqueue`] joins the caller's).
    pub async fn submit_job(&self, job: NewJob) -> AppResult<Enqueued> {
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
            let enqueued = enqueue(&mut *tx, job).await?;
            Ok(enqueued)
        }
        .await;
        crate::app::finish(tx, answer).await
    }
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

/// The job as operators see it; its args are the stored canonical JSON.
pub(crate) fn view(row: JobRow) -> AppResult<JobView> {
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

/// A caller's time at the precision both backends store (microseconds).
fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    use chrono::DurationRound;
    t.duration_trunc(chrono::Duration::microseconds(1))
        .unwrap_or(t)
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
    pub(crate) fn fence(&self) -> Fence {
        Fence {
            org_id: self.org_id,
            id: self.id,
            lease_token: self.lease_token,
            expired: false,
        }
    }

    pub(crate) fn progress(&self) -> Progress {
        Progress {
            attempt: self.attempt,
            max_attempts: self.max_attempts,
            interruptions: self.interruptions,
        }
    }
}
