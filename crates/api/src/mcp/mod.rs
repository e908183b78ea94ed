//! The MCP tool surface for agents: `/mcp`, streamable HTTP (the official Rust SDK, `rmcp`),
//! stateless (no MCP session is kept: every POST is authenticated and answered on its own, so
//! any replica can answer it).
//!
//! A sibling of `http`: each tool is a thin call of the use case its REST route calls (typed
//! input in, the REST answer out; a function next to the REST handler), with the agent marked
//! as coming through `mcp` (audit rows and invoice events say so). It shares `http`'s edge
//! instead of copying it: the request types and their strict JSON parser, the use cases with
//! their paging, answer types and replay counting, and the one mapping from app errors to
//! problem details, so REST and MCP cannot disagree. `http` never imports `mcp`. `http::router` mounts it, inside the same layers (request id, limits,
//! metrics, tracing).
//!
//! - `guard`: Origin check, agent-only authentication, refusals as problem details;
//! - `server`: the rmcp handler (`tools/list`, `tools/call`);
//! - `tools`: the reviewed list, descriptions, schemas and the calls;
//! - `answers`: the answers that add to a REST body (a replay flag, an invoice's history);
//! - `summary`: the short text beside each answer's structured content;
//! - `args`: REST bodies plus the members REST takes from the path or a header;
//! - `schema`: input schemas from the REST document's own schemas.

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
    /// Browser origins allowed to call `/mcp` (`TAUROS_MCP_ORIGINS`, else
    /// `TAUROS_CORS_ORIGINS`); a request with any other `Origin` is refused.
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
