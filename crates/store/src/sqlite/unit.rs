//! A unit of work on SQLite as the shared SQL sees it: its `Backend`, `Reader` and `Tx`.

use super::dialect::{NOW, map_err, now_plus_ms};
use super::later::{Later, MAX_LATER, Want};
use super::readers::ReadConn;
use super::writer::WriteUnit;
use crate::error::{StoreError, StoreResult};
use crate::sql::{Backend, Decoded, FreeKey, Stmt, execute, fetch_all, fetch_optional};
use crate::unit::{Reader, Tx};
use async_trait::async_trait;
use sqlx::sqlite::{SqliteConnection, SqliteRow};
use std::sync::Arc;
use tokio::sync::Notify;

/// A unit's connection: a read-pool connection, or the writer.
pub(super) enum UnitConn {
    Read(ReadConn),
    Write(WriteUnit),
}

impl UnitConn {
    /// Classifies a statement's error; a read connection shown gone is replaced before reuse.
    fn failed(&mut self, err: sqlx::Error) -> StoreError {
        if let UnitConn::Read(conn) = self {
            conn.failed(&err);
        }
        map_err(err)
    }

    fn conn(&mut self) -> &mut SqliteConnection {
        match self {
            UnitConn::Read(conn) => conn,
            UnitConn::Write(unit) => unit.conn(),
        }
    }

    /// The write unit, if it holds statements back (or one of them failed).
    fn holding(&mut self) -> Option<&mut WriteUnit> {
        match self {
            UnitConn::Write(unit) if !unit.later.is_empty() || unit.failed => Some(unit),
            _ => None,
        }
    }
}

/// One unit of work: a writer transaction ([`Tx`]) or a read connection ([`Reader`]), whether
/// to wake workers on commit, and the key it found free (free until it ends: one writer).
pub(super) struct SqliteUnit(
    pub(super) UnitConn,
    pub(super) Wake,
    pub(super) Option<FreeKey>,
);

/// An in-process wake-up, fired only after the enqueuing transaction commits.
pub(super) struct Wake {
    pub(super) notify: Option<Arc<Notify>>,
    pub(super) pending: bool,
}

async fn wake_after_commit(unit: &mut SqliteUnit) -> StoreResult<()> {
    unit.1.pending = true;
    Ok(())
}

// No row locks: the single writer serializes every write transaction, and a sanctioned reap's
// `effect_claim_reaps` row exists only inside the reaping transaction.
impl crate::sql::stmt::sealed::Sealed for SqliteUnit {}

impl crate::sql::stmt::RowsAffected for sqlx::sqlite::SqliteQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[async_trait]
impl Backend for SqliteUnit {
    const FOR_UPDATE: &'static str = "";
    const FOR_SHARE: &'static str = "";
    const SKIP_LOCKED: &'static str = "";
    const SANCTION_REAP: &'static str = "insert into effect_claim_reaps default values";
    const UNSANCTION_REAP: &'static str = "delete from effect_claim_reaps";
    const NOW: &'static str = NOW;
    // The writer runs one unit at a time, from its first statement to its end.
    const WRITES_ALONE: bool = true;

    fn key_found_free(&mut self, key: FreeKey) {
        self.2 = Some(key);
    }

    fn key_is_free(&self, key: &FreeKey) -> bool {
        self.2.as_ref() == Some(key)
    }

    fn now_plus_ms(param: &str) -> String {
        now_plus_ms(param)
    }

    fn json_texts(param: &str) -> String {
        format!("select value from json_each({param})")
    }

    fn map_err(err: sqlx::Error) -> StoreError {
        map_err(err)
    }

    async fn fetch_optional_row<O: Decoded>(&mut self, stmt: Stmt<'_>) -> StoreResult<Option<O>> {
        let Some(unit) = self.0.holding() else {
            let found = fetch_optional(self.0.conn(), stmt).await;
            return found.map_err(|e| self.0.failed(e));
        };
        let ran = unit.run_after_later(Some(stmt), Want::First).await?;
        ran.rows
            .first()
            .map(O::from_row)
            .transpose()
            .map_err(map_err)
    }

    async fn fetch_all_rows<O: Decoded>(&mut self, stmt: Stmt<'_>) -> StoreResult<Vec<O>> {
        let Some(unit) = self.0.holding() else {
            let found = fetch_all(self.0.conn(), stmt).await;
            return found.map_err(|e| self.0.failed(e));
        };
        let ran = unit.run_after_later(Some(stmt), Want::All).await?;
        ran.rows
            .iter()
            .map(O::from_row)
            .collect::<Result<_, _>>()
            .map_err(map_err)
    }

    async fn execute_stmt(&mut self, stmt: Stmt<'_>) -> StoreResult<u64> {
        let Some(unit) = self.0.holding() else {
            let done = execute(self.0.conn(), stmt).await;
            return done.map_err(|e| self.0.failed(e));
        };
        Ok(unit.run_after_later(Some(stmt), Want::Count).await?.changed)
    }

    type Row = SqliteRow;

    fn decode<O: Decoded>(row: &SqliteRow) -> StoreResult<O> {
        O::from_row(row).map_err(map_err)
    }

    // One call to the connection's thread for all of them (and any held statements before).
    async fn fetch_first_rows(
        &mut self,
        stmts: Vec<Stmt<'_>>,
    ) -> StoreResult<Vec<Option<SqliteRow>>> {
        let ran = match &mut self.0 {
            UnitConn::Write(unit) => unit.run_after_later(stmts, Want::Each).await?,
            UnitConn::Read(conn) => {
                let mut together = Later::default();
                for stmt in stmts {
                    together.push(stmt).map_err(map_err)?;
                }
                let ran = together.run(conn, 0, Want::Each).await;
                ran.map_err(|(e, _)| self.0.failed(e))?
            }
        };
        Ok(ran.firsts)
    }

    async fn execute_later(&mut self, stmt: Stmt<'_>) -> StoreResult<()> {
        let UnitConn::Write(unit) = &mut self.0 else {
            return self.execute_stmt(stmt).await.map(drop);
        };
        unit.later.push(stmt).map_err(map_err)?;
        if unit.later.statements - unit.later.opens >= MAX_LATER {
            unit.run_after_later(None, Want::Count).await?;
        }
        Ok(())
    }

    async fn wake_workers(&mut self) -> StoreResult<()> {
        wake_after_commit(self).await
    }
}

impl Reader for SqliteUnit {}

#[async_trait]
impl Tx for SqliteUnit {
    async fn commit(self: Box<Self>) -> StoreResult<()> {
        let SqliteUnit(conn, wake, _) = *self;
        let UnitConn::Write(unit) = conn else {
            return Ok(()); // a read unit has nothing to commit
        };
        if unit.commit(wake.pending).await?
            && let Some(notify) = wake.notify
        {
            notify.notify_waiters();
        }
        Ok(())
    }

    async fn abandon(self: Box<Self>) -> StoreResult<()> {
        match self.0 {
            UnitConn::Write(unit) => unit.abandon().await,
            UnitConn::Read(_) => Ok(()),
        }
    }
}
