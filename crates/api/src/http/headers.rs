//! The headers of Tauros's own that the REST surface reads and writes.

use axum::http::HeaderName;

/// The header that carries an idempotency key on REST (a create may also take it in the body,
/// as `idempotency_key`; MCP takes the argument `idempotency_key`).
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";

/// [`IDEMPOTENCY_KEY_HEADER`] as a header name.
pub const IDEMPOTENCY_KEY: HeaderName = HeaderName::from_static("idempotency-key");

/// `true` when a keyed command's answer is a replay (nothing was written), `false` otherwise.
pub const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");
