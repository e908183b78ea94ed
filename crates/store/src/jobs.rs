//! The port for the job queue. Every statement about one job names its organisation; only the
//! queue's upkeep looks across them, and the claim compares them by one figure (`job_turns`).
//! Claims are backend-only: see [`super::Store::claim_job`].

use crate::error::StoreResult;
use crate::query::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::job::JobState;
use uuid::Uuid;

/// One job.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct JobRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub kind: String,
    /// Canonical JSON object.
    pub args: String,
    pub submission_id: Option<String>,
    pub definition_hash: String,
    #[sqlx(try_from = "crate::sql::Stored<JobState>")]
    pub state: JobState,
    pub attempt: i32,
    pub max_attempts: i32,
    pub executions: i32,
    pub interruptions: i32,
    pub run_at: DateTime<Utc>,
    pub lease_token: Option<Uuid>,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub worker: Option<String>,
    pub last_error_code: Option<String>,
    pub last_error_message: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Jobs sharing a lane run at most [`Claim::lane_limit`] at once; `None`: no lane.
    pub lane: Option<String>,
}

/// The record of a submission id, kept after its job is pruned.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct SubmissionRow {
    /// The job the submission id derives.
    pub job_id: Uuid,
    pub org_id: Uuid,
    pub kind: String,
    pub submission_id: String,
    pub definition_hash: String,
    pub created_at: DateTime<Utc>,
}

/// Which jobs a list returns.
#[derive(Clone, Debug, Default)]
pub struct JobFilter {
    pub state: Option<JobState>,
    pub kind: Option<String>,
}

/// What a claim asks for.
#[derive(Clone, Debug)]
pub struct Claim<'a> {
    /// Claim only jobs due by now (the app's clock, as `run_at` is); also `started_at`.
    pub now: DateTime<Utc>,
    /// The new lease's token; its deadline comes from the database's now (no clock skew).
    pub lease_token: Uuid,
    pub lease: std::time::Duration,
    /// Who claims (`host:pid/worker-n`).
    pub worker: &'a str,
    /// Only these kinds (the ones this process has handlers for, in this pool).
    pub kinds: &'a [&'a str],
    /// The claiming pool (`main`, `webhooks`): organisations take turns per pool.
    pub pool: &'a str,
    /// Skip a job whose lane already runs this many (left unchanged); `None`: uncapped.
    pub lane_limit: Option<i64>,
}

/// A job's state after an execution ended or an operator moved it, as the domain decided it.
#[derive(Clone, Debug)]
pub struct JobUpdate {
    pub state: JobState,
    pub attempt: i32,
    pub interruptions: i32,
    pub run_at: DateTime<Utc>,
    /// Set when the job ends (completed, discarded, cancelled); `None` clears it.
    pub finished_at: Option<DateTime<Utc>>,
    /// `None` keeps the last error as it is.
    pub last_error: Option<(String, String)>,
    pub now: DateTime<Utc>,
}

/// The lease an outcome must still hold: the execution's token on a running job; `expired` also
/// needs the lease run out by the database's clock (a rescue must not race a heartbeat).
#[derive(Clone, Copy, Debug)]
pub struct Fence {
    pub org_id: Uuid,
    pub id: Uuid,
    pub lease_token: Uuid,
    pub expired: bool,
}

/// How many jobs of one kind are in one state.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct JobCount {
    pub kind: String,
    #[sqlx(try_from = "crate::sql::Stored<JobState>")]
    pub state: JobState,
    pub count: i64,
}

/// One execution of a test job kind.
#[derive(Clone, Debug, sqlx::FromRow)]
pub struct TestExecutionRow {
    pub id: Uuid,
    pub org_id: Uuid,
    pub job_id: Uuid,
    pub lease_token: Uuid,
    pub worker: String,
    pub attempt: i32,
    pub outcome: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: DateTime<Utc>,
}

/// Reads of jobs.
#[async_trait]
pub trait JobRead: Send {
    async fn job(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<JobRow>>;
    /// The org's jobs by id, descending.
    async fn jobs(
        &mut self,
        org_id: Uuid,
        filter: &JobFilter,
        page: Page,
    ) -> StoreResult<Vec<JobRow>>;
    async fn submission(
        &mut self,
        org_id: Uuid,
        job_id: Uuid,
    ) -> StoreResult<Option<SubmissionRow>>;
    /// Running jobs whose lease ran out by the database's clock, oldest deadline first (every org).
    async fn expired_leases(&mut self, limit: i64) -> StoreResult<Vec<JobRow>>;
    /// Jobs by kind and state (every org; for the gauges).
    async fn job_counts(&mut self) -> StoreResult<Vec<JobCount>>;
    /// The oldest due time among claimable jobs due by `now` (every org).
    async fn oldest_due(&mut self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>>;
    /// Up to `limit` finished jobs of `kind` in `state` before `before`, by key after `after`.
    async fn finished_jobs_of_kind(
        &mut self,
        kind: &str,
        state: JobState,
        before: DateTime<Utc>,
        after: Option<(Uuid, Uuid)>,
        limit: i64,
    ) -> StoreResult<Vec<JobRow>>;
    /// Executions of one test job, by start time.
    async fn test_executions(
        &mut self,
        org_id: Uuid,
        job_id: Uuid,
    ) -> StoreResult<Vec<TestExecutionRow>>;
}

/// Writes and locking reads of jobs; only in a write unit of work.
#[async_trait]
pub trait JobWrite: JobRead {
    /// Records a submission unless its job id or (org, kind, submission id) exists; false if so.
    async fn insert_submission(&mut self, submission: &SubmissionRow) -> StoreResult<bool>;
    /// Inserts a job and wakes idle workers once the unit of work commits.
    async fn insert_job(&mut self, job: &JobRow) -> StoreResult<()>;
    /// Reads and locks the job row (`FOR UPDATE` on PostgreSQL), so a claim skips it.
    async fn lock_job(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<JobRow>>;
    /// An operator's move of a job that is not running (locked by [`JobWrite::lock_job`]).
    async fn update_job(&mut self, org_id: Uuid, id: Uuid, update: &JobUpdate) -> StoreResult<()>;
    /// Moves the lease deadline to `lease` after the database's now while the fence holds.
    async fn extend_lease(
        &mut self,
        fence: Fence,
        lease: std::time::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<bool>;
    /// Applies an execution's outcome while the fence holds; false (nothing written) if stale.
    async fn settle_job(&mut self, fence: Fence, update: &JobUpdate) -> StoreResult<bool>;
    /// Deletes up to `limit` finished jobs in `state` before `before`, except the `keep` kinds.
    async fn prune_jobs(
        &mut self,
        state: JobState,
        before: DateTime<Utc>,
        keep: &[&str],
        limit: i64,
    ) -> StoreResult<u64>;
    /// Deletes one job still in `state` and finished before `before`; false when it was not.
    async fn prune_job(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        state: JobState,
        before: DateTime<Utc>,
    ) -> StoreResult<bool>;
    async fn insert_test_execution(&mut self, execution: &TestExecutionRow) -> StoreResult<()>;
    /// Cancels the org's waiting jobs of `kind` whose submission id starts with `prefix`; how many.
    async fn cancel_waiting_jobs(
        &mut self,
        org_id: Uuid,
        kind: &str,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<u64>;
}
