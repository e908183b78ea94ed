//! The SQLite adapter: the embedded default. WAL, `synchronous=FULL`, and one writer.
//!
//! Every write unit runs on the one writer connection; reads run on their own pool (WAL:
//! readers and the writer never wait for each other). Writers commit by group commit: a unit
//! that finishes while others are queued is released into a shared transaction (each unit in
//! its own `SAVEPOINT`, so a failure rolls back only itself), the next continues it, and the
//! last of the group (nobody queued, or [`MAX_GROUP`] units) commits once. Every unit is
//! answered only after that commit: one `fsync` covers many units, none is told "done" before
//! it is durable, and a failed commit reaches them all (none acknowledged; all safe to retry).
//!
//! [`MAX_GROUP`]: writer::MAX_GROUP

use crate::error::{StoreError, StoreResult};
use crate::jobs::{Claim, JobRow};
use crate::turns::Lane;
use crate::unit::{Reader, Store, Tx};
use async_trait::async_trait;
use sqlx::Connection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteSynchronous};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/sqlite");

/// Each reader's page cache, in KiB (SQLite's default is 2,000 KiB per connection). The OS
/// page cache holds the file anyway; this keeps a wide read pool's memory bounded.
const READER_CACHE_KIB: i64 = 512;

/// Prepared statements each reader keeps (sqlx's default is 100): the hot reads are a
/// handful, and every cached statement holds SQLite memory per connection.
const READER_STATEMENTS: usize = 24;

mod dialect;
mod jobs;
mod later;
mod readers;
mod unit;
mod writer;

#[cfg(test)]
mod tests;

use dialect::map_err;
use jobs::claim_job;
use readers::Readers;
use unit::{SqliteUnit, UnitConn, Wake};
use writer::{Opening, Writer};

/// A pool of connections to one SQLite database file.
pub struct SqliteStore {
    readers: Readers,
    writer: Writer,
    /// Woken after a write transaction that enqueued a job commits; workers wait on it.
    wake: Arc<Notify>,
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
        // The writer first: it creates the file and switches it to WAL before readers open it.
        // Its savepoints' journal stays in memory (on a file, each page's first write is a system
        // call), one unit's pages at a time (see `begin_here`).
        let writer =
            SqliteConnection::connect_with(&options.clone().pragma("temp_store", "memory")).await?;
        // Not sqlx's pool, which pings each connection as it is released (`readers.rs`).
        let readers = Readers::open(
            options
                .pragma("cache_size", format!("-{READER_CACHE_KIB}"))
                .statement_cache_capacity(READER_STATEMENTS),
            max_connections,
            Duration::from_secs(10),
        )
        .await?;
        Ok(SqliteStore {
            readers,
            writer: Writer::new(writer),
            wake: Arc::new(Notify::new()),
        })
    }

    /// Shared commits made and units they covered (read by `scripts/bench` and the tests).
    pub fn group_commits(&self) -> (u64, u64) {
        self.writer.stats()
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self, lane: Lane) -> StoreResult<Box<dyn Tx>> {
        let unit = self
            .writer
            .begin_opening(Opening::WithFirstCall, lane)
            .await?;
        let wake = Wake {
            notify: Some(Arc::clone(&self.wake)),
            pending: false,
        };
        Ok(Box::new(SqliteUnit(UnitConn::Write(unit), wake, None)))
    }

    async fn reader(&self, lane: Lane) -> StoreResult<Box<dyn Reader>> {
        let conn = self.readers.acquire(lane).await.map_err(map_err)?;
        let wake = Wake {
            notify: None,
            pending: false,
        };
        Ok(Box::new(SqliteUnit(UnitConn::Read(conn), wake, None)))
    }

    async fn migrate(&self) -> StoreResult<()> {
        // Between groups: no unit is open while the schema changes.
        let mut slot = self.writer.hold(Lane::Unattributed).await?;
        slot.commit_group(&self.writer, 0).await?;
        MIGRATOR
            .run_direct(None, &mut slot.conn, false)
            .await
            .map_err(|e| StoreError::Other(e.into()))
    }

    async fn readiness(&self) -> StoreResult<bool> {
        let mut conn = self
            .readers
            .acquire(Lane::Unattributed)
            .await
            .map_err(map_err)?;
        let applied: Vec<(i64,)> =
            sqlx::query_as("select version from _sqlx_migrations where success order by version")
                .fetch_all(&mut *conn)
                .await
                .map_err(|e| {
                    conn.failed(&e);
                    map_err(e)
                })?;
        Ok(super::sql::migrations_current(&MIGRATOR, &applied))
    }

    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn claim_job(&self, claim: &Claim<'_>) -> StoreResult<Option<JobRow>> {
        let unit = self.writer.begin().await?;
        claim_job(unit, claim).await
    }

    async fn wait_for_jobs(&self, timeout: Duration) {
        let _ = tokio::time::timeout(timeout, self.wake.notified()).await;
    }
}
