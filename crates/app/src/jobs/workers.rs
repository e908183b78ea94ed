//! The workers' side of the queue: claim, heartbeat, settle fenced by the lease, rescue, prune.

use crate::app::App;
use crate::clock::now;

use crate::error::{AppError, AppResult};
use crate::queue::ClaimedJob;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tauros_domain::job::{self as rules, FailureKind, JobState, Next, Progress};
use tauros_store::{Claim, Fence, JobCount, JobUpdate, Lane, TestExecutionRow, Tx};
use uuid::Uuid;

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

/// Completes the job inside the caller's transaction; false when the lease is lost (roll back).
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

/// A worker pool as a claim sees it.
#[derive(Clone, Copy, Debug)]
pub struct Pool<'a> {
    /// Its name: organisations take turns per pool (`main`, `webhooks`).
    pub name: &'a str,
    /// The kinds it runs.
    pub kinds: &'a [&'a str],
    /// Running jobs per lane at most (a webhook endpoint's deliveries); `None`: uncapped.
    pub lane_limit: Option<i64>,
}

/// The pool of every kind but webhook deliveries.
pub const MAIN_POOL: &str = "main";

impl App {
    /// Claims a due job of `kinds` for the main pool, leased from the database's now; committed.
    pub async fn claim_job(
        &self,
        kinds: &[&str],
        lease: Duration,
        worker: &str,
    ) -> AppResult<Option<ClaimedJob>> {
        let pool = Pool {
            name: MAIN_POOL,
            kinds,
            lane_limit: None,
        };
        self.claim_job_for(pool, lease, worker).await
    }

    /// Claims the next due job for `pool`, the organisation with the oldest turn first
    /// (docs/JOBS.md, "Fairness"); a job whose lane is at the cap waits (no attempt used).
    pub async fn claim_job_for(
        &self,
        pool: Pool<'_>,
        lease: Duration,
        worker: &str,
    ) -> AppResult<Option<ClaimedJob>> {
        let now = now();
        let claim = Claim {
            now,
            lease_token: Uuid::new_v4(),
            lease,
            worker,
            kinds: pool.kinds,
            pool: pool.name,
            lane_limit: pool.lane_limit,
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

    /// Extends the lease from the database's now; false when lost: stop and report nothing.
    pub async fn heartbeat(&self, job: &ClaimedJob, lease: Duration) -> AppResult<bool> {
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
            let held = tx.extend_lease(job.fence(), lease, now()).await?;
            Ok(held)
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Records a completion; false (nothing written) for a stale worker's late result.
    pub async fn complete_job(&self, job: &ClaimedJob) -> AppResult<bool> {
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
            let done = complete_in(&mut *tx, job).await?;
            Ok(done)
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Records a failure (retry with capped jittered backoff, or `discarded`); `None` when stale.
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
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
            let applied = tx.settle_job(job.fence(), &update).await?;
            Ok(applied.then_some(next))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Settles up to `limit` executions whose lease expired by the database's clock: `retryable`
    /// at the same attempt, or `discarded` after `max_interruptions`; extended ones are left alone.
    pub async fn rescue_expired_leases(
        &self,
        max_interruptions: i32,
        cap_of: &(dyn Fn(&str) -> Duration + Sync),
        limit: i64,
    ) -> AppResult<Vec<Rescued>> {
        let now = now();
        let expired = self
            .store
            .reader(Lane::Unattributed)
            .await?
            .expired_leases(limit)
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
                expired: true,
            };
            let mut tx = self.store.begin(Lane::Org(row.org_id)).await?;
            let answer = tx
                .settle_job(fence, &settlement(&next, &message, now))
                .await;
            if crate::app::finish(tx, answer.map_err(Into::into)).await? {
                rescued.push(Rescued {
                    id: row.id,
                    kind: row.kind,
                    next,
                });
            }
        }
        Ok(rescued)
    }

    /// Deletes finished jobs past retention, `batch` per state; submission records stay, and a job
    /// whose business work is unfinished (see `held`) is kept whatever its age: it is the way out.
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
            let mut tx = self.store.begin(Lane::Unattributed).await?;
            let answer = tx
                .prune_jobs(state, before, super::held::HOLDING_KINDS, batch)
                .await;
            pruned += crate::app::finish(tx, answer.map_err(Into::into)).await?;
            pruned += self.prune_holding(state, before, batch).await?;
        }
        Ok(pruned)
    }

    /// Prunes the holding kinds' finished jobs in `state` one by one, walking them by primary key.
    async fn prune_holding(
        &self,
        state: JobState,
        before: DateTime<Utc>,
        batch: i64,
    ) -> AppResult<u64> {
        let mut pruned = 0;
        for kind in super::held::HOLDING_KINDS {
            let mut after = None;
            loop {
                let page = self
                    .store
                    .reader(Lane::Unattributed)
                    .await?
                    .finished_jobs_of_kind(kind, state, before, after, batch)
                    .await?;
                let Some(last) = page.last() else { break };
                after = Some((last.org_id, last.id));
                let full = page.len() as i64 == batch;
                for row in page {
                    let mut conn = self.store.reader(Lane::Unattributed).await?;
                    if super::held::work_unfinished(&mut *conn, &row).await? {
                        continue;
                    }
                    drop(conn);
                    let mut tx = self.store.begin(Lane::Unattributed).await?;
                    let answer = tx.prune_job(row.org_id, row.id, state, before).await;
                    if crate::app::finish(tx, answer.map_err(Into::into)).await? {
                        pruned += 1;
                    }
                    if pruned >= batch as u64 {
                        return Ok(pruned);
                    }
                }
                if !full {
                    break;
                }
            }
        }
        Ok(pruned)
    }

    /// Jobs by kind and state and the wait of the oldest due job, for the gauges.
    pub async fn job_stats(&self) -> AppResult<JobStats> {
        let now = now();
        let mut conn = self.store.reader(Lane::Unattributed).await?;
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
        let mut tx = self.store.begin(Lane::Org(job.org_id)).await?;
        let answer = async {
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
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
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

/// 64 bits from the operating system's CSPRNG (the retry jitter).
fn random_u64() -> u64 {
    use rand_core::{OsRng, RngCore};
    OsRng.next_u64()
}
