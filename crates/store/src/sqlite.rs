//! The SQLite adapter: the embedded default. WAL, `synchronous=FULL`, and one writer.
//!
//! SQLite admits one writer at a time, so every write unit of work runs on one connection,
//! and reads run on their own pool (WAL: readers never wait for the writer, nor it for them).
//! Writers queue in tokio for that connection, and the writer commits by **group commit**: a
//! unit that finishes while others are queued does not commit alone. Its work is released
//! into a shared transaction (each unit runs inside its own `SAVEPOINT`, so one unit's failure
//! rolls back only itself) and the next queued unit continues in the same transaction; the
//! last unit of the group (nobody queued, or [`MAX_GROUP`] units reached) commits once, and
//! every unit of the group is answered only after that commit. One `fsync` then covers many
//! units, and no caller is told "done" before its write is durable. If the shared commit
//! fails, every unit of the group gets the error (none was acknowledged; all are safe to
//! retry).

use super::sql::stmt::Binds;
use super::sql::{Backend, Decoded, Stmt, classify_other, execute, fetch_all, fetch_optional};
use crate::error::{Constraint, StoreError, StoreResult};
use crate::jobs::{Claim, JobRow};
use crate::unit::{Reader, Store, Tx};
use async_trait::async_trait;
use futures_util::TryStreamExt;
use sqlx::sqlite::{
    SqliteArguments, SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqliteRow,
    SqliteSynchronous,
};
use sqlx::{AssertSqlSafe, Connection, Either, Executor, Sqlite};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, Notify, OwnedMutexGuard, watch};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// Units of work one shared commit covers at most, so one group's latency stays bounded.
pub const MAX_GROUP: usize = 64;

/// Each reader's page cache, in KiB (SQLite's default is 2,000 KiB per connection). The OS
/// page cache holds the file anyway; this keeps a wide read pool's memory bounded.
const READER_CACHE_KIB: i64 = 512;

/// Statements a write unit holds back ([`Later`]) before it sends them without waiting for a
/// read: the held text stays short, and so does the writer's statement cache.
const MAX_LATER: usize = 4;

/// Prepared statements each reader keeps (sqlx's default is 100): the hot reads are a
/// handful, and every cached statement holds SQLite memory per connection.
const READER_STATEMENTS: usize = 24;

mod readers;

use readers::{ReadConn, Readers};

/// A pool of connections to one SQLite database file.
pub struct SqliteStore {
    /// Reads, and units of work that only read.
    readers: Readers,
    /// The one connection that writes, with its group commit.
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
        // Its savepoints' journal stays in memory: on a file, every unit's first write to
        // each page it touches was a write system call (the journal passes 64 KiB a unit).
        // The journal holds one unit's pages at a time (see `begin_here`).
        let writer =
            SqliteConnection::connect_with(&options.clone().pragma("temp_store", "memory")).await?;
        // Not sqlx's pool, which pings each connection on its thread as it is released
        // (`readers.rs`).
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

    /// How many shared commits the writer has made and how many units they covered (the
    /// group-commit figures `scripts/bench` and the tests read).
    pub fn group_commits(&self) -> (u64, u64) {
        self.writer.stats()
    }
}

/// The single writer connection and its group commit.
#[derive(Clone)]
struct Writer {
    slot: Arc<Mutex<Slot>>,
    /// Units waiting for the connection: while there are any, a finished unit leaves the
    /// shared transaction open for them instead of committing.
    queued: Arc<AtomicUsize>,
    /// Shared commits made, and units they covered.
    commits: Arc<[std::sync::atomic::AtomicU64; 2]>,
}

/// What the holder of the writer owns.
struct Slot {
    conn: SqliteConnection,
    /// The shared transaction, while one is open.
    group: Option<Group>,
    /// Savepoints opened in the shared transaction: the last unit's is
    /// `savepoint_name(savepoints)`.
    savepoints: u64,
    /// How the last unit ended, while its savepoint is still open.
    last: Option<Ended>,
}

/// How a unit left the writer, its savepoint still open for the next holder to end.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Ended {
    /// Finished well: the next unit releases the savepoint in the call that opens its own
    /// (one call to the connection's thread instead of two), or the shared COMMIT ends it.
    Well,
    /// Dropped without committing (an error path): the next holder rolls the savepoint back
    /// before anything else runs.
    Abandoned,
    /// Dropped while the call that opens its savepoint was under way (a request cancelled in
    /// its first statement): the savepoint may or may not be open, and the next holder finds
    /// out as it rolls it back (see [`Slot::settle`]).
    Unsure,
}

/// How a unit's savepoint is opened, when it joins an open shared transaction.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Opening {
    /// In a call of its own, as the unit begins (the job claim, whose statements bypass the
    /// held ones, and the tests of the group commit).
    Now,
    /// Held, and sent with the unit's first call: one call to the connection's thread fewer.
    WithFirstCall,
}

/// Where a unit's savepoint stands.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Savepoint {
    /// Open.
    Open,
    /// Held in the unit's [`Later`], not yet sent; `after` is how the unit before it ended,
    /// which stands again if this one never sends it.
    Held { after: Option<Ended> },
    /// Sent, and the call has not come back.
    Sent,
}

/// One open shared transaction.
struct Group {
    /// Units released into it, waiting for its commit.
    released: usize,
    /// Whether any of them enqueued a job (wake the workers after the commit).
    wake: bool,
    /// The commit's outcome, for the released units: `None` until it is known, then `Ok` or
    /// the error's text.
    outcome: watch::Sender<Option<Result<(), String>>>,
}

/// Counts a unit as queued for the writer while it waits; if it gives up waiting (its
/// request was cancelled), it makes sure a shared transaction others were released into,
/// counting on it to continue, still gets committed.
struct Queued {
    writer: Writer,
    acquired: bool,
}

impl Queued {
    fn new(writer: &Writer) -> Queued {
        writer.queued.fetch_add(1, Ordering::SeqCst);
        Queued {
            writer: writer.clone(),
            acquired: false,
        }
    }
}

impl Drop for Queued {
    fn drop(&mut self) {
        self.writer.queued.fetch_sub(1, Ordering::SeqCst);
        if !self.acquired {
            self.writer.close_when_idle();
        }
    }
}

impl Writer {
    fn new(conn: SqliteConnection) -> Writer {
        Writer {
            slot: Arc::new(Mutex::new(Slot {
                conn,
                group: None,
                savepoints: 0,
                last: None,
            })),
            queued: Arc::new(AtomicUsize::new(0)),
            commits: Arc::new([
                std::sync::atomic::AtomicU64::new(0),
                std::sync::atomic::AtomicU64::new(0),
            ]),
        }
    }

    fn stats(&self) -> (u64, u64) {
        (
            self.commits[0].load(Ordering::Relaxed),
            self.commits[1].load(Ordering::Relaxed),
        )
    }

    /// The writer connection, once every earlier holder is done with it. A unit abandoned by
    /// the last holder is rolled back first.
    async fn hold(&self) -> StoreResult<OwnedMutexGuard<Slot>> {
        let mut queued = Queued::new(self);
        let mut guard = Arc::clone(&self.slot).lock_owned().await;
        queued.acquired = true;
        drop(queued);
        guard.settle().await?;
        Ok(guard)
    }

    /// Starts a unit: joins the open shared transaction, or opens one. Runs on a task of its
    /// own, so a caller dropped while it waits (a request cancelled, a job stopped by its
    /// lease, a heartbeat bounded by it) cannot leave the writer between `BEGIN IMMEDIATE`
    /// and its bookkeeping: the begun unit is then dropped like any abandoned one (its
    /// savepoint rolled back, the shared transaction closed when idle). A `BEGIN` whose future
    /// was dropped still runs on the connection's thread, and would otherwise leave a
    /// transaction no one knows of, holding the file's write lock.
    async fn begin(&self) -> StoreResult<WriteUnit> {
        self.begin_opening(Opening::Now).await
    }

    /// [`Writer::begin`], a unit that joins an open group opening its savepoint as `opening`
    /// says (the first unit of a group always opens the transaction and its savepoint here).
    async fn begin_opening(&self, opening: Opening) -> StoreResult<WriteUnit> {
        let writer = self.clone();
        tokio::spawn(async move { writer.begin_here(opening).await })
            .await
            .map_err(|e| StoreError::Other(sqlx::Error::Protocol(format!("begin: {e}"))))?
    }

    async fn begin_here(&self, opening: Opening) -> StoreResult<WriteUnit> {
        let mut slot = self.hold().await?;
        let mut later = Later::default();
        let mut savepoint = Savepoint::Open;
        if slot.group.is_none() {
            // The transaction and the first unit's savepoint in one call to the connection's
            // thread.
            slot.savepoints = 1;
            if let Err(e) = sqlx::raw_sql("BEGIN IMMEDIATE; SAVEPOINT odd")
                .execute(&mut slot.conn)
                .await
            {
                // Should the savepoint fail after BEGIN, no transaction may stay open.
                let _ = sqlx::raw_sql("ROLLBACK").execute(&mut slot.conn).await;
                return Err(map_err(e));
            }
            slot.group = Some(Group {
                released: 0,
                wake: false,
                outcome: watch::channel(None).0,
            });
        } else {
            // The last unit's savepoint is released here, with this unit's opened, so at most
            // one is open and SQLite keeps one unit's journal at a time.
            let after = slot.last.take();
            let release = match after {
                Some(Ended::Well) => format!("RELEASE {}", savepoint_name(slot.savepoints)),
                _ => String::new(), // an abandoned one was rolled back by `hold`
            };
            slot.savepoints += 1;
            let open = format!("SAVEPOINT {}", savepoint_name(slot.savepoints));
            match opening {
                Opening::Now if release.is_empty() => slot.run_in_group(open).await?,
                Opening::Now => slot.run_in_group(format!("{release}; {open}")).await?,
                Opening::WithFirstCall => {
                    for statement in [release, open].iter().filter(|s| !s.is_empty()) {
                        later.push_opening(statement);
                    }
                    savepoint = Savepoint::Held { after };
                }
            }
        }
        Ok(WriteUnit {
            slot,
            writer: self.clone(),
            ended: false,
            later,
            savepoint,
            failed: false,
        })
    }

    /// Commits the open shared transaction if nobody is queued to continue it: called when a
    /// holder leaves without committing or waiting, so released units are never stranded.
    fn close_when_idle(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return; // the process is ending: an uncommitted transaction rolls back
        };
        let writer = self.clone();
        runtime.spawn(async move {
            if writer.queued.load(Ordering::SeqCst) > 0 {
                return; // the next holder continues (and closes) the group
            }
            if let Ok(mut slot) = writer.hold().await
                && writer.queued.load(Ordering::SeqCst) == 0
            {
                let _ = slot.commit_group(&writer, 0).await;
            }
        });
    }
}

impl Slot {
    /// Runs savepoint statements of the open shared transaction. If they fail, the savepoint
    /// is gone: SQLite rolled the whole transaction back itself (a full disk, an I/O error),
    /// and everything released into it is lost and must be told so.
    async fn run_in_group(&mut self, statements: String) -> StoreResult<()> {
        if let Err(e) = sqlx::raw_sql(AssertSqlSafe(statements))
            .execute(&mut self.conn)
            .await
        {
            let e = map_err(e);
            self.fail_group(&e).await;
            return Err(e);
        }
        Ok(())
    }

    /// Rolls back a unit the last holder abandoned (only its own savepoint).
    async fn settle(&mut self) -> StoreResult<()> {
        let unsure = match self.last {
            Some(Ended::Abandoned) => false,
            Some(Ended::Unsure) => true,
            _ => return Ok(()),
        };
        self.last = None;
        let name = savepoint_name(self.savepoints);
        let rollback = format!("ROLLBACK TO {name}; RELEASE {name}");
        match sqlx::raw_sql(AssertSqlSafe(rollback))
            .execute(&mut self.conn)
            .await
        {
            Ok(_) => {}
            // The cancelled call never opened it, so nothing after the opening ran either
            // (the statements of a call run in order, and stop when its caller is gone). The
            // savepoint before it, the previous unit's (finished well), may still be open:
            // it is released here, so that at most one is ever left open between units.
            Err(e) if unsure && no_such_savepoint(&e) => {
                let release = format!("RELEASE {}", savepoint_name(self.savepoints - 1));
                match sqlx::raw_sql(AssertSqlSafe(release))
                    .execute(&mut self.conn)
                    .await
                {
                    Ok(_) => {}
                    Err(e) if no_such_savepoint(&e) => {} // the cancelled call released it
                    Err(e) => {
                        let e = map_err(e);
                        self.fail_group(&e).await;
                        return Err(e);
                    }
                }
            }
            Err(e) => {
                let e = map_err(e);
                self.fail_group(&e).await;
                return Err(e);
            }
        }
        if self.group.as_ref().is_some_and(|g| g.released == 0) {
            // Nothing was released into this transaction: end it (a holder that needs one
            // opens a fresh one), so SQLite's write lock is not held for nobody.
            self.group = None;
            if let Err(e) = sqlx::query("ROLLBACK").execute(&mut self.conn).await {
                return Err(map_err(e));
            }
        }
        Ok(())
    }

    /// Commits the shared transaction and tells every unit released into it; `own` is 1 when
    /// the committer is itself a unit of the group. `Ok(true)`: some unit enqueued a job.
    async fn commit_group(&mut self, writer: &Writer, own: u64) -> StoreResult<bool> {
        let Some(group) = self.group.take() else {
            return Ok(false);
        };
        self.last = None; // COMMIT ends the savepoints with the transaction
        match sqlx::query("COMMIT").execute(&mut self.conn).await {
            Ok(_) => {
                let units = group.released as u64 + own;
                writer.commits[0].fetch_add(1, Ordering::Relaxed);
                writer.commits[1].fetch_add(units, Ordering::Relaxed);
                metrics::counter!("tauros_sqlite_group_commits_total").increment(1);
                metrics::counter!("tauros_sqlite_group_commit_units_total").increment(units);
                group.outcome.send_replace(Some(Ok(())));
                Ok(group.wake)
            }
            Err(e) => {
                let e = map_err(e);
                let _ = sqlx::query("ROLLBACK").execute(&mut self.conn).await;
                group.outcome.send_replace(Some(Err(e.to_string())));
                Err(e)
            }
        }
    }

    /// Rolls the shared transaction back and tells every unit released into it that its
    /// work is lost.
    async fn fail_group(&mut self, error: &StoreError) {
        self.last = None;
        if let Some(group) = self.group.take() {
            let _ = sqlx::query("ROLLBACK").execute(&mut self.conn).await;
            group.outcome.send_replace(Some(Err(error.to_string())));
        }
    }
}

/// The name of the shared transaction's `n`th savepoint: two names, alternating. At most two
/// savepoints are open at once (the last unit's, finished well, until the next unit's opening
/// releases it), and two names tell them apart. A unit's opening goes in one text with its
/// first statement, which sqlx prepares and caches by its text: numbered names (`u1` … `u64`)
/// made one text per place in the group, more than the writer's statement cache holds (it
/// re-prepared them, and the cached ones took memory).
fn savepoint_name(n: u64) -> &'static str {
    if n % 2 == 1 { "odd" } else { "even" }
}

/// SQLite's answer to a `ROLLBACK TO` or `RELEASE` of a savepoint that is not open.
fn no_such_savepoint(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|db| db.message().starts_with("no such savepoint"))
}

/// A write unit of work on the writer: a savepoint inside the shared transaction.
pub(super) struct WriteUnit {
    /// The writer, held until the unit ends.
    slot: OwnedMutexGuard<Slot>,
    writer: Writer,
    /// Committed (or failed with its group): dropping it then only lets the writer go.
    ended: bool,
    /// Statements held back to go with the unit's next call (dropped with an abandoned unit).
    later: Later,
    /// Whether the unit's savepoint is open yet.
    savepoint: Savepoint,
    /// A held statement failed (see [`WriteUnit::run_after_later`]).
    failed: bool,
}

impl WriteUnit {
    fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.slot.conn
    }

    /// Runs `stmt` after the statements held back, in one call to the connection's thread.
    /// If the unit's savepoint was held and its opening fails, the shared transaction is
    /// gone (SQLite rolled it back itself, as in [`Slot::run_in_group`]): the group fails.
    ///
    /// A held statement that fails fails the unit for good: its caller believes it written,
    /// so every later call and the commit answer that the unit's work is lost, even if the
    /// caller handles the error of the call that reported it (a conflict it answers).
    async fn run_after_later<'q>(
        &mut self,
        stmts: impl IntoIterator<Item = Stmt<'q>>,
        want: Want,
    ) -> StoreResult<Ran> {
        if self.failed {
            return Err(crate::durable::lost("a statement of this unit failed"));
        }
        let mut later = std::mem::take(&mut self.later);
        let (opens, held) = (later.opens, later.statements);
        for stmt in stmts {
            if let Err(e) = later.push(stmt) {
                self.failed = true; // nothing was sent; the held statements are gone
                return Err(map_err(e));
            }
        }
        if opens > 0 {
            self.savepoint = Savepoint::Sent;
        }
        let ran = later.run(&mut self.slot.conn, held, want).await;
        match ran {
            Err((e, done)) if done < opens => {
                let e = map_err(e);
                self.slot.fail_group(&e).await;
                self.ended = true; // failed with its group
                Err(e)
            }
            Err((e, done)) => {
                self.savepoint = Savepoint::Open;
                self.failed |= done < held;
                Err(map_err(e))
            }
            Ok(ran) => {
                self.savepoint = Savepoint::Open;
                Ok(ran)
            }
        }
    }

    /// The unit made no call: its savepoint was never opened, and the writer stands as the
    /// unit before it left it.
    fn never_opened(&mut self, after: Option<Ended>) {
        self.later = Later::default();
        self.slot.savepoints -= 1;
        self.slot.last = after;
    }

    /// Releases the unit into the shared transaction, then commits it (if nobody is queued
    /// or the group is full) or waits for the holder that does. `Ok(true)`: committed, and
    /// some unit of the group enqueued a job.
    async fn commit(mut self, wake: bool) -> StoreResult<bool> {
        if self.failed {
            return Err(crate::durable::lost("a statement of this unit failed"));
        }
        if let Savepoint::Held { after } = self.savepoint
            && self.later.statements == self.later.opens
        {
            self.never_opened(after); // nothing to open a savepoint for
        } else {
            if !self.later.is_empty() {
                // Fails the unit (dropped unended: its savepoint is rolled back) if they fail.
                self.run_after_later(None, Want::Count).await?;
            }
            // The savepoint stays open: the next unit releases it as it begins, or the shared
            // COMMIT ends it with the transaction. Until then nothing can roll it back (an
            // abandoned later unit rolls back to its own savepoint, opened after this one
            // ended).
            self.slot.last = Some(Ended::Well);
        }
        self.ended = true;
        let queued = self.writer.queued.load(Ordering::SeqCst);
        let Some(group) = self.slot.group.as_mut() else {
            return Err(StoreError::Other(sqlx::Error::Protocol(
                "a write unit outlived its transaction".into(),
            )));
        };
        group.wake |= wake;
        if queued == 0 || group.released + 1 >= MAX_GROUP {
            let writer = self.writer.clone();
            return self.slot.commit_group(&writer, 1).await;
        }
        group.released += 1;
        let mut outcome = group.outcome.subscribe();
        drop(self); // the next queued unit continues the shared transaction
        let result = outcome
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|o| o.clone());
        match result {
            // The committer wakes the workers for the whole group.
            Some(Ok(())) => Ok(false),
            Some(Err(message)) => Err(crate::durable::lost(&message)),
            None => Err(crate::durable::lost("the shared commit was abandoned")),
        }
    }
}

impl Drop for WriteUnit {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // A replay, a refusal or an error path dropped the unit: the next holder rolls its
        // savepoint back; if nobody is queued, a task does it and commits what others
        // released. If others were released before it, it may have read their writes: its
        // answer waits for their commit (`store::when_durable`).
        if let Some(group) = self.slot.group.as_ref().filter(|g| g.released > 0) {
            crate::durable::answer_after(group.outcome.subscribe());
        }
        match self.savepoint {
            Savepoint::Open => self.slot.last = Some(Ended::Abandoned),
            Savepoint::Held { after } => self.never_opened(after),
            Savepoint::Sent => self.slot.last = Some(Ended::Unsure),
        }
        self.writer.close_when_idle();
    }
}

/// Statements of a write unit run for their effect alone ([`Backend::execute_later`]), held
/// back to go at the start of the unit's next call to the connection's thread, or with its
/// commit: one hand-off (two thread wake-ups) instead of one per statement. sqlx's SQLite
/// driver runs a text of several statements as one call, binding each statement's numbered
/// parameters from one shared list; so each held statement's `$n` is renumbered past the
/// arguments of the statements before it. (sqlx documents this as its SQLite driver's own and
/// deprecated for `query`; it is pinned by the lockfile and by the tests in this file, which
/// fail should an upgrade drop it: docs/DECISIONS.md, "SQLite group commit".)
#[derive(Default)]
struct Later {
    sql: String,
    args: SqliteArguments,
    statements: usize,
    /// The first `opens` statements open the unit's savepoint (`RELEASE`, `SAVEPOINT`).
    opens: usize,
}

/// What a call that ran held statements returns of its last statement.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Want {
    /// Its first row only (the call stops reading there).
    First,
    /// All its rows.
    All,
    /// The rows it changed.
    Count,
    /// The first row of each statement after the held ones (selects read together).
    Each,
}

/// The last statement's rows and count; for [`Want::Each`], each statement's first row.
#[derive(Default)]
struct Ran {
    rows: Vec<SqliteRow>,
    changed: u64,
    firsts: Vec<Option<SqliteRow>>,
}

impl Later {
    fn is_empty(&self) -> bool {
        self.statements == 0
    }

    /// Appends a statement of the unit's opening (no parameters; before any other).
    fn push_opening(&mut self, statement: &str) {
        self.sql.push_str(statement);
        self.sql.push_str(";\n");
        self.statements += 1;
        self.opens += 1;
    }

    /// Appends `stmt`, its parameters renumbered after those held before it.
    fn push(&mut self, stmt: Stmt<'_>) -> Result<(), sqlx::Error> {
        let (sql, args) = stmt.into_parts();
        renumber(&sql, sqlx::Arguments::len(&self.args), &mut self.sql);
        self.sql.push_str(";\n");
        <Sqlite as Binds>::add_all(&mut self.args, args).map_err(sqlx::Error::Encode)?;
        self.statements += 1;
        Ok(())
    }

    /// Runs the statements in one call; what `want` asks of the last one after the first
    /// `held`. A held statement that returns a row is a misuse, reported as an error. An error
    /// comes with how many statements had finished before it.
    async fn run(
        self,
        conn: &mut SqliteConnection,
        held: usize,
        want: Want,
    ) -> Result<Ran, (sqlx::Error, usize)> {
        let mut ran = Ran::default();
        if want == Want::Each {
            ran.firsts = (held..self.statements).map(|_| None).collect();
        }
        let mut steps = conn.fetch_many(sqlx::query_with(AssertSqlSafe(self.sql), self.args));
        let mut done = 0;
        while let Some(step) = steps.try_next().await.map_err(|e| (e, done))? {
            match step {
                Either::Left(result) => {
                    done += 1;
                    ran.changed = result.rows_affected();
                }
                Either::Right(_) if done < held => {
                    let misuse = "a statement run later returned a row";
                    return Err((sqlx::Error::Protocol(misuse.into()), done));
                }
                Either::Right(row) if want == Want::Each => {
                    if let Some(first) = ran.firsts.get_mut(done - held)
                        && first.is_none()
                    {
                        *first = Some(row);
                    }
                }
                Either::Right(row) => {
                    ran.rows.push(row);
                    if want == Want::First {
                        break;
                    }
                }
            }
        }
        Ok(ran)
    }
}

/// Appends `sql` to `out`, each parameter `$n` outside a quoted literal written `$(n + by)`.
fn renumber(sql: &str, by: usize, out: &mut String) {
    if by == 0 {
        out.push_str(sql);
        return;
    }
    let mut quoted = false;
    let mut rest = sql;
    while let Some(at) = rest.find(['\'', '$']) {
        out.push_str(&rest[..at]);
        let (mark, after) = rest[at..].split_at(1);
        out.push_str(mark);
        rest = after;
        if mark == "'" {
            quoted = !quoted; // an escaped quote ('') toggles twice
            continue;
        }
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if quoted || digits == 0 {
            continue;
        }
        let n: usize = rest[..digits].parse().unwrap_or(0);
        out.push_str(&(n + by).to_string());
        rest = &rest[digits..];
    }
    out.push_str(rest);
}

/// A unit's connection: a read-pool connection, or the writer.
pub(super) enum UnitConn {
    Read(ReadConn),
    Write(WriteUnit),
}

impl UnitConn {
    /// Classifies a statement's error; a read connection it shows gone is replaced before
    /// its next use.
    fn failed(&mut self, err: sqlx::Error) -> StoreError {
        if let UnitConn::Read(conn) = self {
            conn.failed(&err);
        }
        map_err(err)
    }

    pub(super) fn conn(&mut self) -> &mut SqliteConnection {
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

/// One unit of work: a transaction on the writer (as [`Tx`]) or a read-pool connection (as
/// [`Reader`]), and whether to wake idle workers once it commits.
pub(super) struct SqliteUnit(UnitConn, Wake);

/// An in-process wake-up, fired only after the transaction that made work available commits
/// (a worker woken earlier would find nothing, or not yet see the row).
pub(super) struct Wake {
    notify: Option<Arc<Notify>>,
    pending: bool,
}

/// SQLite names the columns, not the constraint: map them back to the constraint.
fn constraint_from_message(message: &str) -> Option<Constraint> {
    let columns = message.strip_prefix("UNIQUE constraint failed: ")?;
    Constraint::ALL
        .into_iter()
        .find(|c| c.sqlite_columns() == columns)
}

fn map_err(err: sqlx::Error) -> StoreError {
    if let Some(db) = err.as_database_error() {
        if let Some(constraint) = constraint_from_message(db.message()) {
            return StoreError::Conflict(constraint);
        }
        // SQLITE_CONSTRAINT_FOREIGNKEY
        if db.code().as_deref() == Some("787") {
            return StoreError::ReferenceGone(err);
        }
        // Retryable, by primary result code (the low byte of the extended code): SQLITE_BUSY
        // (5) and SQLITE_LOCKED (6) after the busy timeout, SQLITE_IOERR (10) and SQLITE_FULL
        // (13, a full disk). Nothing was committed; the client may try again later.
        let primary = db
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .map(|c| c & 0xff);
        if matches!(primary, Some(5 | 6 | 10 | 13)) {
            return StoreError::Unavailable(err);
        }
        // SQLITE_FULL (13) and the SQLITE_IOERR family (10, extended codes 10 + 256·n): the
        // disk is full or failing; nothing was written, the same request may be retried
        // once it has space again (503, not 500).
        if let Some(code) = db.code().and_then(|c| c.parse::<i64>().ok())
            && (code == 13 || code & 0xff == 10)
        {
            return StoreError::Unavailable(err);
        }
    }
    classify_other(err)
}

async fn wake_after_commit(unit: &mut SqliteUnit) -> StoreResult<()> {
    unit.1.pending = true;
    Ok(())
}

// No row locks: the single writer connection already serializes every write transaction. A
// sanctioned reap is a row of `effect_claim_reaps` that exists only inside the reaping
// transaction (the single writer keeps everyone else out meanwhile).
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

    // One call to the connection's thread for all of them (and for any held statements
    // before them): sqlx runs a text of several statements as one.
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
        let SqliteUnit(conn, wake) = *self;
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

    // The writer runs one unit at a time, from its first statement to its end.
    fn writes_alone(&self) -> bool {
        matches!(self.0, UnitConn::Write(_))
    }
}

#[async_trait]
impl Store for SqliteStore {
    async fn begin(&self) -> StoreResult<Box<dyn Tx>> {
        let unit = self.writer.begin_opening(Opening::WithFirstCall).await?;
        let wake = Wake {
            notify: Some(Arc::clone(&self.wake)),
            pending: false,
        };
        Ok(Box::new(SqliteUnit(UnitConn::Write(unit), wake)))
    }

    async fn reader(&self) -> StoreResult<Box<dyn Reader>> {
        let conn = self.readers.acquire().await.map_err(map_err)?;
        let wake = Wake {
            notify: None,
            pending: false,
        };
        Ok(Box::new(SqliteUnit(UnitConn::Read(conn), wake)))
    }

    async fn migrate(&self) -> StoreResult<()> {
        // Between groups: no unit is open while the schema changes.
        let mut slot = self.writer.hold().await?;
        slot.commit_group(&self.writer, 0).await?;
        MIGRATOR
            .run_direct(None, &mut slot.conn, false)
            .await
            .map_err(|e| StoreError::Other(e.into()))
    }

    async fn readiness(&self) -> StoreResult<bool> {
        let mut conn = self.readers.acquire().await.map_err(map_err)?;
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

// Backend-only statements. What SQLite does its own way (the job queue claims inside the single
// writer, an in-process notify for wake-ups) is written here, behind the port's `Store` methods
// the PostgreSQL adapter implements too.

/// The database's clock in the text a bound `DateTime<Utc>` is stored as (sqlx writes RFC 3339
/// with `+00:00` and as many fraction digits as needed: none, 3, 6 or 9). SQLite's clock has
/// milliseconds, so its time is `YYYY-MM-DDTHH:MM:SS.sss+00:00`, without `.000`: the same text
/// sqlx writes for that instant, so text comparisons with stored times order correctly.
const NOW: &str = "replace(strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), '.000+', '+')";

/// [`NOW`] plus the milliseconds bound at `param` (a modifier such as `1.5 seconds`).
fn now_plus_ms(param: &str) -> String {
    format!(
        "replace(strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', ({param} / 1000.0) || ' seconds'), \
         '.000+', '+')"
    )
}

/// Claims as a write unit on the single writer: claimers are serialized, so no two get the
/// same job (also across processes, which meet at SQLite's write lock), and the running jobs a
/// claim counts in a lane cannot change under it.
///
/// Fair across organisations (docs/JOBS.md, "Fairness"): the organisations with waiting jobs
/// are found by a skip scan over `jobs_fair_idx` (one probe per organisation, whatever its
/// backlog), then each one's earliest due job of each kind; the job of the organisation whose
/// turn in this pool is oldest is taken, and its turn moved to now. The skip scan names its
/// index: left to itself, SQLite walks `jobs_org_state_idx`, which also holds finished jobs.
async fn claim_job(mut unit: WriteUnit, claim: &Claim<'_>) -> StoreResult<Option<JobRow>> {
    let kinds = serde_json::to_string(claim.kinds)
        .map_err(|e| StoreError::Other(sqlx::Error::Encode(Box::new(e))))?;
    let next: Option<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
        "with recursive orgs (org_id) as (
             select (select org_id from jobs indexed by jobs_fair_idx
                     where state in ('available', 'scheduled', 'retryable')
                     order by org_id limit 1)
             union all
             select (select j.org_id from jobs j indexed by jobs_fair_idx
                     where j.state in ('available', 'scheduled', 'retryable')
                       and j.org_id > orgs.org_id
                     order by j.org_id limit 1)
             from orgs where orgs.org_id is not null
         ),
         heads as materialized (
             select o.org_id,
                 (select j.id from jobs j
                  where j.org_id = o.org_id and j.kind = k.value
                    and j.state in ('available', 'scheduled', 'retryable') and j.run_at <= $1
                    and (j.lane is null or $4 is null
                         or (select count(*) from jobs r
                             where r.org_id = j.org_id and r.lane = j.lane
                               and r.state = 'running' and r.lane is not null) < $4)
                  order by j.run_at, j.id
                  limit 1) as id
             from orgs o, json_each($2) k
             where o.org_id is not null
         )
         select h.id, h.org_id from heads h
         join jobs j on j.org_id = h.org_id and j.id = h.id
         left join job_turns t on t.org_id = h.org_id and t.pool = $3
         where h.id is not null
         order by t.last_claimed_at is not null, t.last_claimed_at, j.run_at, j.id
         limit 1",
    )
    .bind(claim.now)
    .bind(kinds)
    .bind(claim.pool)
    .bind(claim.lane_limit)
    .fetch_optional(unit.conn())
    .await
    .map_err(map_err)?;
    let Some((id, org_id)) = next else {
        unit.commit(false).await?;
        return Ok(None);
    };
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "update jobs set state = 'running', lease_token = $3, lease_expires_at = {until},
             worker = $5, executions = executions + 1, started_at = $1, updated_at = $1
         where org_id = $6 and id = $2
         returning *",
        until = now_plus_ms("$4"),
    )))
    .bind(claim.now)
    .bind(id)
    .bind(claim.lease_token)
    .bind(crate::sql::millis(claim.lease))
    .bind(claim.worker)
    .bind(org_id)
    .fetch_optional(unit.conn())
    .await
    .map_err(map_err)?;
    sqlx::query(
        "insert into job_turns (org_id, pool, last_claimed_at) values ($1, $2, $3)
         on conflict (org_id, pool) do update set last_claimed_at = excluded.last_claimed_at",
    )
    .bind(org_id)
    .bind(claim.pool)
    .bind(claim.now)
    .execute(unit.conn())
    .await
    .map_err(map_err)?;
    unit.commit(false).await?;
    Ok(row)
}

#[cfg(test)]
mod tests {
    //! The group commit, driven through real write units on a real database file.

    use super::*;

    struct Db {
        store: SqliteStore,
        dir: std::path::PathBuf,
    }

    impl Drop for Db {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    async fn db() -> Db {
        let dir = std::env::temp_dir().join(format!("tauros-group-{}", uuid::Uuid::new_v4()));
        std::fs::create_dir_all(&dir).unwrap();
        let url = format!("sqlite://{}/g.db?mode=rwc", dir.display());
        let store = SqliteStore::connect(&url, 4).await.unwrap();
        let mut unit = store.writer.begin().await.unwrap();
        sqlx::query("create table t (x integer primary key)")
            .execute(unit.conn())
            .await
            .unwrap();
        unit.commit(false).await.unwrap();
        Db { store, dir }
    }

    async fn insert(unit: &mut WriteUnit, x: i64) -> Result<(), sqlx::Error> {
        sqlx::query("insert into t (x) values ($1)")
            .bind(x)
            .execute(unit.conn())
            .await
            .map(|_| ())
    }

    /// What a fresh read (another connection: only committed rows) sees.
    async fn committed(store: &SqliteStore) -> Vec<i64> {
        sqlx::query_scalar("select x from t order by x")
            .fetch_all(&mut *store.readers.acquire().await.unwrap())
            .await
            .unwrap()
    }

    /// Waits until `n` units are queued for the writer.
    async fn queued(store: &SqliteStore, n: usize) {
        while store.writer.queued.load(Ordering::SeqCst) < n {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn parallel_units_share_commits_and_a_failing_unit_rolls_back_only_itself() {
        let db = db().await;
        let before = db.store.group_commits();
        let store = Arc::new(db.store.writer.clone());
        let mut tasks = Vec::new();
        for x in 0..64_i64 {
            let writer = Arc::clone(&store);
            tasks.push(tokio::spawn(async move {
                let mut unit = writer.begin().await.unwrap();
                insert(&mut unit, x).await.unwrap();
                if x % 8 == 7 {
                    // A unit that fails after writing: dropped, as an error path drops it.
                    insert(&mut unit, x).await.unwrap_err();
                    return false;
                }
                insert(&mut unit, 1000 + x).await.unwrap();
                unit.commit(false).await.unwrap();
                true
            }));
        }
        let mut committed_units = 0;
        for task in tasks {
            committed_units += u64::from(task.await.unwrap());
        }
        let rows = committed(&db.store).await;
        let expected: Vec<i64> = (0..64)
            .filter(|x| x % 8 != 7)
            .chain((0..64).filter(|x| x % 8 != 7).map(|x| 1000 + x))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        assert_eq!(
            rows, expected,
            "every committed unit whole, no failed unit's row"
        );
        let (commits, units) = db.store.group_commits();
        assert_eq!(
            units - before.1,
            committed_units,
            "each committed unit counted once"
        );
        assert!(
            commits - before.0 < committed_units,
            "units shared commits: {} commits for {committed_units} units",
            commits - before.0
        );
    }

    /// A first unit that wrote 1 and finished while `second`, a unit on a task of its own,
    /// was queued behind it: so it is released into the shared transaction, not committed.
    /// The first unit's commit, and the second's task.
    async fn released_before<T, F, Fut>(
        db: &Db,
        second: F,
    ) -> (
        tokio::task::JoinHandle<StoreResult<bool>>,
        tokio::task::JoinHandle<T>,
    )
    where
        F: FnOnce(WriteUnit) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        released_before_opening(db, Opening::Now, second).await
    }

    /// [`released_before`], the second unit's savepoint opened as `opening` says.
    async fn released_before_opening<T, F, Fut>(
        db: &Db,
        opening: Opening,
        second: F,
    ) -> (
        tokio::task::JoinHandle<StoreResult<bool>>,
        tokio::task::JoinHandle<T>,
    )
    where
        F: FnOnce(WriteUnit) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = T> + Send + 'static,
        T: Send + 'static,
    {
        let writer = db.store.writer.clone();
        let mut first = writer.begin().await.unwrap();
        insert(&mut first, 1).await.unwrap();
        let second =
            tokio::spawn(async move { second(writer.begin_opening(opening).await.unwrap()).await });
        queued(&db.store, 1).await;
        (tokio::spawn(first.commit(false)), second)
    }

    /// A unit that finished well leaves its savepoint for the next unit to release as it
    /// begins; the next unit failing after that rolls back only its own writes.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unit_failing_after_a_released_one_rolls_back_only_itself() {
        let db = db().await;
        let (first_done, second) = released_before(&db, |mut unit| async move {
            insert(&mut unit, 2).await.unwrap();
            // Fails after writing, and is dropped as an error path drops it.
            insert(&mut unit, 1).await.unwrap_err();
        })
        .await;
        second.await.unwrap();
        let mut third = db.store.writer.begin().await.unwrap();
        insert(&mut third, 3).await.unwrap();
        third.commit(false).await.unwrap();
        first_done.await.unwrap().unwrap();
        assert_eq!(committed(&db.store).await, vec![1, 3]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_released_unit_is_answered_only_after_the_shared_commit() {
        let db = db().await;
        // A second unit queues; the first, finishing, is released into the shared transaction
        // and waits for the second to end it.
        let (first_done, second) = released_before(&db, |mut unit| async move {
            let seen: i64 = sqlx::query_scalar("select count(*) from t")
                .fetch_one(unit.conn())
                .await
                .unwrap();
            insert(&mut unit, 2).await.unwrap();
            unit.commit(false).await.unwrap();
            seen
        })
        .await;
        let seen = second.await.unwrap();
        assert_eq!(
            seen, 1,
            "the second unit ran in the same transaction as the first"
        );
        first_done.await.unwrap().unwrap();
        assert_eq!(committed(&db.store).await, vec![1, 2]);
        let (commits, units) = db.store.group_commits();
        assert_eq!(
            (commits, units),
            (2, 3),
            "the table's unit, then one commit for two"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_answer_read_from_released_writes_waits_for_their_commit() {
        let db = db().await;
        let writer = db.store.writer.clone();
        let mut first = writer.begin().await.unwrap();
        insert(&mut first, 7).await.unwrap();
        let reader_writer = writer.clone();
        // A replay: reads the released row, writes nothing, ends without a commit. Its answer
        // is held (`when_durable`) until the row is durable.
        let replay = tokio::spawn(crate::durable::when_durable(async move {
            let mut unit = reader_writer.begin().await.unwrap();
            let seen: i64 = sqlx::query_scalar("select count(*) from t where x = 7")
                .fetch_one(unit.conn())
                .await
                .unwrap();
            drop(unit);
            seen
        }));
        queued(&db.store, 1).await;
        let first_done = tokio::spawn(first.commit(false));
        let (seen, durable) = replay.await.unwrap();
        durable.unwrap();
        assert_eq!(seen, 1, "the replay saw the released row");
        let visible: i64 = sqlx::query_scalar("select count(*) from t where x = 7")
            .fetch_one(&mut *db.store.readers.acquire().await.unwrap())
            .await
            .unwrap();
        assert_eq!(
            visible, 1,
            "by the time the replay is answered, the row is committed"
        );
        first_done.await.unwrap().unwrap();
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unit_cancelled_while_queued_does_not_strand_the_released_ones() {
        let db = db().await;
        let writer = db.store.writer.clone();
        let mut first = writer.begin().await.unwrap();
        insert(&mut first, 3).await.unwrap();
        let waiting = writer.clone();
        let cancelled = tokio::spawn(async move {
            let _unit = waiting.begin().await;
        });
        queued(&db.store, 1).await;
        // The first unit is released (someone is queued) …
        let first_done = tokio::spawn(first.commit(false));
        // … and the queued one gives up before it gets the writer.
        cancelled.abort();
        let _ = cancelled.await;
        tokio::time::timeout(Duration::from_secs(10), first_done)
            .await
            .expect("the released unit is committed by someone")
            .unwrap()
            .unwrap();
        assert_eq!(committed(&db.store).await, vec![3]);
    }

    /// What a full disk does to a statement or a COMMIT (scripts/chaos, diskfull): SQLite
    /// rolls the whole transaction back by itself. Simulated here with a ROLLBACK behind the
    /// unit's back: the units released into the lost transaction hear the error, and the
    /// writer is not left unusable: the next unit begins and commits.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_transaction_sqlite_rolled_back_itself_fails_its_group_and_the_writer_goes_on() {
        let db = db().await;
        let writer = db.store.writer.clone();
        let mut first = writer.begin().await.unwrap();
        insert(&mut first, 5).await.unwrap();
        let second_writer = writer.clone();
        let second = tokio::spawn(async move {
            let mut unit = second_writer.begin().await.unwrap();
            sqlx::query("ROLLBACK").execute(unit.conn()).await.unwrap();
            drop(unit); // its error path
        });
        queued(&db.store, 1).await;
        let released = first.commit(false).await;
        second.await.unwrap();
        assert!(
            matches!(released, Err(StoreError::Unavailable(_))),
            "the released unit hears that its write is lost: {released:?}"
        );
        let mut next = writer.begin().await.unwrap();
        insert(&mut next, 6).await.unwrap();
        next.commit(false).await.unwrap();
        assert_eq!(committed(&db.store).await, vec![6]);
    }

    /// A write unit as the shared SQL sees it (statements held back go through it).
    async fn unit(store: &SqliteStore) -> SqliteUnit {
        as_unit(store.writer.begin().await.unwrap())
    }

    fn as_unit(unit: WriteUnit) -> SqliteUnit {
        let wake = Wake {
            notify: None,
            pending: false,
        };
        SqliteUnit(UnitConn::Write(unit), wake)
    }

    /// Inserts `x` through the shared SQL's path (so a held savepoint goes with it).
    async fn insert_via(unit: &mut SqliteUnit, x: i64) -> StoreResult<u64> {
        crate::sql::query("insert into t (x) values ($1)")
            .bind(x)
            .execute(unit)
            .await
            .map(|done| done.rows_affected())
    }

    /// What the app's units do: the savepoint opens with the first call.
    async fn app_unit(store: &SqliteStore) -> SqliteUnit {
        as_unit(
            store
                .writer
                .begin_opening(Opening::WithFirstCall)
                .await
                .unwrap(),
        )
    }

    /// A third unit commits 3 after the second; the first (released) and the third stand.
    async fn then_third_commits(db: &Db, first_done: tokio::task::JoinHandle<StoreResult<bool>>) {
        commits_3(&db.store.writer).await.unwrap();
        first_and_3_stand(db, first_done).await;
    }

    /// An app's unit that commits 3.
    async fn commits_3(writer: &Writer) -> StoreResult<()> {
        let mut unit = as_unit(writer.begin_opening(Opening::WithFirstCall).await?);
        insert_via(&mut unit, 3).await?;
        Box::new(unit).commit().await
    }

    /// [`commits_3`] on a task of its own, queued behind the writer's holder once it returns.
    async fn commits_3_queued(writer: &Writer) -> tokio::task::JoinHandle<StoreResult<()>> {
        let queued = writer.clone();
        let unit = tokio::spawn(async move { commits_3(&queued).await });
        queued_on(writer, 1).await;
        unit
    }

    /// The released first unit's write (1) and the last unit's (3) are committed, and nothing
    /// else.
    async fn first_and_3_stand(db: &Db, first_done: tokio::task::JoinHandle<StoreResult<bool>>) {
        first_done
            .await
            .unwrap()
            .expect("the released unit's commit is not lost");
        assert_eq!(committed(&db.store).await, vec![1, 3]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_savepoint_sent_with_the_first_call_rolls_back_only_its_unit() {
        let db = db().await;
        let (first_done, second) =
            released_before_opening(&db, Opening::WithFirstCall, |unit| async move {
                let mut unit = as_unit(unit);
                assert_eq!(insert_via(&mut unit, 2).await.unwrap(), 1, "its own count");
                insert_via(&mut unit, 1).await.unwrap_err(); // then dropped, as on an error path
            })
            .await;
        second.await.unwrap();
        then_third_commits(&db, first_done).await;
    }

    /// Units that end without a call, each while the next is queued (so all share one
    /// transaction): one dropped, one committed with nothing written. The writer stands as
    /// the unit before them left it, and the next unit releases the right savepoint.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn units_that_never_call_leave_the_writer_as_they_found_it() {
        let db = db().await;
        let writer = db.store.writer.clone();
        let (first_done, second) =
            released_before_opening(&db, Opening::WithFirstCall, |unit| async move {
                let idle_writer = writer.clone();
                let idle = tokio::spawn(async move {
                    let idle = idle_writer.begin_opening(Opening::WithFirstCall).await;
                    let last = commits_3_queued(&idle_writer).await;
                    Box::new(as_unit(idle.unwrap())).commit().await.unwrap();
                    last.await.unwrap()
                });
                queued_on(&writer, 1).await;
                drop(unit); // refused before any statement
                idle.await.unwrap()
            })
            .await;
        second.await.unwrap().expect("the last unit commits");
        first_and_3_stand(&db, first_done).await;
        let (commits, units) = db.store.group_commits();
        assert!(
            units > commits,
            "the units shared a commit: {commits} commits, {units} units"
        );
    }

    async fn queued_on(writer: &Writer, n: usize) {
        while writer.queued.load(Ordering::SeqCst) < n {
            tokio::task::yield_now().await;
        }
    }

    /// A request cancelled in its unit's first call, after the call reached the connection's
    /// thread: the next holder cannot know whether the savepoint opened, and finds out by
    /// rolling it back. Here it did open (the cancelled statement ran past it).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_first_call_cancelled_after_it_opened_the_savepoint_rolls_back_only_its_unit() {
        let db = db().await;
        let (first_done, second) =
            released_before_opening(&db, Opening::WithFirstCall, |unit| async move {
                let mut unit = as_unit(unit);
                unit.execute_later(insert_stmt(2)).await.unwrap();
                let slow: crate::sql::QueryAs<'_, (i64,)> = crate::sql::query_as(
                    "with recursive c (x) as (select 1 union all select x + 1 from c
                     where x < 50000000) select count(*) from c",
                );
                let cancelled =
                    tokio::time::timeout(Duration::from_millis(50), slow.fetch_one(&mut unit));
                assert!(
                    cancelled.await.is_err(),
                    "the slow read outlasts its caller"
                );
            })
            .await;
        second.await.unwrap();
        then_third_commits(&db, first_done).await;
    }

    /// The same, when the cancelled call never opened the savepoint (simulated: the unit is
    /// left as a call sent and dropped before the connection's thread ran anything of it),
    /// twice in a row in one group. The shared transaction is not failed for it, and the
    /// second rollback does not reach the first unit's savepoint (the two names alternate):
    /// the released unit's write is committed.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_first_call_cancelled_before_it_opened_the_savepoint_fails_nothing() {
        let db = db().await;
        let writer = db.store.writer.clone();
        let (first_done, second) =
            released_before_opening(&db, Opening::WithFirstCall, |unit| async move {
                let again_writer = writer.clone();
                let again = tokio::spawn(async move {
                    let unit = again_writer.begin_opening(Opening::WithFirstCall).await;
                    let mut unit = unit.unwrap();
                    assert_eq!(
                        unit.later.opens, 1,
                        "nothing to release: only its own to open"
                    );
                    let last = commits_3_queued(&again_writer).await;
                    cancelled_unopened(&mut unit);
                    drop(unit);
                    last.await.unwrap()
                });
                queued_on(&writer, 1).await;
                let mut unit = unit;
                cancelled_unopened(&mut unit);
                drop(unit);
                again.await.unwrap()
            })
            .await;
        second.await.unwrap().expect("the last unit commits");
        first_and_3_stand(&db, first_done).await;
    }

    /// Leaves `unit` as a first call sent and cancelled before anything of it ran.
    fn cancelled_unopened(unit: &mut WriteUnit) {
        unit.later = Later::default();
        unit.savepoint = Savepoint::Sent;
    }

    /// A held statement that fails fails its unit for good, even if its caller handles the
    /// error of the call that reported it: the commit says the work is lost.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_unit_whose_held_statement_failed_cannot_commit() {
        let db = db().await;
        let mut first = app_unit(&db.store).await;
        insert_via(&mut first, 1).await.unwrap();
        Box::new(first).commit().await.unwrap();
        let mut unit = app_unit(&db.store).await;
        unit.execute_later(insert_stmt(1)).await.unwrap();
        insert_via(&mut unit, 2).await.unwrap_err(); // the held insert's conflict
        insert_via(&mut unit, 4)
            .await
            .expect_err("the unit answers nothing more");
        let commit = Box::new(unit).commit().await;
        assert!(
            matches!(commit, Err(StoreError::Unavailable(_))),
            "{commit:?}"
        );
        assert_eq!(committed(&db.store).await, vec![1]);
    }

    fn insert_stmt<'a>(x: i64) -> Stmt<'a> {
        crate::sql::query("insert into t (x) values ($1)")
            .bind(x)
            .into_stmt()
    }

    fn insert_later(x: i64, label: &str) -> Stmt<'_> {
        crate::sql::query("insert into t (x, label) values ($1, $2)")
            .bind(x)
            .bind(label)
            .into_stmt()
    }

    async fn labelled(db: &Db) {
        let mut unit = db.store.writer.begin().await.unwrap();
        sqlx::query("alter table t add column label text")
            .execute(unit.conn())
            .await
            .unwrap();
        unit.commit(false).await.unwrap();
    }

    #[test]
    fn held_statements_parameters_are_renumbered_outside_quoted_literals() {
        let mut out = String::new();
        renumber(
            "select $1, '$1 $2', $10 where x = $2 and y = 'it''s $3'",
            5,
            &mut out,
        );
        assert_eq!(
            out,
            "select $6, '$1 $2', $15 where x = $7 and y = 'it''s $3'"
        );
        let mut out = String::new();
        renumber("select $1", 0, &mut out);
        assert_eq!(out, "select $1");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn statements_held_back_run_before_the_next_one_each_with_its_own_arguments() {
        let db = db().await;
        labelled(&db).await;
        let mut unit = unit(&db.store).await;
        unit.execute_later(insert_later(1, "one")).await.unwrap();
        unit.execute_later(insert_later(2, "two")).await.unwrap();
        let rows: Vec<(i64, String, String)> =
            crate::sql::query_as("select x, label, '$1' from t where x >= $1 order by x")
                .bind(0_i64)
                .fetch_all(&mut unit)
                .await
                .unwrap();
        let one = (1, "one".to_owned(), "$1".to_owned());
        let two = (2, "two".to_owned(), "$1".to_owned());
        assert_eq!(
            rows,
            vec![one, two],
            "both held inserts ran first, in order"
        );
        unit.execute_later(insert_later(3, "three")).await.unwrap();
        let changed = crate::sql::query("update t set label = $1 where x <= $2")
            .bind("low")
            .bind(2_i64)
            .execute(&mut unit)
            .await
            .unwrap()
            .rows_affected();
        assert_eq!(
            changed, 2,
            "the count is the last statement's, not the held insert's"
        );
        unit.execute_later(insert_later(4, "four")).await.unwrap();
        Box::new(unit).commit().await.unwrap();
        assert_eq!(
            committed(&db.store).await,
            vec![1, 2, 3, 4],
            "the commit ran the statement still held"
        );
    }

    /// Three selects read together: the one row of `x`, nothing for `missing`, and the first
    /// of the rows from `from` up, each decoded as its own type.
    async fn read_together<U: Backend>(
        unit: &mut U,
        x: i64,
        missing: i64,
        from: i64,
    ) -> StoreResult<(Option<(i64, String)>, Option<(i64,)>, Option<(i64,)>)> {
        let mut together = crate::sql::Together::default();
        crate::sql::query_as::<(i64, String)>("select x, label from t where x = $1")
            .bind(x)
            .along(&mut together);
        crate::sql::query_as::<(i64,)>("select x from t where x = $1")
            .bind(missing)
            .along(&mut together);
        crate::sql::query_as::<(i64,)>("select x from t where x >= $1 order by x")
            .bind(from)
            .along(&mut together);
        let mut firsts = together.fetch(unit).await?;
        Ok((firsts.next()?, firsts.next()?, firsts.next()?))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn selects_read_together_answer_each_first_row_in_order_after_the_held_statements() {
        let db = db().await;
        labelled(&db).await;
        let mut first = unit(&db.store).await;
        first.execute_later(insert_later(1, "one")).await.unwrap();
        first.execute_later(insert_later(2, "two")).await.unwrap();
        Box::new(first).commit().await.unwrap();

        // The app's unit: its savepoint and a held insert go in the same call as the selects.
        let mut writing = app_unit(&db.store).await;
        writing
            .execute_later(insert_later(5, "five"))
            .await
            .unwrap();
        let read = read_together(&mut writing, 5, 99, 2).await.unwrap();
        assert_eq!(
            read,
            (Some((5, "five".to_owned())), None, Some((2,))),
            "each select answers its own first row; the held insert ran before them"
        );
        Box::new(writing).commit().await.unwrap();
        assert_eq!(committed(&db.store).await, vec![1, 2, 5]);

        let wake = Wake {
            notify: None,
            pending: false,
        };
        let mut reading = SqliteUnit(
            UnitConn::Read(db.store.readers.acquire().await.unwrap()),
            wake,
        );
        let read = read_together(&mut reading, 1, 3, 3).await.unwrap();
        assert_eq!(read, (Some((1, "one".to_owned())), None, Some((5,))));
        let again = read_together(&mut reading, 2, 3, 6).await.unwrap();
        assert_eq!(
            again,
            (Some((2, "two".to_owned())), None, None),
            "the connection reads together again, its statements' new arguments bound"
        );
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_held_statement_that_fails_fails_the_call_that_runs_it_and_rolls_back_its_unit() {
        let db = db().await;
        labelled(&db).await;
        let mut kept = unit(&db.store).await;
        kept.execute_later(insert_later(1, "kept")).await.unwrap();
        Box::new(kept).commit().await.unwrap();

        let mut failing = unit(&db.store).await;
        failing.execute_later(insert_later(2, "new")).await.unwrap();
        failing
            .execute_later(insert_later(1, "taken"))
            .await
            .unwrap();
        let read: StoreResult<Option<(i64,)>> = crate::sql::query_as("select x from t")
            .fetch_optional(&mut failing)
            .await;
        assert!(
            read.is_err(),
            "the held insert's conflict is the read's error"
        );
        drop(failing); // its error path

        let mut held_at_commit = unit(&db.store).await;
        held_at_commit
            .execute_later(insert_later(1, "taken again"))
            .await
            .unwrap();
        let commit = Box::new(held_at_commit).commit().await;
        assert!(
            commit.is_err(),
            "a held insert that fails at the commit fails it"
        );

        let mut next = unit(&db.store).await;
        next.execute_later(insert_later(3, "next")).await.unwrap();
        Box::new(next).commit().await.unwrap();
        assert_eq!(
            committed(&db.store).await,
            vec![1, 3],
            "the failed units wrote nothing (2 rolled back), the others stand"
        );
    }
}
