//! The MCP tool surface for agents: `/mcp`, streamable HTTP (the official Rust SDK, `rmcp`),
//! stateless: every POST is authenticated and answered on its own, so any replica can answer.
//!
//! A sibling of `http`: each tool is a thin call of the use case its REST route calls, with the
//! agent marked as coming through `mcp` (audit rows and invoice events say so). It shares
//! `http`'s request types, strict JSON parser, use cases (paging, replay counting) and problem
//! mapping instead of copying them, so REST and MCP cannot disagree; `http` never imports
//! `mcp`. The crate's `router` mounts it inside the same layers.

mod answers;
mod args;
mod guard;
mod schema;
mod server;
mod summary;
mod tools;

pub use tools::Tool;

use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};
use std::sync::Arc;
use tauros_app::App;

/// The MCP endpoint's path.
pub const PATH: &str = "/mcp";

/// MCP settings.
#[derive(Clone, Debug)]
pub struct McpConfig {
    /// Serve `/mcp` (`TAUROS_MCP`, on by default); off, the path answers 404.
    pub enabled: bool,
    /// Browser origins allowed to call `/mcp`; a request with any other `Origin` is refused.
    pub origins: Vec<String>,
}

impl Default for McpConfig {
    fn default() -> Self {
        McpConfig {
            enabled: true,
            origins: Vec::new(),
        }
    }
}

/// `/mcp`, or no route at all when it is turned off.
pub fn router<S: Clone + Send + Sync + 'static>(app: App, config: &McpConfig) -> Router<S> {
    if !config.enabled {
        return Router::new();
    }
    let server = server::TaurosMcp::new(app.clone());
    let transport = StreamableHttpServerConfig::default()
        // Stateless, answering plain JSON when it can: nothing to share between replicas.
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_max_request_body_bytes(crate::http::state::BODY_LIMIT)
        // `Host` is not checked: a deployment answers to its own names. What a rebinding
        // browser would send, `Origin`, is checked by the guard, and no credential is ambient.
        .disable_allowed_hosts()
        .disable_allowed_origins();
    let service = StreamableHttpService::new(
        move || Ok(server.clone()),
        Arc::new(NeverSessionManager::default()),
        transport,
    );
    let guard = guard::Guard {
        app,
        origins: Arc::from(config.origins.clone()),
    };
    Router::new()
        .route_service(PATH, service)
        .layer(axum::middleware::from_fn_with_state(
            guard,
            guard::check_origin_and_agent,
        ))
}
