//! The REST surface: routes, extractors, request and response types, problem details and the
//! OpenAPI document. Handlers are thin: parse, call `app`, shape the answer.

mod agents;
mod audit_events;
pub(crate) mod body_timeout;
mod currencies;
pub(crate) mod customers;
pub(crate) mod destinations;
pub mod extract;
pub mod headers;
pub(crate) mod invoices;
mod jobs;
pub mod json;
pub mod middleware;
pub mod openapi;
pub(crate) mod ops;
mod organisation;
pub mod problem;
mod proposals;
pub mod rules;
pub(crate) mod schema;
pub(crate) mod serve;
pub(crate) mod sessions;
pub(crate) mod settlement;
pub(crate) mod state;
mod users;
mod webhooks;

use utoipa_axum::router::OpenApiRouter;

pub use serve::{
    ConnectionLimits, DEFAULT_BODY_PROGRESS_MIN_BYTES, DEFAULT_BODY_PROGRESS_WINDOW_SECONDS,
    DEFAULT_BODY_TIMEOUT_SECONDS, DEFAULT_HEADER_READ_TIMEOUT_SECONDS,
    DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_MAX_CONNECTIONS, DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
    DEFAULT_SHED_AFTER_MS, listen, serve,
};
pub use state::{AppState, BODY_LIMIT};

/// The API routes and their OpenAPI description, before layers.
pub fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .merge(sessions::routes())
        .merge(organisation::routes())
        .merge(users::routes())
        .merge(audit_events::routes())
        .merge(agents::routes())
        .merge(customers::routes())
        .merge(destinations::routes())
        .merge(invoices::routes())
        .merge(settlement::routes())
        .merge(currencies::routes())
        .merge(jobs::routes())
        .merge(webhooks::routes())
        .merge(ops::routes())
}

/// The complete OpenAPI document for this build, finished by [`openapi::finish`].
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = api_routes().split_for_parts();
    openapi::finish(doc)
}
