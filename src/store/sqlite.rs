//! The SQLite adapter: the embedded default. WAL, a busy timeout, and every write transaction
//! starts with `BEGIN IMMEDIATE`, so writers queue on the database lock up front instead of
//! failing with SQLITE_BUSY when a read transaction tries to upgrade.
//!
//! SQLite admits one writer at a time. Writers of this process wait for each other on an async
//! mutex before they take a connection: a queue in tokio wakes the next writer the moment the
//! last one commits, where SQLite's busy handler would sleep and retry (tens of milliseconds of
//! idle time per collision). Readers never wait for it (WAL).

use super::sql::{
    CONSTRAINTS, Conn, classify_other, impl_identity_tx, impl_invoice_tx, impl_party_tx,
};
use super::*;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Sqlite, SqlitePool};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, OwnedMutexGuard};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// A pool of connections to one SQLite database file.
pub struct SqliteStore {
    pool: SqlitePool,
    writer: Arc<Mutex<()>>,
}

impl SqliteStore {
    /// Opens (creating if the URL says `mode=rwc`) the database file.
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<SqliteStore> {
        let options = SqliteConnectOptions::from_str(url)?
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: an acknowledged write survives a power loss, not only a process crash.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(10))
            .connect_with(options)
            .await?;
        Ok(SqliteStore {
            pool,
            writer: Arc::new(Mutex::new(())),
        })
    }
}

/// A unit of work; a write transaction also holds this process's writer slot until it ends.
pub(super) struct SqliteTx(
    Conn<Sqlite>,
    // Held, never read: dropping the unit of work frees the writer slot.
    #[allow(dead_code)] Option<OwnedMutexGuard<()>>,
);

/// SQLite names the columns, not the constraint: map them back to the names in the migrations.
fn constraint_from_message(message: &str) -> Option<&'static str> {
    let columns = message.strip_prefix("UNIQUE constraint failed: ")?;
    let name = match columns {
        "orgs.name" => "orgs_name_key",
        "users.email_normalized" => "users_email_key",
        "users.org_id" => "users_one_bootstrap_per_org",
        "sessions.token_hash" => "sessions_token_hash_key",
        "invitations.token_hash" => "invitations_token_hash_key",
        "payment_destinations.org_id, payment_destinations.agent_id, payment_destinations.idempotency_key" => {
            "payment_destinations_idempotency_key"
        }
        "payment_destinations.supersedes_id" => "payment_destinations_supersedes_key",
        "invoices.org_id, invoices.agent_id, invoices.idempotency_key" => {
            "invoices_idempotency_key"
        }
        "decisions.revision_id" => "decisions_revision_key",
        _ => return None,
    };
    CONSTRAINTS.iter().find(|c| **c == name).copied()
}

fn map_err(err: sqlx::Error) -> StoreError {
    if let Some(db) = err.as_database_error() {
        if let Some(constraint) = constraint_from_message(db.message()) {
            return StoreError::Conflict { constraint };
        }
        // SQLITE_BUSY (5) / SQLITE_LOCKED (6) after the busy timeout: retryable.
        if matches!(db.code().as_deref(), Some("5") | Some("6") | Some("517")) {
            return StoreError::Unavailable(err);
        }
    }
    classify_other(err)
}

impl_identity_tx!(SqliteTx, Sqlite, for_update = "", map_err = map_err);
impl_party_tx!(SqliteTx, for_update = "", for_share = "", map_err = map_err);
impl_invoice_tx!(SqliteTx, for_update = "", map_err = map_err);

#[async_trait]
impl Tx for SqliteTx {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        self.0.commit().await
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self) -> StoreResult<Box<dyn Tx>> {
        let slot = Arc::clone(&self.writer).lock_owned().await;
        let tx = self
            .pool
            .begin_with("BEGIN IMMEDIATE")
            .await
            .map_err(map_err)?;
        Ok(Box::new(SqliteTx(Conn::Tx(tx), Some(slot))))
    }

    async fn reader(&self) -> StoreResult<Box<dyn Tx>> {
        let conn = self.pool.acquire().await.map_err(map_err)?;
        Ok(Box::new(SqliteTx(Conn::Plain(conn), None)))
    }

    async fn migrate(&self) -> StoreResult<()> {
        MIGRATOR
            .run(&self.pool)
            .await
            .map_err(|e| StoreError::Other(e.into()))
    }

    async fn readiness(&self) -> StoreResult<bool> {
        let applied: Vec<(i64,)> =
            sqlx::query_as("select version from _sqlx_migrations where success order by version")
                .fetch_all(&self.pool)
                .await
                .map_err(map_err)?;
        Ok(super::sql::migrations_current(&MIGRATOR, &applied))
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }
}
