//! SQLite's read connections, opened as reads need them up to a bound, one per reader unit.
//! Not sqlx's pool, which pings each connection on release: these never open a transaction,
//! and a connection whose thread is gone is seen by the statement that fails on it instead
//! ([`ReadConn::failed`]; docs/DECISIONS.md, "SQLite group commit", *Read connections*).

use crate::turns::{Lane, Turn, Turns};
use sqlx::ConnectOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection};
use std::ops::{Deref, DerefMut};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Mutex, OwnedMutexGuard};

/// The read connections of one database file.
pub(super) struct Readers {
    options: SqliteConnectOptions,
    /// One turn per connection that may be open, taken by organisation in turn: a holder
    /// finds one free or opens one.
    turns: Arc<Turns>,
    /// The connections opened so far (at most one per permit: opened only when all are held).
    connections: std::sync::Mutex<Vec<Arc<Mutex<Reader>>>>,
    /// How long a read waits for a connection before it answers 503.
    acquire_timeout: Duration,
}

struct Reader {
    conn: SqliteConnection,
    /// A statement found the connection gone: it is opened again before its next use.
    gone: bool,
}

/// A read connection, free again when dropped.
pub(crate) struct ReadConn {
    // Dropped in this order: the connection is free before the turn to take it passes on.
    reader: OwnedMutexGuard<Reader>,
    _turn: Turn,
}

impl Readers {
    /// Up to `max` connections (at least one); the first opens now, so a bad file fails early.
    pub(super) async fn open(
        options: SqliteConnectOptions,
        max: u32,
        acquire_timeout: Duration,
    ) -> Result<Readers, sqlx::Error> {
        let conn = options.connect().await?;
        let first = Arc::new(Mutex::new(Reader { conn, gone: false }));
        let max = usize::try_from(max.max(1)).unwrap_or(1);
        Ok(Readers {
            options,
            turns: Turns::shared(max),
            connections: std::sync::Mutex::new(vec![first]),
            acquire_timeout,
        })
    }

    /// A free connection for `lane`'s work, waiting at most the acquire timeout (then
    /// `PoolTimedOut`: 503).
    pub(super) async fn acquire(&self, lane: Lane) -> Result<ReadConn, sqlx::Error> {
        let turn = tokio::time::timeout(self.acquire_timeout, self.turns.take(lane))
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?;
        // The first free connection (the first ones stay warm), or a new one.
        let free = self
            .connections()
            .iter()
            .find_map(|c| Arc::clone(c).try_lock_owned().ok());
        let mut reader = match free {
            Some(reader) => reader,
            None => {
                let conn = self.options.connect().await?;
                let reader = Arc::new(Mutex::new(Reader { conn, gone: false }));
                let held = Arc::clone(&reader).lock_owned().await; // nobody else knows it yet
                self.connections().push(reader);
                held
            }
        };
        if reader.gone {
            reader.conn = self.options.connect().await?;
            reader.gone = false;
        }
        Ok(ReadConn {
            reader,
            _turn: turn,
        })
    }

    fn connections(&self) -> std::sync::MutexGuard<'_, Vec<Arc<Mutex<Reader>>>> {
        // Nothing panics while it is held; were it poisoned, the list is still whole.
        self.connections
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl ReadConn {
    /// Has the connection reopened before its next use if `err` says its thread or file is gone.
    pub(super) fn failed(&mut self, err: &sqlx::Error) {
        if matches!(err, sqlx::Error::WorkerCrashed | sqlx::Error::Io(_)) {
            self.reader.gone = true;
        }
    }
}

impl Deref for ReadConn {
    type Target = SqliteConnection;

    fn deref(&self) -> &SqliteConnection {
        &self.reader.conn
    }
}

impl DerefMut for ReadConn {
    fn deref_mut(&mut self) -> &mut SqliteConnection {
        &mut self.reader.conn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    async fn readers(count: u32, timeout: Duration) -> (Readers, std::path::PathBuf) {
        let dir = std::env::temp_dir().join(format!("tauros-readers-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}/r.db?mode=rwc", dir.display());
        let options = SqliteConnectOptions::from_str(&url).unwrap();
        (Readers::open(options, count, timeout).await.unwrap(), dir)
    }

    /// Marks the connection with a temporary table, which only that connection sees.
    async fn mark(conn: &mut SqliteConnection) {
        sqlx::query("create temp table mark (x integer)")
            .execute(conn)
            .await
            .unwrap();
    }

    async fn marked(conn: &mut SqliteConnection) -> bool {
        sqlx::query("select count(*) from temp.mark")
            .execute(conn)
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_read_waits_for_a_free_connection_and_times_out_with_503s_error() {
        let (readers, dir) = readers(2, Duration::from_millis(200)).await;
        let mut first = readers.acquire(Lane::Unattributed).await.unwrap();
        mark(&mut first).await;
        let second = readers.acquire(Lane::Unattributed).await.unwrap();
        let third = readers.acquire(Lane::Unattributed).await;
        assert!(
            matches!(third, Err(sqlx::Error::PoolTimedOut)),
            "both connections in use: the third read times out"
        );
        drop(first);
        let mut again = readers.acquire(Lane::Unattributed).await.unwrap();
        assert!(
            marked(&mut again).await,
            "the connection given back is handed out again, not a new one"
        );
        drop((second, again));
        assert_eq!(
            readers.connections().len(),
            2,
            "opened as needed, up to the bound"
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_read_dropped_mid_stream_leaves_its_connection_usable() {
        let (readers, dir) = readers(1, Duration::from_secs(5)).await;
        let mut conn = readers.acquire(Lane::Unattributed).await.unwrap();
        {
            use futures_util::TryStreamExt;
            let mut rows = sqlx::query_scalar::<_, i64>(
                "with recursive n(x) as (select 1 union all select x + 1 from n where x < 100000)
                 select x from n",
            )
            .fetch(&mut *conn);
            assert_eq!(rows.try_next().await.unwrap(), Some(1));
        } // the stream is dropped with rows left
        drop(conn);
        let mut next = readers.acquire(Lane::Unattributed).await.unwrap();
        let one: i64 = sqlx::query_scalar("select 1")
            .fetch_one(&mut *next)
            .await
            .unwrap();
        assert_eq!(one, 1, "the next holder reads normally");
        drop(next);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[tokio::test]
    async fn a_connection_a_statement_found_gone_is_opened_again_before_its_next_use() {
        let (readers, dir) = readers(1, Duration::from_secs(5)).await;
        let mut conn = readers.acquire(Lane::Unattributed).await.unwrap();
        mark(&mut conn).await;
        conn.failed(&sqlx::Error::Protocol("an ordinary error".into()));
        drop(conn);
        let mut conn = readers.acquire(Lane::Unattributed).await.unwrap();
        assert!(marked(&mut conn).await, "an ordinary error keeps it");
        conn.failed(&sqlx::Error::WorkerCrashed);
        drop(conn);
        let mut conn = readers.acquire(Lane::Unattributed).await.unwrap();
        assert!(!marked(&mut conn).await, "a gone connection was replaced");
        drop(conn);
        let _ = std::fs::remove_dir_all(dir);
    }
}
