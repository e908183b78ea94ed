//! What approvers see of the organisation's queue and do with a job.

use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::idempotency::Replayed;
use crate::lists::PageRequest;
use crate::queue::{JobView, view};
use tauros_domain::error::{Coded, FieldError};
use tauros_domain::job::{self as rules, Cancel, JobMoveError, JobState, Retry};
use tauros_store::{JobFilter, JobUpdate};
use uuid::Uuid;

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
    /// The organisation's jobs by id, descending (approvers).
    pub async fn list_jobs(
        &self,
        actor: &Actor,
        query: JobQuery,
        page: PageRequest,
    ) -> AppResult<Vec<JobView>> {
        let human = actor.human()?.approver()?;
        let mut errors = Vec::new();
        let state = crate::lists::list_filter(
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
            .reader(actor.lane())
            .await?
            .jobs(human.org_id, &filter, page.into())
            .await?;
        rows.into_iter().map(view).collect()
    }

    /// One job of the organisation (approvers).
    pub async fn get_job(&self, actor: &Actor, id: Uuid) -> AppResult<JobView> {
        let human = actor.human()?.approver()?;
        let row = self
            .store
            .reader(actor.lane())
            .await?
            .job(human.org_id, id)
            .await?;
        view(row.ok_or(AppError::NotFound)?)
    }

    /// Makes a job available now (approvers); a discarded or cancelled one starts at attempt 1.
    pub async fn retry_job(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<JobView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
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
            Ok(Replayed::fresh(view(row)?))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Stops a job that has not started (approvers); not a running or finished one, nor an issue
    /// job whose claim is processing (409 `issue_in_progress`).
    pub async fn cancel_job(&self, actor: &Actor, id: Uuid) -> AppResult<Replayed<JobView>> {
        let human = actor.human()?.approver()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let row = tx
                .lock_job(human.org_id, id)
                .await?
                .ok_or(AppError::NotFound)?;
            if rules::cancel(row.state).map_err(move_error)? == Cancel::Unchanged {
                return Ok(Replayed::replay(view(row)?));
            }
            super::held::guard_cancel(&mut *tx, &row).await?;
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
            Ok(Replayed::fresh(view(row)?))
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}
