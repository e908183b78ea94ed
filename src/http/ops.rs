//! Operations: liveness, readiness and Prometheus metrics.

use super::AppState;
use super::problem::{ApiError, Problem};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(healthz))
        .routes(routes!(readyz))
}

/// `/metrics`, on the main router or on its own listener.
pub fn metrics_router<S: Clone + Send + Sync + 'static>() -> Router<S> {
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

async fn metrics() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::telemetry::metrics_handle().render(),
    )
}
