//! `JobRead` and `JobWrite` for every backend's unit (the claim is backend-only). An inserted
//! job wakes idle workers once it commits ([`Backend::wake_workers`]); outcome statements are
//! fenced by (org, id, lease token, `running`), so a stale worker's late result matches no row.

use super::{Backend, Query, for_update, query, query_as, query_scalar};
use crate::error::StoreResult;
use crate::jobs::*;
use crate::query::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::job::JobState;
use uuid::Uuid;

#[async_trait]
impl<U: Backend> JobRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn job(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<JobRow>> {
        query_as("select * from jobs where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn jobs(
        &mut self,
        org_id: Uuid,
        filter: &JobFilter,
        page: Page,
    ) -> StoreResult<Vec<JobRow>> {
        query_as(
            "select * from jobs
             where org_id = $1
               and ($2 is null or state = $2)
               and ($3 is null or kind = $3)
               and ($4 is null or id < $4)
             order by id desc limit $5",
        )
        .bind(org_id)
        .bind(filter.state.map(JobState::as_str))
        .bind(&filter.kind)
        .bind(page.after)
        .bind(page.limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn submission(
        &mut self,
        org_id: Uuid,
        job_id: Uuid,
    ) -> StoreResult<Option<SubmissionRow>> {
        query_as("select * from job_submissions where org_id = $1 and job_id = $2")
            .bind(org_id)
            .bind(job_id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn expired_leases(&mut self, limit: i64) -> StoreResult<Vec<JobRow>> {
        query_as(format!(
            "select * from jobs where state = 'running' and lease_expires_at <= {}
             order by lease_expires_at limit $1",
            U::NOW
        ))
        .bind(limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn job_counts(&mut self) -> StoreResult<Vec<JobCount>> {
        query_as("select kind, state, count(*) as count from jobs group by kind, state")
            .fetch_all(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn oldest_due(&mut self, now: DateTime<Utc>) -> StoreResult<Option<DateTime<Utc>>> {
        query_scalar(
            "select min(run_at) from jobs
             where state in ('available', 'scheduled', 'retryable') and run_at <= $1",
        )
        .bind(now)
        .fetch_one(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn finished_jobs_of_kind(
        &mut self,
        kind: &str,
        state: JobState,
        before: DateTime<Utc>,
        after: Option<(Uuid, Uuid)>,
        limit: i64,
    ) -> StoreResult<Vec<JobRow>> {
        query_as(
            "select * from jobs
             where kind = $1 and state = $2 and finished_at < $3
               and ($4 is null or (org_id, id) > ($4, $5))
             order by org_id, id limit $6",
        )
        .bind(kind)
        .bind(state.as_str())
        .bind(before)
        .bind(after.map(|(org_id, _)| org_id))
        .bind(after.map(|(_, id)| id))
        .bind(limit)
        .fetch_all(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn test_executions(
        &mut self,
        org_id: Uuid,
        job_id: Uuid,
    ) -> StoreResult<Vec<TestExecutionRow>> {
        query_as(
            "select * from test_job_executions where org_id = $1 and job_id = $2
             order by started_at, id",
        )
        .bind(org_id)
        .bind(job_id)
        .fetch_all(self)
        .await
    }
}

#[async_trait]
impl<U: Backend> JobWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_submission(&mut self, s: &SubmissionRow) -> StoreResult<bool> {
        let done = query(
            "insert into job_submissions (job_id, org_id, kind, submission_id,
                 definition_hash, created_at)
             values ($1, $2, $3, $4, $5, $6)
             on conflict do nothing",
        )
        .bind(s.job_id)
        .bind(s.org_id)
        .bind(&s.kind)
        .bind(&s.submission_id)
        .bind(&s.definition_hash)
        .bind(s.created_at)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_job(&mut self, j: &JobRow) -> StoreResult<()> {
        query(
            "insert into jobs (id, org_id, kind, args, submission_id, definition_hash,
                 state, attempt, max_attempts, executions, interruptions, run_at,
                 lease_token, lease_expires_at, worker, last_error_code,
                 last_error_message, created_at, updated_at, started_at, finished_at, lane)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15,
                 $16, $17, $18, $19, $20, $21, $22)",
        )
        .bind(j.id)
        .bind(j.org_id)
        .bind(&j.kind)
        .bind(&j.args)
        .bind(&j.submission_id)
        .bind(&j.definition_hash)
        .bind(j.state.as_str())
        .bind(j.attempt)
        .bind(j.max_attempts)
        .bind(j.executions)
        .bind(j.interruptions)
        .bind(j.run_at)
        .bind(j.lease_token)
        .bind(j.lease_expires_at)
        .bind(&j.worker)
        .bind(&j.last_error_code)
        .bind(&j.last_error_message)
        .bind(j.created_at)
        .bind(j.updated_at)
        .bind(j.started_at)
        .bind(j.finished_at)
        .bind(&j.lane)
        .execute(self)
        .await?;
        self.wake_workers().await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_job(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<JobRow>> {
        query_as(for_update::<U>(
            "select * from jobs where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn update_job(&mut self, org_id: Uuid, id: Uuid, u: &JobUpdate) -> StoreResult<()> {
        query(
            "update jobs set state = $3, attempt = $4, interruptions = $5, run_at = $6,
                 finished_at = $7, last_error_code = coalesce($8, last_error_code),
                 last_error_message = coalesce($9, last_error_message), updated_at = $10
             where org_id = $1 and id = $2",
        )
        .bind(org_id)
        .bind(id)
        .bind_with(|q| bind_update(q, u))
        .execute(self)
        .await?;
        if u.state.is_claimable() {
            self.wake_workers().await?;
        }
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn extend_lease(
        &mut self,
        f: Fence,
        lease: std::time::Duration,
        now: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = query(format!(
            "update jobs set lease_expires_at = {}, updated_at = $5
             where org_id = $1 and id = $2 and lease_token = $3 and state = 'running'",
            U::now_plus_ms("$4")
        ))
        .bind(f.org_id)
        .bind(f.id)
        .bind(f.lease_token)
        .bind(super::millis(lease))
        .bind(now)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn settle_job(&mut self, f: Fence, u: &JobUpdate) -> StoreResult<bool> {
        let done = query(format!(
            "update jobs set state = $5, attempt = $6, interruptions = $7, run_at = $8,
                 finished_at = $9, last_error_code = coalesce($10, last_error_code),
                 last_error_message = coalesce($11, last_error_message),
                 updated_at = $12, lease_token = null, lease_expires_at = null
             where org_id = $1 and id = $2 and lease_token = $3 and state = 'running'
               and (not $4 or lease_expires_at <= {})",
            U::NOW
        ))
        .bind(f.org_id)
        .bind(f.id)
        .bind(f.lease_token)
        .bind(f.expired)
        .bind_with(|q| bind_update(q, u))
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_jobs(
        &mut self,
        state: JobState,
        before: DateTime<Utc>,
        keep: &[&str],
        limit: i64,
    ) -> StoreResult<u64> {
        // The outer conditions repeat the inner ones: PostgreSQL re-checks them on
        // a row an operator retried meanwhile, which then stays.
        let keep = serde_json::to_string(keep)
            .map_err(|e| crate::error::StoreError::Other(sqlx::Error::Encode(Box::new(e))))?;
        let done = query(format!(
            "delete from jobs where state = $1 and finished_at < $2 and (org_id, id) in
                 (select org_id, id from jobs where state = $1 and finished_at < $2
                    and kind not in ({kept})
                  order by finished_at limit $3)",
            kept = U::json_texts("$4")
        ))
        .bind(state.as_str())
        .bind(before)
        .bind(limit)
        .bind(&keep)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn prune_job(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        state: JobState,
        before: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = query(
            "delete from jobs
             where org_id = $1 and id = $2 and state = $3 and finished_at < $4",
        )
        .bind(org_id)
        .bind(id)
        .bind(state.as_str())
        .bind(before)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_test_execution(&mut self, e: &TestExecutionRow) -> StoreResult<()> {
        query(
            "insert into test_job_executions (id, org_id, job_id, lease_token, worker,
                 attempt, outcome, started_at, finished_at)
             values ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(e.id)
        .bind(e.org_id)
        .bind(e.job_id)
        .bind(e.lease_token)
        .bind(&e.worker)
        .bind(e.attempt)
        .bind(&e.outcome)
        .bind(e.started_at)
        .bind(e.finished_at)
        .execute(self)
        .await?;
        Ok(())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn cancel_waiting_jobs(
        &mut self,
        org_id: Uuid,
        kind: &str,
        prefix: &str,
        now: DateTime<Utc>,
    ) -> StoreResult<u64> {
        // A prefix compared with substr, not LIKE: no character of it is a wildcard.
        let done = query(
            "update jobs set state = 'cancelled', finished_at = $4, updated_at = $4
             where org_id = $1 and kind = $2
               and state in ('available', 'scheduled', 'retryable')
               and substr(submission_id, 1, length($3)) = $3",
        )
        .bind(org_id)
        .bind(kind)
        .bind(prefix)
        .bind(now)
        .execute(self)
        .await?;
        Ok(done.rows_affected())
    }
}

/// Binds a `JobUpdate` as the next eight arguments (the last error kept when null).
fn bind_update<'a>(q: Query<'a>, u: &'a JobUpdate) -> Query<'a> {
    let (code, message) = u
        .last_error
        .as_ref()
        .map(|(code, message)| (code.as_str(), message.as_str()))
        .unzip();
    q.bind(u.state.as_str())
        .bind(u.attempt)
        .bind(u.interruptions)
        .bind(u.run_at)
        .bind(u.finished_at)
        .bind(code)
        .bind(message)
        .bind(u.now)
}
