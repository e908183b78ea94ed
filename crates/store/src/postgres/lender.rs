//! PostgreSQL's connections as the store lends them to units of work (docs/DECISIONS.md,
//! "PostgreSQL's connections are lent, not pinged on release"): sqlx's pool opens, checks,
//! limits and closes them; the lender takes one back as it is when its last statement finished
//! and no transaction is open on it, sparing sqlx's ping on every release. One that may still
//! hold something (a cancelled or failed statement, an open transaction) goes back through
//! sqlx's release. To keep sqlx's idle ping and lifetime, a connection idle for
//! [`PING_AFTER_IDLE`](super::PING_AFTER_IDLE) or lent for [`LEND_FOR`] returns to sqlx's pool.

use super::PING_AFTER_IDLE;
use crate::turns::{Lane, Turn, Turns};
use sqlx::pool::PoolConnection;
use sqlx::postgres::PgConnectOptions;
use sqlx::{PgConnection, PgPool, Postgres};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A connection given back after this long out of sqlx's pool returns there (pinged, and
/// closed if past its lifetime): one ping per connection per half minute.
const LEND_FOR: Duration = Duration::from_secs(30);

/// The connections of one pool (one host).
pub(super) struct Lender {
    pool: PgPool,
    /// One turn per connection the pool may open, taken by organisation in turn: a holder
    /// takes a free connection or, when none is free, one from sqlx's pool. Free connections
    /// are held without a turn, so a holder that asks sqlx's pool finds room there (see
    /// [`Lender::lend`]).
    turns: Arc<Turns>,
    free: std::sync::Mutex<Free>,
    acquire_timeout: Duration,
}

struct Free {
    /// The most recently given back last.
    conns: Vec<FreeConn>,
    /// The pool moved to another host: connections go back to sqlx's pool, which closes them.
    closed: bool,
}

struct FreeConn {
    conn: PoolConnection<Postgres>,
    since: Instant,
    lent_at: Instant,
}

/// A connection lent to one unit of work, given back when dropped.
pub(super) struct Lease {
    conn: Option<PoolConnection<Postgres>>,
    /// When it left sqlx's pool.
    lent_at: Instant,
    /// A statement started on it and has not finished well.
    busy: bool,
    /// A transaction was begun on it and is not committed.
    open: bool,
    lender: Arc<Lender>,
    turn: Option<Turn>,
}

impl Lender {
    pub(super) fn new(pool: PgPool, max: u32, acquire_timeout: Duration) -> Lender {
        let max = usize::try_from(max.max(1)).unwrap_or(1);
        Lender {
            pool,
            turns: Turns::shared(max),
            free: std::sync::Mutex::new(Free {
                conns: Vec::new(),
                closed: false,
            }),
            acquire_timeout,
        }
    }

    pub(super) fn connect_options(&self) -> Arc<PgConnectOptions> {
        self.pool.connect_options()
    }

    /// A connection: the one given back last if that was within [`PING_AFTER_IDLE`], else
    /// one from sqlx's pool (which pings one idle that long). Waits at most the acquire
    /// timeout, then `PoolTimedOut` (503).
    ///
    /// Why a holder of a turn always finds room in sqlx's pool: connections out of it are
    /// those lent (one per holder) and the free ones, and a free one is only put back by a
    /// holder before its turn passes on and only taken by a holder after it got one, so free
    /// connections never outnumber free turns. A holder that finds none free therefore sees
    /// fewer connections out than the pool's limit.
    pub(super) async fn lend(self: &Arc<Self>, lane: Lane) -> Result<Lease, sqlx::Error> {
        tokio::time::timeout(self.acquire_timeout, self.lend_unbounded(lane))
            .await
            .unwrap_or(Err(sqlx::Error::PoolTimedOut))
    }

    async fn lend_unbounded(self: &Arc<Self>, lane: Lane) -> Result<Lease, sqlx::Error> {
        let turn = self.turns.take(lane).await;
        let (conn, lent_at) = match self.take_recent() {
            Some(free) => (free.conn, free.lent_at),
            None => (self.pool.acquire().await?, Instant::now()),
        };
        Ok(Lease {
            conn: Some(conn),
            lent_at,
            busy: false,
            open: false,
            lender: Arc::clone(self),
            turn: Some(turn),
        })
    }

    /// The connection given back last, if that was within [`PING_AFTER_IDLE`]; if it was
    /// longer ago, every free connection goes back to sqlx's pool (whose release pings it).
    fn take_recent(&self) -> Option<FreeConn> {
        let stale = {
            let mut free = self.free();
            match free.conns.last() {
                None => return None,
                Some(last) if last.since.elapsed() < PING_AFTER_IDLE => return free.conns.pop(),
                Some(_) => std::mem::take(&mut free.conns),
            }
        };
        drop(stale);
        None
    }

    /// Takes back a connection whose statements all finished and which has no transaction
    /// open. One lent for [`LEND_FOR`], or given back to a closed lender, goes to sqlx's pool;
    /// free ones idle for [`PING_AFTER_IDLE`] go there too.
    fn take_back(&self, conn: PoolConnection<Postgres>, lent_at: Instant) {
        if lent_at.elapsed() >= LEND_FOR {
            drop(conn);
            return;
        }
        let stale = {
            let mut free = self.free();
            if free.closed {
                drop(free);
                drop(conn);
                return;
            }
            let stale = free
                .conns
                .iter()
                .take_while(|c| c.since.elapsed() >= PING_AFTER_IDLE)
                .count();
            free.conns.push(FreeConn {
                conn,
                since: Instant::now(),
                lent_at,
            });
            (stale > 0).then(|| free.conns.drain(..stale).collect::<Vec<_>>())
        };
        drop(stale);
    }

    /// The pool moved host: free connections close, lent ones as they return; waits for all.
    pub(super) async fn close(&self) {
        let free = {
            let mut free = self.free();
            free.closed = true;
            std::mem::take(&mut free.conns)
        };
        drop(free);
        self.pool.close().await;
    }

    fn free(&self) -> std::sync::MutexGuard<'_, Free> {
        // Nothing panics while it is held; were it poisoned, the list is still whole.
        self.free
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Lease {
    /// The connection, for a statement: until [`Lease::settled`] it counts as busy, so if the
    /// lease is dropped first (the statement was cancelled or failed) it goes back through
    /// sqlx's release, which drains it or closes it.
    pub(super) fn conn(&mut self) -> &mut PgConnection {
        self.busy = true;
        match self.conn.as_mut() {
            Some(conn) => conn,
            // Only `drop` takes the connection out.
            None => unreachable!("a lease holds its connection until dropped"),
        }
    }

    /// The statement begun with [`Lease::conn`] finished well.
    pub(super) fn settled(&mut self) {
        self.busy = false;
    }

    /// Begins a transaction; dropped before [`Lease::commit`], it is rolled back.
    pub(super) async fn begin(&mut self) -> Result<(), sqlx::Error> {
        self.open = true;
        sqlx::raw_sql("begin").execute(self.conn()).await?;
        self.settled();
        Ok(())
    }

    pub(super) async fn commit(&mut self) -> Result<(), sqlx::Error> {
        sqlx::raw_sql("commit").execute(self.conn()).await?;
        self.open = false;
        self.settled();
        Ok(())
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        // The turn passes on after the connection returns: free connections never outnumber
        // free turns (see `Lender::lend`).
        let turn = self.turn.take();
        if !self.open {
            if self.busy {
                drop(conn); // sqlx's release pings: drains what is left, or closes it
            } else {
                self.lender.take_back(conn, self.lent_at);
            }
            drop(turn);
            return;
        }
        // A transaction left open (an error, or a request gone mid-way) is rolled back before
        // the connection is used again, on a task, as sqlx does with a dropped transaction;
        // the turn is held until then.
        let lender = Arc::clone(&self.lender);
        let lent_at = self.lent_at;
        tokio::spawn(async move {
            let rollback = sqlx::raw_sql("rollback").execute(&mut *conn);
            let rolled_back = matches!(
                tokio::time::timeout(lender.acquire_timeout, rollback).await,
                Ok(Ok(_))
            );
            if rolled_back {
                lender.take_back(conn, lent_at);
            } else {
                // Gone or stuck: closed, and the server rolls back with it.
                conn.close_on_drop();
                drop(conn);
            }
            drop(turn);
        });
    }
}
