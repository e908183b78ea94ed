//! The whole router: the REST routes (`http`), the OpenAPI document and its docs page, the
//! console's assets (`console`) and the MCP endpoint (`mcp`), behind every layer a request
//! passes through. The one place that knows all three surfaces.

use crate::http::serve::ConnectionLimits;
use crate::http::state::{AppState, BODY_LIMIT};
use crate::http::{body_timeout, headers, middleware, openapi, ops, problem};
use crate::{console, mcp};
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::{HeaderName, HeaderValue, Method};
use std::time::Duration;
use tauros_app::App;
use tower::ServiceBuilder;
use tower_http::catch_panic::CatchPanicLayer;
use tower_http::cors::{AllowOrigin, CorsLayer};

/// HTTP settings.
#[derive(Clone, Debug, Default)]
pub struct HttpConfig {
    /// Origins allowed by CORS; empty means none.
    pub cors_origins: Vec<String>,
    /// Serve `/metrics` on the main router (false when it has its own listener).
    pub metrics_on_main: bool,
    /// What a client connection may hold, and for how long ([`serve()`] and the body clock).
    pub limits: ConnectionLimits,
    /// The MCP endpoint at `/mcp` (on unless turned off).
    pub mcp: mcp::McpConfig,
}

/// The complete router with every layer.
pub fn router(app: App, config: &HttpConfig) -> Router {
    // Install the recorder before the first request is counted.
    crate::metrics::handle();
    let (api, doc) = crate::http::api_routes().split_for_parts();
    let doc = openapi::finish(doc);
    let mut router = api
        .merge(openapi::docs_router(doc))
        .merge(console::router())
        .merge(mcp::router(app.clone(), &config.mcp))
        .fallback(fallback)
        .method_not_allowed_fallback(method_not_allowed);
    if config.metrics_on_main {
        router = router.merge(ops::metrics_router());
    }
    with_layers(router.with_state(AppState { app }), config)
}

/// Every layer a request passes through. The panic catcher sits inside the outer edge, so a
/// panic's 500 still carries the request id. CORS is there only when origins are configured:
/// with none it would allow nothing and only cost every request. Only the inner edge is a
/// route layer (docs/DECISIONS.md, "The outer layers wrap the router once; ids come from a
/// thread-local generator").
pub fn with_layers(router: Router, config: &HttpConfig) -> Router {
    let routed = router.layer(axum::middleware::from_fn_with_state(
        body_timeout::BodyClock::from(&config.limits),
        middleware::inner,
    ));
    let cors = (!config.cors_origins.is_empty()).then(|| cors(&config.cors_origins));
    // Outermost first.
    let outer = ServiceBuilder::new()
        .layer(axum::middleware::from_fn(middleware::edge))
        .layer(CatchPanicLayer::custom(panic_response))
        .option_layer(cors)
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .service(routed);
    Router::new().fallback_service(outer)
}

fn cors(origins: &[String]) -> CorsLayer {
    let allowed: Vec<HeaderValue> = origins.iter().filter_map(|o| o.parse().ok()).collect();
    CorsLayer::new()
        .allow_origin(AllowOrigin::list(allowed))
        .allow_methods([Method::GET, Method::POST, Method::PATCH, Method::DELETE])
        .allow_headers([
            axum::http::header::AUTHORIZATION,
            axum::http::header::CONTENT_TYPE,
            headers::IDEMPOTENCY_KEY,
            HeaderName::from_static(middleware::REQUEST_ID),
            // What an MCP client in a browser sends to /mcp.
            HeaderName::from_static("mcp-protocol-version"),
            HeaderName::from_static("mcp-method"),
            HeaderName::from_static("mcp-name"),
        ])
        .expose_headers([
            HeaderName::from_static(middleware::REQUEST_ID),
            headers::REPLAYED,
        ])
        .max_age(Duration::from_secs(600))
}

async fn fallback() -> problem::ApiError {
    problem::for_status(axum::http::StatusCode::NOT_FOUND)
}

async fn method_not_allowed() -> problem::ApiError {
    problem::for_status(axum::http::StatusCode::METHOD_NOT_ALLOWED)
}

/// A panic in a handler is a bug: log it and answer 500 problem+json, never a dropped socket.
fn panic_response(_: Box<dyn std::any::Any + Send + 'static>) -> axum::response::Response {
    tracing::error!("a handler panicked");
    axum::response::IntoResponse::into_response(problem::internal())
}

/// `/metrics` alone, for its own listener (`TAUROS_METRICS_BIND`), with the security headers.
pub fn ops_metrics_router(app: App) -> Router {
    crate::metrics::handle();
    ops::metrics_router()
        .with_state(AppState { app })
        .layer(axum::middleware::from_fn(middleware::only_security_headers))
}
