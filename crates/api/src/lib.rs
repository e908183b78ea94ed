//! Tauros's wire: the REST API (`http`), the agents' MCP tools (`mcp`, over the same request
//! and response types and problem mapping as REST) and the approver console's assets
//! (`console`); `router` puts them behind one set of layers.

#![forbid(unsafe_code)]

pub mod console;
pub mod http;
pub mod mcp;
mod metrics;
mod router;

pub use http::{
    BODY_LIMIT, ConnectionLimits, DEFAULT_BODY_PROGRESS_MIN_BYTES,
    DEFAULT_BODY_PROGRESS_WINDOW_SECONDS, DEFAULT_BODY_TIMEOUT_SECONDS,
    DEFAULT_HEADER_READ_TIMEOUT_SECONDS, DEFAULT_IDLE_TIMEOUT_SECONDS, DEFAULT_MAX_CONNECTIONS,
    DEFAULT_MAX_CONNECTIONS_PER_ADDRESS, DEFAULT_SHED_AFTER_MS, listen, openapi, serve,
};
pub use router::{HttpConfig, ops_metrics_router, router, with_layers};
