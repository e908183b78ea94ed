//! The PostgreSQL adapter: the production backend (row locks, many replicas, one database).

use super::sql::{
    Conn, classify_other, impl_governance_store, impl_identity_store, impl_invoice_store,
    impl_party_store,
};
use super::{Constraint, Reader, Store, StoreError, StoreResult, Tx};
use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{PgPool, Postgres};
use std::str::FromStr;
use std::time::Duration;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// A pool of PostgreSQL connections.
pub struct PgStore {
    pool: PgPool,
}

impl PgStore {
    /// Connects lazily-checked: the first query proves the database answers.
    pub async fn connect(url: &str, max_connections: u32) -> anyhow::Result<PgStore> {
        let options = PgConnectOptions::from_str(url)?.application_name("tauros");
        let pool = PgPoolOptions::new()
            .max_connections(max_connections)
            .acquire_timeout(Duration::from_secs(5))
            .connect_with(options)
            .await?;
        Ok(PgStore { pool })
    }
}

/// One unit of work: a transaction (as [`Tx`]) or a pooled connection (as [`Reader`]).
pub(super) struct PgUnit(Conn<Postgres>);

fn map_err(err: sqlx::Error) -> StoreError {
    if let Some(db) = err.as_database_error() {
        if let Some(known) = db
            .constraint()
            .and_then(|name| Constraint::ALL.into_iter().find(|c| c.name() == name))
        {
            return StoreError::Conflict(known);
        }
        if db.code().as_deref() == Some("23503") {
            return StoreError::ReferenceGone(err);
        }
        // 57P01 admin shutdown, 53300 too many connections, 08xxx connection exceptions.
        if db
            .code()
            .is_some_and(|code| code.starts_with("08") || code == "57P01" || code == "53300")
        {
            return StoreError::Unavailable(err);
        }
    }
    classify_other(err)
}

impl_identity_store!(
    PgUnit,
    for_update = " for update",
    for_share = " for share",
    map_err = map_err
);
impl_governance_store!(
    PgUnit,
    for_update = " for update",
    for_share = " for share",
    map_err = map_err
);
impl_party_store!(
    PgUnit,
    for_update = " for update",
    for_share = " for share",
    map_err = map_err
);
impl_invoice_store!(PgUnit, for_update = " for update", map_err = map_err);

impl Reader for PgUnit {}

#[async_trait]
impl Tx for PgUnit {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        self.0.commit().await
    }
}

#[async_trait]
impl Store for PgStore {
    async fn begin(&self) -> StoreResult<Box<dyn Tx>> {
        let tx = self.pool.begin().await.map_err(map_err)?;
        Ok(Box::new(PgUnit(Conn::Tx(tx))))
    }

    async fn reader(&self) -> StoreResult<Box<dyn Reader>> {
        let conn = self.pool.acquire().await.map_err(map_err)?;
        Ok(Box::new(PgUnit(Conn::Plain(conn))))
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
        "postgres"
    }
}

// Backend-only statements. What only PostgreSQL can do (the job queue's `FOR UPDATE SKIP
// LOCKED` claims, `LISTEN/NOTIFY` wake-ups) is written here, as inherent methods of `PgStore`
// or `PgUnit` behind a port trait the SQLite adapter implements its own way.
