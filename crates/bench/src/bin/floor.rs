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
//! worker per core: the runtime Tauros builds by hand after setting its allocator's arena
//! limit, src/allocator.rs; the floor runs three threads, fewer than the limit's four arenas
//! on two cores, so the limit would change nothing here), 4 PostgreSQL connections per core from 8 to 32 (`default_pool_size` in
//! src/config/mod.rs) unless `FLOOR_MAX_CONNECTIONS` says otherwise (scripts/bench passes
//! `BENCH_POOL` to both), 5 s to wait for a connection, HTTP/1.1 with keep-alive.
//!
//! The connections are sqlx's, kept in a list of their own ([`Conns`]), not in sqlx's pool:
//! the pool pings each connection it takes back, a round trip per request that Tauros no
//! longer makes (crates/store/src/postgres/lender.rs), so the floor does not either and stays
//! the cheapest GET of the stack. No ping before use: the bench's connections are never idle
//! long. All of them are opened at start. Prints `address=HOST:PORT` on stderr once it
//! listens, like Tauros's log line.
//!
//! ```text
//! FLOOR_DATABASE_URL=postgres://…/bench cargo run --release -p tauros-bench --bin floor
//! curl -H 'Authorization: Bearer tauros-bench-floor' http://127.0.0.1:PORT/inv/<uuid>
//! ```

#![allow(clippy::unwrap_used, clippy::expect_used)]

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use axum::routing::get;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::{Connection, PgConnection};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use uuid::Uuid;

/// The one accepted bearer token (scripts/bench sends it from wrk and the load generator).
const TOKEN: &[u8] = b"tauros-bench-floor";

/// One prepared statement (sqlx prepares and caches it per connection): a primary-key select.
const SELECT: &str = "select id, org_id, agent_id, idempotency_key, state, number, revision_count, \
    amount_paid_minor, created_at, updated_at, revision_id, revision_number, customer_id, \
    payment_destination_id, destination_network, destination_address, currency, due_date, \
    total_minor, reasoning, canonical_payload, payload_hash, revision_created_at \
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

/// The floor's connections: one permit per connection; a holder takes a free one, or opens
/// one if a failed statement's connection was dropped.
struct Conns {
    url: String,
    free: Mutex<Vec<PgConnection>>,
    permits: Semaphore,
}

impl Conns {
    async fn take(&self) -> Result<PgConnection, sqlx::Error> {
        let free = self.free.lock().unwrap().pop();
        match free {
            Some(conn) => Ok(conn),
            None => PgConnection::connect(&self.url).await,
        }
    }
}

fn unavailable(e: impl std::fmt::Display) -> Response {
    (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response()
}

async fn invoice(
    State(conns): State<Arc<Conns>>,
    Path(id): Path<Uuid>,
    headers: HeaderMap,
) -> Response {
    if !token_ok(&headers) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    let Ok(Ok(_permit)) =
        tokio::time::timeout(Duration::from_secs(5), conns.permits.acquire()).await
    else {
        return unavailable("no connection within 5 s");
    };
    let mut conn = match conns.take().await {
        Ok(conn) => conn,
        Err(e) => return unavailable(e),
    };
    let row = sqlx::query_as::<_, Invoice>(SELECT)
        .bind(id)
        .fetch_optional(&mut conn)
        .await;
    // Given back only after a statement that finished; the permit returns after it.
    if row.is_ok() {
        conns.free.lock().unwrap().push(conn);
    }
    match row {
        Ok(Some(row)) => Json(row).into_response(),
        Ok(None) => StatusCode::NOT_FOUND.into_response(),
        Err(e) => unavailable(e),
    }
}

#[tokio::main]
async fn main() {
    let url = std::env::var("FLOOR_DATABASE_URL").expect("FLOOR_DATABASE_URL");
    let bind = std::env::var("FLOOR_BIND").unwrap_or_else(|_| "127.0.0.1:0".into());
    // Tauros's default: 4 per core, from 8 to 32 (src/config/mod.rs default_pool_size).
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get) as u32;
    let size = std::env::var("FLOOR_MAX_CONNECTIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| (cores * 4).clamp(8, 32));
    let mut free = Vec::new();
    for _ in 0..size {
        free.push(
            PgConnection::connect(&url)
                .await
                .expect("connect to PostgreSQL"),
        );
    }
    let conns = Arc::new(Conns {
        url,
        free: Mutex::new(free),
        permits: Semaphore::new(size as usize),
    });
    let app = Router::new()
        .route("/inv/{id}", get(invoice))
        .with_state(conns);
    let listener = tokio::net::TcpListener::bind(&bind).await.expect("bind");
    eprintln!(
        "floor listening address={} pool={size}",
        listener.local_addr().unwrap()
    );
    axum::serve(listener, app).await.expect("serve");
}
