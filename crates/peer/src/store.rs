//! The peer's own SQLite file: its operations (the unique key is what deduplicates), the effects
//! it made and every call it received.

use anyhow::Context;
use serde::Serialize;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{Row, SqlitePool};
use std::path::Path;
use std::time::Duration;
use uuid::Uuid;

const SCHEMA: &str = "
create table if not exists operations (
    seq integer primary key,
    op_key text not null,
    body_sha256 blob not null check (length(body_sha256) = 32),
    peer_id text not null,
    received_at text not null,
    constraint operations_op_key_key unique (op_key)
);
create table if not exists effects (
    seq integer primary key,
    peer_id text not null unique,
    op_key text not null references operations (op_key),
    made_at text not null
);
create table if not exists calls (
    seq integer primary key,
    kind text not null check (kind in ('execute', 'recover')),
    op_key text,
    at text not null
);
";

/// What the peer answers for a committed operation, with the request it holds, to compare.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub peer_id: String,
    pub op_key: String,
    pub received_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub request: Option<serde_json::Value>,
}

/// The stored request body (canonical JSON text), parsed back for an answer.
fn request_of(body: Option<String>) -> Option<serde_json::Value> {
    body.and_then(|b| serde_json::from_str(&b).ok())
}

/// What a `POST /invoices` did to the store.
#[derive(Debug)]
pub enum Outcome {
    /// A new effect: the key was new (or `no_dedupe` forgot it was known).
    Created(Answer),
    /// The key was known with the same body: nothing written.
    Replayed(Answer),
    /// The key was known with another body: nothing written.
    KeyReused,
}

/// Which route a call came through.
#[derive(Clone, Copy, Debug)]
pub enum Call {
    Execute,
    Recover,
}

/// `GET /stats`.
#[derive(Debug, Serialize)]
pub struct Stats {
    pub executes: i64,
    pub recovers: i64,
    pub effects: i64,
    pub operations: Vec<OperationStats>,
    pub calls: Vec<CallRecord>,
}

#[derive(Debug, Serialize)]
pub struct OperationStats {
    pub op_key: String,
    pub effects: i64,
}

#[derive(Debug, Serialize)]
pub struct CallRecord {
    pub kind: String,
    pub op_key: Option<String>,
}

#[derive(Clone)]
pub struct Store {
    /// One connection writes, so concurrent commits queue here rather than on SQLITE_BUSY.
    writer: SqlitePool,
    reader: SqlitePool,
    /// How long a committed key is remembered; older operations are forgotten.
    retention: chrono::Duration,
}

fn stamp(at: chrono::DateTime<chrono::Utc>) -> String {
    at.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn now() -> String {
    stamp(chrono::Utc::now())
}

impl Store {
    /// Opens (creating if missing) the database file and its tables.
    pub async fn open(path: &Path, retention: Duration) -> anyhow::Result<Store> {
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            // FULL: an operation the peer answered 201 for survives a power loss.
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10))
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options.clone())
            .await
            .with_context(|| format!("cannot open {}", path.display()))?;
        sqlx::raw_sql(SCHEMA)
            .execute(&writer)
            .await
            .context("cannot create the peer's tables")?;
        // Files written before the peer kept request bodies gain the column (empty for them).
        let columns = sqlx::query("select name from pragma_table_info('operations')")
            .fetch_all(&writer)
            .await?;
        if !columns
            .iter()
            .any(|c| c.try_get::<String, _>("name").is_ok_and(|n| n == "body"))
        {
            sqlx::query("alter table operations add column body text")
                .execute(&writer)
                .await
                .context("cannot add the body column")?;
        }
        let reader = SqlitePoolOptions::new()
            .max_connections(4)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(options)
            .await?;
        let retention = chrono::Duration::from_std(retention)
            .unwrap_or(chrono::Duration::MAX)
            .min(chrono::Duration::days(365 * 100));
        Ok(Store {
            writer,
            reader,
            retention,
        })
    }

    /// Operations received before this are forgotten.
    fn forgotten_before(&self) -> String {
        stamp(chrono::Utc::now() - self.retention)
    }

    /// Closes both pools (the last connection checkpoints the WAL).
    pub async fn close(&self) {
        self.reader.close().await;
        self.writer.close().await;
    }

    /// Records that a request reached the execute or recover handler.
    pub async fn record_call(&self, call: Call, op_key: Option<&str>) -> sqlx::Result<()> {
        let kind = match call {
            Call::Execute => "execute",
            Call::Recover => "recover",
        };
        sqlx::query("insert into calls (kind, op_key, at) values (?, ?, ?)")
            .bind(kind)
            .bind(op_key)
            .bind(now())
            .execute(&self.writer)
            .await?;
        Ok(())
    }

    /// Commits the operation `op_key` in one transaction; the unique constraint decides whether
    /// it is new. `forget_known` (`no_dedupe`) is asked only for a known key.
    pub async fn commit(
        &self,
        op_key: &str,
        body_sha256: &[u8; 32],
        body: &str,
        forget_known: impl FnOnce() -> bool,
    ) -> sqlx::Result<Outcome> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let fresh = Answer {
            peer_id: Uuid::new_v4().to_string(),
            op_key: op_key.to_owned(),
            received_at: now(),
            request: serde_json::from_str(body).ok(),
        };
        // A key past the retention window is forgotten: its row is taken over as if new.
        let inserted = sqlx::query(
            "insert into operations (op_key, body_sha256, peer_id, received_at, body)
             values (?, ?, ?, ?, ?) on conflict (op_key) do update set
                 body_sha256 = excluded.body_sha256, peer_id = excluded.peer_id,
                 received_at = excluded.received_at, body = excluded.body
             where operations.received_at < ?",
        )
        .bind(op_key)
        .bind(&body_sha256[..])
        .bind(&fresh.peer_id)
        .bind(&fresh.received_at)
        .bind(body)
        .bind(self.forgotten_before())
        .execute(&mut *tx)
        .await?
        .rows_affected()
            == 1;
        // A known key is a replay or a reused key, unless `no_dedupe` forgets it: a new effect.
        if !inserted && !forget_known() {
            let row = sqlx::query(
                "select body_sha256, peer_id, received_at, body from operations where op_key = ?",
            )
            .bind(op_key)
            .fetch_one(&mut *tx)
            .await?;
            let stored: Vec<u8> = row.try_get("body_sha256")?;
            if stored != body_sha256[..] {
                return Ok(Outcome::KeyReused);
            }
            // Nothing was written; dropping the transaction rolls it back.
            return Ok(Outcome::Replayed(Answer {
                peer_id: row.try_get("peer_id")?,
                op_key: op_key.to_owned(),
                received_at: row.try_get("received_at")?,
                request: request_of(row.try_get("body")?),
            }));
        }
        sqlx::query("insert into effects (peer_id, op_key, made_at) values (?, ?, ?)")
            .bind(&fresh.peer_id)
            .bind(op_key)
            .bind(&fresh.received_at)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(Outcome::Created(fresh))
    }

    /// The stored answer for `op_key`, if the peer committed it within its retention window.
    pub async fn find(&self, op_key: &str) -> sqlx::Result<Option<Answer>> {
        let row = sqlx::query(
            "select peer_id, received_at, body from operations
             where op_key = ? and received_at >= ?",
        )
        .bind(op_key)
        .bind(self.forgotten_before())
        .fetch_optional(&self.reader)
        .await?;
        row.map(|row| {
            Ok(Answer {
                peer_id: row.try_get("peer_id")?,
                op_key: op_key.to_owned(),
                received_at: row.try_get("received_at")?,
                request: request_of(row.try_get("body")?),
            })
        })
        .transpose()
    }

    /// Holds `body` under `op_key` as if committed now, replacing what it held (new: one effect).
    pub async fn plant(
        &self,
        op_key: &str,
        body_sha256: &[u8; 32],
        body: &str,
    ) -> sqlx::Result<Answer> {
        let mut tx = self.writer.begin_with("BEGIN IMMEDIATE").await?;
        let answer = Answer {
            peer_id: Uuid::new_v4().to_string(),
            op_key: op_key.to_owned(),
            received_at: now(),
            request: serde_json::from_str(body).ok(),
        };
        let known = sqlx::query("select 1 from operations where op_key = ?")
            .bind(op_key)
            .fetch_optional(&mut *tx)
            .await?
            .is_some();
        sqlx::query(
            "insert into operations (op_key, body_sha256, peer_id, received_at, body)
             values (?, ?, ?, ?, ?) on conflict (op_key) do update set
                 body_sha256 = excluded.body_sha256, peer_id = excluded.peer_id,
                 received_at = excluded.received_at, body = excluded.body",
        )
        .bind(op_key)
        .bind(&body_sha256[..])
        .bind(&answer.peer_id)
        .bind(&answer.received_at)
        .bind(body)
        .execute(&mut *tx)
        .await?;
        if !known {
            sqlx::query("insert into effects (peer_id, op_key, made_at) values (?, ?, ?)")
                .bind(&answer.peer_id)
                .bind(op_key)
                .bind(&answer.received_at)
                .execute(&mut *tx)
                .await?;
        }
        tx.commit().await?;
        Ok(answer)
    }

    /// Counts of calls and effects, every operation with its effects, every call in order.
    pub async fn stats(&self) -> sqlx::Result<Stats> {
        // One read transaction, so the counts and the lists agree.
        let mut tx = self.reader.begin().await?;
        let counts = sqlx::query(
            "select (select count(*) from calls where kind = 'execute') as executes,
                    (select count(*) from calls where kind = 'recover') as recovers,
                    (select count(*) from effects) as effects",
        )
        .fetch_one(&mut *tx)
        .await?;
        let operations = sqlx::query(
            "select o.op_key, count(e.seq) as effects
             from operations o join effects e on e.op_key = o.op_key
             group by o.seq, o.op_key order by o.seq",
        )
        .fetch_all(&mut *tx)
        .await?
        .into_iter()
        .map(|row| {
            Ok(OperationStats {
                op_key: row.try_get("op_key")?,
                effects: row.try_get("effects")?,
            })
        })
        .collect::<sqlx::Result<Vec<_>>>()?;
        let calls = sqlx::query("select kind, op_key from calls order by seq")
            .fetch_all(&mut *tx)
            .await?
            .into_iter()
            .map(|row| {
                Ok(CallRecord {
                    kind: row.try_get("kind")?,
                    op_key: row.try_get("op_key")?,
                })
            })
            .collect::<sqlx::Result<Vec<_>>>()?;
        tx.commit().await?;
        Ok(Stats {
            executes: counts.try_get("executes")?,
            recovers: counts.try_get("recovers")?,
            effects: counts.try_get("effects")?,
            operations,
            calls,
        })
    }
}
