//! Operations: liveness, readiness and Prometheus metrics.

use super::problem::{ApiError, Problem};
use crate::http::state::AppState;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::{Json, Router};
use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Mutex;
use tauros_app::JobStats;
use tauros_domain::job::JobState;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// `/metrics`, on the main router or on its own listener.
pub fn metrics_router() -> Router<AppState> {
    Router::new().route("/metrics", get(metrics))
}

/// Liveness or readiness.
#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok` or `ready`.
    pub status: &'static str,
    /// Readiness: the backend (`sqlite` or `postgres`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub database: Option<&'static str>,
    /// Readiness: `current` when every migration of this binary is applied.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub migrations: Option<&'static str>,
}

/// 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "Alive", body = Health)))]
async fn healthz() -> Json<Health> {
    Json(Health {
        status: "ok",
        database: None,
        migrations: None,
    })
}

/// 200 when the database answers and its migrations are current, else 503.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready", body = Health),
        (status = 503, description = "`unavailable`: database down or migrations behind", body = Problem, content_type = "application/problem+json"),
    ))]
async fn readyz(State(state): State<AppState>) -> Result<Json<Health>, ApiError> {
    let store = state.app.store();
    let unavailable = |why: &str| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!("not ready: {why}"),
        )
    };
    match store.readiness().await {
        Ok(true) => Ok(Json(Health {
            status: "ready",
            database: Some(store.backend()),
            migrations: Some("current"),
        })),
        Ok(false) => Err(unavailable(
            "migrations are not current; run `tauros migrate`",
        )),
        Err(e) => {
            tracing::warn!(error = %e, "readiness check failed");
            Err(unavailable("the database does not answer"))
        }
    }
}

/// Prometheus text. The job gauges are read from the database at each scrape, so every
/// process shows the same (whole-queue) figures; the job counters are this process's own.
async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    match state.app.job_stats().await {
        Ok(stats) => job_gauges(&stats),
        Err(e) => tracing::warn!(error = %e, "job gauges not refreshed"),
    }
    match state.app.claim_counts().await {
        Ok(counts) => claim_gauges(&counts),
        Err(e) => tracing::warn!(error = %e, "claim gauges not refreshed"),
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::metrics::handle().render(),
    )
}

/// `tauros_effect_claims{state}` and the age of the oldest processing claim (the reaper's
/// backlog: a growing age means a peer that has not answered for that long).
fn claim_gauges(counts: &tauros_app::ClaimCounts) {
    metrics::gauge!("tauros_effect_claims", "state" => "processing").set(counts.processing as f64);
    metrics::gauge!("tauros_effect_claims", "state" => "complete").set(counts.complete as f64);
    metrics::gauge!("tauros_effect_claims", "state" => "rejected").set(counts.rejected as f64);
    let age = counts.oldest_processing.map_or(0.0, |at| {
        (chrono::Utc::now() - at).num_milliseconds().max(0) as f64 / 1000.0
    });
    metrics::gauge!("tauros_effect_claims_oldest_processing_age_seconds").set(age);
}

/// `tauros_jobs{kind, state}` for every kind seen by this process (a state with no job left is
/// 0, not a stale value) and `tauros_jobs_oldest_available_age_seconds`.
fn job_gauges(stats: &JobStats) {
    static KINDS: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let mut kinds = KINDS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    kinds.extend(stats.counts.iter().map(|c| c.kind.clone()));
    for kind in kinds.iter() {
        for state in JobState::ALL {
            let count = stats
                .counts
                .iter()
                .find(|c| c.kind == *kind && c.state == state)
                .map_or(0, |c| c.count);
            metrics::gauge!("tauros_jobs", "kind" => kind.clone(), "state" => state.as_str())
                .set(count as f64);
        }
    }
    metrics::gauge!("tauros_jobs_oldest_available_age_seconds")
        .set(stats.oldest_due_age.map_or(0.0, |age| age.as_secs_f64()));
}
