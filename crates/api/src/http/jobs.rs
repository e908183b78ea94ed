//! `/v1/jobs`: what approvers see of the job queue, and the two things they may do with a job
//! (retry, cancel). There is no public enqueue: jobs come from the commands that need them.

use super::extract::{Auth, IdPath, ListParams, QueryParams};
use super::problem::{ApiError, Problem};
use crate::http::schema::JobStateSchema;
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_app::{JobQuery, JobView};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(list_jobs))
        .routes(routes!(get_job))
        .routes(routes!(retry_job))
        .routes(routes!(cancel_job))
}

/// A job's last failure.
#[derive(Serialize, ToSchema)]
pub struct JobErrorResponse {
    /// Short snake_case code: `timeout`, `interrupted` (its worker's lease expired),
    /// `interrupted_limit`, `panic`, or the handler's own.
    pub code: String,
    /// A sentence for operators (at most 500 characters).
    pub message: String,
}

/// One job of the organisation's queue.
#[derive(Serialize, ToSchema)]
pub struct JobResponse {
    /// The job's id; derived from its kind and submission id when it has one.
    pub id: Uuid,
    /// Versioned kind, e.g. `invoice.issue.v1`.
    pub kind: String,
    #[schema(value_type = JobStateSchema)]
    pub state: String,
    /// The arguments it was enqueued with (a JSON object, at most 64 KiB).
    #[schema(value_type = Object)]
    pub args: serde_json::Value,
    /// The enqueuer's stable id for this job (an event id, an invoice id), if it gave one.
    pub submission_id: Option<String>,
    /// SHA-256 of the job's definition (kind, args, max_attempts, scheduled time).
    pub definition_hash: String,
    /// The counted attempt the current or next execution is (from 1).
    pub attempt: i32,
    /// Counted attempts before the job is discarded.
    pub max_attempts: i32,
    /// Every start of the job, including interrupted ones.
    pub executions: i32,
    /// Executions that ended because their worker's lease expired (they use no attempt).
    pub interruptions: i32,
    /// When it may run next: its scheduled time, or its retry time after a backoff.
    pub run_at: DateTime<Utc>,
    /// While running: when the worker's lease runs out unless it heartbeats.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// The worker (`host:pid/n`) that runs it, or ran it last.
    pub worker: Option<String>,
    /// The last failure, if any.
    pub last_error: Option<JobErrorResponse>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    /// When its last execution started.
    pub started_at: Option<DateTime<Utc>>,
    /// When it completed, was discarded or was cancelled.
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<JobView> for JobResponse {
    fn from(j: JobView) -> Self {
        JobResponse {
            id: j.id,
            kind: j.kind,
            state: j.state.as_str().to_owned(),
            args: j.args,
            submission_id: j.submission_id,
            definition_hash: j.definition_hash,
            attempt: j.attempt,
            max_attempts: j.max_attempts,
            executions: j.executions,
            interruptions: j.interruptions,
            run_at: j.run_at,
            lease_expires_at: j.lease_expires_at,
            worker: j.worker,
            last_error: j
                .last_error
                .map(|(code, message)| JobErrorResponse { code, message }),
            created_at: j.created_at,
            updated_at: j.updated_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
        }
    }
}

/// A page of jobs, by id descending.
#[derive(Serialize, ToSchema)]
pub struct JobList {
    /// The jobs.
    pub items: Vec<JobResponse>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// The organisation's jobs (approvers), by id descending. `?state=discarded` lists the jobs
/// that need a human.
#[utoipa::path(get, path = "/v1/jobs", tag = "jobs", security(("bearer" = [])),
    params(
        ("state" = Option<JobStateSchema>, Query, description = "Only jobs in this state"),
        ("kind" = Option<String>, Query, max_length = 100, pattern = r"^([a-z][a-z0-9_]*\.)+v[0-9]{1,6}$",
            description = "Only jobs of this kind, e.g. `invoice.issue.v1`"),
        crate::http::schema::Page,
    ),
    responses(
        (status = 200, description = "A page of jobs", body = JobList),
        (status = 403, description = "`forbidden`: only approvers see jobs", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_jobs(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
    query: QueryParams,
) -> Result<Json<JobList>, ApiError> {
    let filter = JobQuery {
        state: query.get("state").map(str::to_owned),
        kind: query.get("kind").map(str::to_owned),
    };
    let rows = state.app.list_jobs(&actor, filter, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |j| j.id);
    Ok(Json(JobList {
        items: items.into_iter().map(Into::into).collect(),
        next_cursor,
    }))
}

/// One job (approvers).
#[utoipa::path(get, path = "/v1/jobs/{id}", tag = "jobs", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job", body = JobResponse),
        (status = 403, description = "`forbidden`: only approvers see jobs", body = Problem, content_type = "application/problem+json"),
        (status = 404, description = "`not_found`: unknown, pruned, or another organisation's", body = Problem, content_type = "application/problem+json"),
    ))]
async fn get_job(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<JobResponse>, ApiError> {
    Ok(Json(state.app.get_job(&actor, id).await?.into()))
}

/// Run a job again now (approvers): a discarded or cancelled job starts over at attempt 1, a
/// retryable or scheduled one keeps its attempt. An available job is answered as it is.
#[utoipa::path(post, path = "/v1/jobs/{id}/retry", tag = "jobs", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job, available now (or already available)", body = JobResponse),
        (status = 403, description = "`forbidden`: only approvers act on jobs", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`job_running`: a worker holds it; `job_finished`: it completed and will not run again", body = Problem, content_type = "application/problem+json"),
    ))]
async fn retry_job(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<JobResponse>, ApiError> {
    Ok(Json(state.app.retry_job(&actor, id).await?.value.into()))
}

/// Stop a job that has not started (approvers): it will not run. A job already cancelled is
/// answered as it is. An issue job (`invoice.issue.v1`) whose claim is processing cannot be
/// cancelled: the peer may hold the invoice, and only the job can finish it (retry it).
#[utoipa::path(post, path = "/v1/jobs/{id}/cancel", tag = "jobs", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Job id")),
    responses(
        (status = 200, description = "The job, cancelled (or already cancelled)", body = JobResponse),
        (status = 403, description = "`forbidden`: only approvers act on jobs", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`job_running`: a worker holds it (its effect may be under way); `job_finished`: it already completed or was discarded; `issue_in_progress`: an issue job whose claim is processing (retry it instead)", body = Problem, content_type = "application/problem+json"),
    ))]
async fn cancel_job(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<JobResponse>, ApiError> {
    Ok(Json(state.app.cancel_job(&actor, id).await?.value.into()))
}
