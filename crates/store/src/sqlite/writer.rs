//! The single writer connection, its write units, and their group commit.

use super::dialect::map_err;
use super::later::{Later, Ran, Want};
use crate::error::{StoreError, StoreResult};
use crate::sql::Stmt;
use crate::turns::{Lane, Turn, Turns};
use sqlx::AssertSqlSafe;
use sqlx::sqlite::SqliteConnection;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Mutex, OwnedMutexGuard, watch};

/// Units of work one shared commit covers at most, so one group's latency stays bounded.
pub(super) const MAX_GROUP: usize = 64;

/// The single writer connection and its group commit.
#[derive(Clone)]
pub(super) struct Writer {
    slot: Arc<Mutex<Slot>>,
    /// Who holds the writer next: organisations in turn ([`crate::turns`]).
    turns: Arc<Turns>,
    /// Units waiting for the connection: while there are any, a finished unit leaves the
    /// shared transaction open for them instead of committing.
    pub(super) queued: Arc<AtomicUsize>,
    /// Shared commits made, and units they covered.
    commits: Arc<[std::sync::atomic::AtomicU64; 2]>,
}

/// What the holder of the writer owns.
pub(super) struct Slot {
    pub(super) conn: SqliteConnection,
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
pub(super) enum Ended {
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
pub(super) enum Opening {
    /// In a call of its own, as the unit begins (the job claim, whose statements bypass the
    /// held ones, and the tests of the group commit).
    Now,
    /// Held, and sent with the unit's first call: one call to the connection's thread fewer.
    WithFirstCall,
}

/// Where a unit's savepoint stands.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Savepoint {
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
    /// Whose units it holds (see [`WriteUnit::commit`]: a round).
    lanes: Vec<Lane>,
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
    pub(super) fn new(conn: SqliteConnection) -> Writer {
        Writer {
            slot: Arc::new(Mutex::new(Slot {
                conn,
                group: None,
                savepoints: 0,
                last: None,
            })),
            turns: Turns::new(1, 1),
            queued: Arc::new(AtomicUsize::new(0)),
            commits: Arc::new([
                std::sync::atomic::AtomicU64::new(0),
                std::sync::atomic::AtomicU64::new(0),
            ]),
        }
    }

    pub(super) fn stats(&self) -> (u64, u64) {
        (
            self.commits[0].load(Ordering::Relaxed),
            self.commits[1].load(Ordering::Relaxed),
        )
    }

    /// The writer connection for `lane`'s work, in its turn: lanes waiting take turns, each
    /// one's units in order. A unit abandoned by the last holder is rolled back first.
    pub(super) async fn hold(&self, lane: Lane) -> StoreResult<Held> {
        let mut queued = Queued::new(self);
        let turn = self.turns.take(lane).await;
        // Whoever holds the turn holds the lock: it is never waited for long.
        let guard = Arc::clone(&self.slot).lock_owned().await;
        queued.acquired = true;
        drop(queued);
        let mut held = Held { guard, _turn: turn };
        held.settle().await?;
        Ok(held)
    }

    /// Starts a unit: joins the open shared transaction, or opens one. Runs on a task of its
    /// own, so a caller dropped while it waits (a request cancelled, a job stopped by its
    /// lease, a heartbeat bounded by it) cannot leave the writer between `BEGIN IMMEDIATE`
    /// and its bookkeeping: the begun unit is then dropped like any abandoned one (its
    /// savepoint rolled back, the shared transaction closed when idle). A `BEGIN` whose future
    /// was dropped still runs on the connection's thread, and would otherwise leave a
    /// transaction no one knows of, holding the file's write lock.
    pub(super) async fn begin(&self) -> StoreResult<WriteUnit> {
        self.begin_opening(Opening::Now, Lane::Unattributed).await
    }

    /// [`Writer::begin`], a unit that joins an open group opening its savepoint as `opening`
    /// says (the first unit of a group always opens the transaction and its savepoint here).
    pub(super) async fn begin_opening(
        &self,
        opening: Opening,
        lane: Lane,
    ) -> StoreResult<WriteUnit> {
        let writer = self.clone();
        tokio::spawn(async move { writer.begin_here(opening, lane).await })
            .await
            .map_err(|e| StoreError::Other(sqlx::Error::Protocol(format!("begin: {e}"))))?
    }

    async fn begin_here(&self, opening: Opening, lane: Lane) -> StoreResult<WriteUnit> {
        let mut slot = self.hold(lane).await?;
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
                lanes: vec![lane],
                wake: false,
                outcome: watch::channel(None).0,
            });
        } else {
            if let Some(group) = slot.group.as_mut()
                && !group.lanes.contains(&lane)
            {
                group.lanes.push(lane);
            }
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
            if let Ok(mut slot) = writer.hold(Lane::Unattributed).await
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
    pub(super) async fn commit_group(&mut self, writer: &Writer, own: u64) -> StoreResult<bool> {
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
/// are open at once (the last unit's, until the next unit's opening releases it). A unit's
/// opening shares one text with its first statement, which sqlx prepares and caches by text:
/// fixed names keep those texts few enough for the writer's statement cache.
fn savepoint_name(n: u64) -> &'static str {
    if n % 2 == 1 { "odd" } else { "even" }
}

/// SQLite's answer to a `ROLLBACK TO` or `RELEASE` of a savepoint that is not open.
fn no_such_savepoint(err: &sqlx::Error) -> bool {
    err.as_database_error()
        .is_some_and(|db| db.message().starts_with("no such savepoint"))
}

/// The writer, held in a lane's turn: the lock goes before the turn passes on.
pub(super) struct Held {
    guard: OwnedMutexGuard<Slot>,
    _turn: Turn,
}

impl std::ops::Deref for Held {
    type Target = Slot;

    fn deref(&self) -> &Slot {
        &self.guard
    }
}

impl std::ops::DerefMut for Held {
    fn deref_mut(&mut self) -> &mut Slot {
        &mut self.guard
    }
}

/// A write unit of work on the writer: a savepoint inside the shared transaction.
pub(super) struct WriteUnit {
    /// The writer, held until the unit ends.
    slot: Held,
    writer: Writer,
    /// Committed (or failed with its group): dropping it then only lets the writer go.
    ended: bool,
    /// Statements held back to go with the unit's next call (dropped with an abandoned unit).
    pub(super) later: Later,
    /// Whether the unit's savepoint is open yet.
    pub(super) savepoint: Savepoint,
    /// A held statement failed (see [`WriteUnit::run_after_later`]).
    pub(super) failed: bool,
}

impl WriteUnit {
    pub(super) fn conn(&mut self) -> &mut SqliteConnection {
        &mut self.slot.conn
    }

    /// Runs `stmt` after the statements held back, in one call to the connection's thread.
    /// If the unit's savepoint was held and its opening fails, the shared transaction is
    /// gone (SQLite rolled it back itself, as in [`Slot::run_in_group`]): the group fails.
    ///
    /// A held statement that fails fails the unit for good: its caller believes it written,
    /// so every later call and the commit answer that the unit's work is lost, even if the
    /// caller handles the error of the call that reported it (a conflict it answers).
    pub(super) async fn run_after_later<'q>(
        &mut self,
        stmts: impl IntoIterator<Item = Stmt<'q>>,
        want: Want,
    ) -> StoreResult<Ran> {
        if self.failed {
            return Err(lost("a statement of this unit failed"));
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
    pub(super) async fn commit(mut self, wake: bool) -> StoreResult<bool> {
        if self.failed {
            return Err(lost("a statement of this unit failed"));
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
        // A round: while lanes take turns, the group commits once the next in turn already
        // has a unit in it, so a unit waits for one unit of each other lane, not for a whole
        // group of one busy organisation (with one lane, groups are as large as before).
        let round = group.lanes.len() > 1
            && self
                .writer
                .turns
                .next_lane()
                .is_some_and(|next| group.lanes.contains(&next));
        if queued == 0 || group.released + 1 >= MAX_GROUP || round {
            let writer = self.writer.clone();
            return self.slot.commit_group(&writer, 1).await;
        }
        group.released += 1;
        let outcome = group.outcome.subscribe();
        drop(self); // the next queued unit continues the shared transaction
        // The committer wakes the workers for the whole group.
        settled(outcome).await.map(|()| false)
    }
}

impl WriteUnit {
    /// Ends the unit without its writes (its savepoint rolled back as a dropped unit's is),
    /// then waits for the shared commit of the units released into the group before it: it
    /// may have read their writes, and an answer decided on them must not outrun that commit.
    pub(super) async fn abandon(self) -> StoreResult<()> {
        let outcome = (self.slot.group.as_ref())
            .filter(|group| group.released > 0)
            .map(|group| group.outcome.subscribe());
        drop(self);
        match outcome {
            Some(outcome) => settled(outcome).await,
            None => Ok(()),
        }
    }
}

/// Waits for a shared commit's outcome: `Err` when it failed, or was abandoned unfinished.
async fn settled(mut outcome: watch::Receiver<Option<Result<(), String>>>) -> StoreResult<()> {
    let result = outcome
        .wait_for(Option::is_some)
        .await
        .ok()
        .and_then(|o| o.clone());
    match result {
        Some(Ok(())) => Ok(()),
        Some(Err(message)) => Err(lost(&message)),
        None => Err(lost("the shared commit was abandoned")),
    }
}

/// The error of a unit whose shared commit failed: nothing it was part of is durable, and
/// nothing was acknowledged, so a retry is safe.
fn lost(message: &str) -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(format!(
        "the shared commit failed: {message}"
    ))))
}

impl Drop for WriteUnit {
    fn drop(&mut self) {
        if self.ended {
            return;
        }
        // Abandoned, or dropped (a request cancelled, a panic): the next holder rolls its
        // savepoint back; if nobody is queued, a task does it and commits what others
        // released.
        match self.savepoint {
            Savepoint::Open => self.slot.last = Some(Ended::Abandoned),
            Savepoint::Held { after } => self.never_opened(after),
            Savepoint::Sent => self.slot.last = Some(Ended::Unsure),
        }
        self.writer.close_when_idle();
    }
}

#[cfg(test)]
mod tests {
    //! The group commit, driven through real write units on a real database file.

    use super::*;
    use crate::sqlite::tests::{committed, db, insert, queued, released_before};
    use std::time::Duration;

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

    /// While a unit holds the writer, four units of organisation A queue, then one of B: B's
    /// runs second, not fifth, and the group it joined commits with it (a round: A is next
    /// and already in it); A's other three then share a group of their own.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn organisations_take_turns_at_the_writer_and_a_round_ends_a_group() {
        let db = db().await;
        let before = db.store.group_commits();
        let writer = db.store.writer.clone();
        let mut first = writer.begin().await.unwrap();
        insert(&mut first, 0).await.unwrap();
        let (a, b) = (
            Lane::Org(uuid::Uuid::from_u128(1)),
            Lane::Org(uuid::Uuid::from_u128(2)),
        );
        let order = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for (x, lane) in [(1, a), (2, a), (3, a), (4, a), (10, b)] {
            let (writer, order) = (writer.clone(), Arc::clone(&order));
            tasks.push(tokio::spawn(async move {
                let mut unit = writer.begin_opening(Opening::Now, lane).await.unwrap();
                order.lock().unwrap().push(x);
                insert(&mut unit, x).await.unwrap();
                unit.commit(false).await.unwrap();
            }));
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        first.commit(false).await.unwrap();
        for task in tasks {
            task.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [1, 10, 2, 3, 4]);
        assert_eq!(committed(&db.store).await, [0, 1, 2, 3, 4, 10]);
        let (commits, units) = db.store.group_commits();
        assert_eq!(
            (commits - before.0, units - before.1),
            (2, 6),
            "the first unit, A's first and B's in one commit; A's three others in another"
        );
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
        // A replay: reads the released row, writes nothing, and is abandoned. Abandoning it
        // returns once the row is durable.
        let replay = tokio::spawn(async move {
            let mut unit = reader_writer.begin().await.unwrap();
            let seen: i64 = sqlx::query_scalar("select count(*) from t where x = 7")
                .fetch_one(unit.conn())
                .await
                .unwrap();
            unit.abandon().await.map(|()| seen)
        });
        queued(&db.store, 1).await;
        let first_done = tokio::spawn(first.commit(false));
        let seen = replay.await.unwrap().unwrap();
        assert_eq!(seen, 1, "the replay saw the released row");
        let visible: i64 = sqlx::query_scalar("select count(*) from t where x = 7")
            .fetch_one(
                &mut *db
                    .store
                    .readers
                    .acquire(crate::turns::Lane::Unattributed)
                    .await
                    .unwrap(),
            )
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

    /// The other side of [`an_answer_read_from_released_writes_waits_for_their_commit`]: when
    /// the shared commit of the writes an abandoned unit read is lost, its abandon says so, so
    /// the answer decided on them is never given.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_abandoned_unit_hears_that_the_writes_it_read_were_lost() {
        let db = db().await;
        let writer = db.store.writer.clone();
        let mut first = writer.begin().await.unwrap();
        insert(&mut first, 7).await.unwrap();
        let (read_tx, read_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel::<()>();
        let reader_writer = writer.clone();
        let replay = tokio::spawn(async move {
            let mut unit = reader_writer.begin().await.unwrap();
            let seen: i64 = sqlx::query_scalar("select count(*) from t where x = 7")
                .fetch_one(unit.conn())
                .await
                .unwrap();
            read_tx.send(seen).unwrap();
            go_rx.await.unwrap();
            unit.abandon().await
        });
        queued(&db.store, 1).await;
        let first_done = tokio::spawn(first.commit(false));
        assert_eq!(read_rx.await.unwrap(), 1, "the replay saw the released row");
        // The next holder finds the shared transaction rolled back behind its back (a full
        // disk), so the group is lost.
        let failing_writer = writer.clone();
        let failing = tokio::spawn(async move {
            let mut unit = failing_writer.begin().await.unwrap();
            sqlx::query("ROLLBACK").execute(unit.conn()).await.unwrap();
            drop(unit);
        });
        queued(&db.store, 1).await;
        go_tx.send(()).unwrap();
        let abandoned = replay.await.unwrap();
        failing.await.unwrap();
        assert!(
            matches!(abandoned, Err(StoreError::Unavailable(_))),
            "the abandoned unit hears that what it read is lost: {abandoned:?}"
        );
        assert!(first_done.await.unwrap().is_err());
        assert!(committed(&db.store).await.is_empty());
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
}
