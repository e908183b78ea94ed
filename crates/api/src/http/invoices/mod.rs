//! `/v1/invoices`: proposals by agents, decisions by humans. Every command answers
//! `{invoice, replayed}` with the `Idempotent-Replayed` header.
//!
//! `use_cases` are the calls REST and MCP share; `handlers` extract, call them (or `app`) and
//! add status and headers; `types` holds the bodies (the OpenAPI schemas) and conversions.

#[cfg(test)]
mod body_tests;
pub(crate) mod handlers;
pub(crate) mod types;
pub(crate) mod use_cases;

use crate::http::state::AppState;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(handlers::create_invoice, handlers::list_invoices))
        .routes(routes!(handlers::preview_invoice))
        .routes(routes!(handlers::get_invoice))
        .routes(routes!(handlers::list_revisions))
        .routes(routes!(handlers::list_decisions))
        .routes(routes!(handlers::list_events))
        .routes(routes!(handlers::verify_invoice))
        .routes(routes!(handlers::revise))
        .routes(routes!(handlers::submit))
        .routes(routes!(handlers::withdraw))
        .routes(routes!(handlers::approve))
        .routes(routes!(handlers::reject))
        .routes(routes!(handlers::request_changes))
        .routes(routes!(handlers::cancel))
        .routes(routes!(handlers::issue))
}
