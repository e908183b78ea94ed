//! The stack's floor for `scripts/bench` (issue #28): the cheapest authenticated GET that
//! Tauros's own stack (axum, sqlx, tokio, serde_json, the workspace's versions) can answer.
//! One route, `GET /inv/{id}`: the bearer token checked against a constant, one prepared
//! primary-key select on the benchmark table `floor.invoices`, the row answered as JSON; 404
//! for a missing row, 401 for a wrong or missing token. Nothing else: no middleware, no
//! logging, no metrics. Tauros / this server is the share of the stack's floor Tauros reaches.
//!
//! The table is the bench's, not Tauros's: `scripts/bench` fills it from Tauros's own invoices
//! and their current revisions (one row per invoice, the width of what a GET answers; see
//! docs/PERFORMANCE.md "The stack's floor").
//!
//! Settings as Tauros's bench server where they apply: `#[tokio::main]` (multi-threaded, one
//! worker per core), a PostgreSQL pool of 4 connections per core from 8 to 32
//! (`default_pool_size` in src/config.rs) unless `FLOOR_MAX_CONNECTIONS` says otherwise
//! (scripts/bench passes `BENCH_POOL` to both), 5 s to acquire a connection, HTTP/1.1 with
//! keep-alive, a connection pinged before it is handed out only after 1 s idle (Tauros's
//! `PING_AFTER_IDLE`, crates/store/src/postgres.rs; sqlx's default pings on every acquire).
//! Unlike Tauros's, the pool opens all its connections at start (see `main`). Prints
//! `address=HOST:PORT` on stderr once it listens, like Tauros's log line.
//!
//! ```text
//! FLOOR_DATABASE_URL=postgres://…/bench cargo run --release --example floor
//! curl -H 'Authorization: Bearer tauros-bench-floor' http://127.0.0.1:PORT/inv/<uuid>
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::postgres::{PgPool, PgPoolOptions};
use std::time::Duration;
use uuid::Uuid;

/// The one accepted bearer token (scripts/bench sends it from wrk and the load generator).
const TOKEN: &[u8] = b"tauros-bench-floor";

/// One prepared statement (sqlx prepares and caches it per connection): a primary-key select.
const SELECT: &str = "select id, org_id, agent_id, idempotency_key, state, number, revision_count, \
    amount_paid_minor, created_at, updated_at, revision_id, revision_number, customer_id, \
    payment_destination_id, destination_network, destination_address, currency, due_date, \
    lines, total_minor, reasoning, canonical_payload, payload_hash, revision_created_at \
    from floor.invoices where id = $1";

#[derive(sqlx::FromRow, serde::Serialize)]
struct Invoice {
    id: Uuid,
    org_id: Uuid,
    agent_id: Uuid,
    idempotency_key: String,
    state: String,
    number: Option<String>,
    revision_count: i32,
    amount_paid_minor: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
    revision_id: Uuid,
    revision_number: i32,
    customer_id: Uuid,
    payment_destination_id: Uuid,
    destination_network: String,
    destination_address: String,
    currency: String,
    due_date: NaiveDate,
    lines: String,
    total_minor: String,
    reasoning: String,
    canonical_payload: String,
    payload_hash: String,
    revision_created_at: DateTime<Utc>,
}

/// Compares without an early exit on the first differing byte.
fn token_ok(headers: &HeaderMap) -> bool {
    let presented = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.as_bytes().strip_prefix(b"Bearer "))
        .unwrap_or_default();
    presented.len() == TOKEN.len()
        && presented
            .iter()
            .zip(TOKEN)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b))
            == 0
}

async fn invoice(State(pool): State<PgPool>, Path(id): Path<Uuid>, headers: HeaderMap) -> Response {
    if !token_ok(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match sqlx::query_as::<_, Invoice>(SELECT)
        .bind(id)
        .fetch_optional(&pool)
        .await
    {
        Ok(Some(row)) => Json(row).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
    }
}

#[tokio::main]
async fn main() {
    let url = std::env::var("FLOOR_DATABASE_URL").expect("FLOOR_DATABASE_URL");
    let bind = std::env::var("FLOOR_BIND").unwrap_or_else(|_| "127.0.0.1:0".into());
    // Tauros's default: 4 per core, from 8 to 32 (src/config.rs default_pool_size).
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get) as u32;
    let size = std::env::var("FLOOR_MAX_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| (cores * 4).clamp(8, 32));
    // All connections opened at start (sqlx keeps `min_connections` open in the background):
    // scripts/bench lists PostgreSQL's backends before a window to charge their CPU, so a
    // backend born during the window would go uncounted.
    let pool = PgPoolOptions::new()
        .max_connections(size)
        .min_connections(size)
        .acquire_timeout(Duration::from_secs(5))
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= Duration::from_secs(1) {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .connect(&url)
        .await
        .expect("connect to PostgreSQL");
    let app = Router::new()
        .route("/inv/{id}", get(invoice))
        .with_state(pool);
    let listener = tokio::net::TcpListener::bind(&bind).await.expect("bind");
    eprintln!(
        "floor listening address={} pool={size}",
        listener.local_addr().unwrap()
    );
    axum::serve(listener, app).await.expect("serve");
}
