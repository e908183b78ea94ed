//! The SQLite adapter's units on a real database file, and the writer tests' fixtures.

use super::SqliteStore;
use super::later::Later;
use super::unit::{SqliteUnit, UnitConn, Wake};
use super::writer::{Opening, Savepoint, WriteUnit, Writer};
use crate::error::{StoreError, StoreResult};
use crate::sql::{Backend, Stmt};
use crate::turns::Lane;
use crate::unit::Tx;
use std::sync::atomic::Ordering;
use std::time::Duration;

pub(super) struct Db {
    pub(super) store: SqliteStore,
    dir: std::path::PathBuf,
}

impl Drop for Db {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub(super) async fn db() -> Db {
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

pub(super) async fn insert(unit: &mut WriteUnit, x: i64) -> Result<(), sqlx::Error> {
    sqlx::query("insert into t (x) values ($1)")
        .bind(x)
        .execute(unit.conn())
        .await
        .map(|_| ())
}

/// What a fresh read (another connection: only committed rows) sees.
pub(super) async fn committed(store: &SqliteStore) -> Vec<i64> {
    sqlx::query_scalar("select x from t order by x")
        .fetch_all(
            &mut *store
                .readers
                .acquire(crate::turns::Lane::Unattributed)
                .await
                .unwrap(),
        )
        .await
        .unwrap()
}

/// Waits until `n` units are queued for the writer.
pub(super) async fn queued(store: &SqliteStore, n: usize) {
    while store.writer.queued.load(Ordering::SeqCst) < n {
        tokio::task::yield_now().await;
    }
}

/// A first unit that wrote 1 and finished with `second` (its own task) queued behind it, so
/// released, not committed; answers its commit and the second's task.
pub(super) async fn released_before<T, F, Fut>(
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
    let second = tokio::spawn(async move {
        second(
            writer
                .begin_opening(opening, Lane::Unattributed)
                .await
                .unwrap(),
        )
        .await
    });
    queued(&db.store, 1).await;
    (tokio::spawn(first.commit(false)), second)
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
    SqliteUnit(UnitConn::Write(unit), wake, None)
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
            .begin_opening(Opening::WithFirstCall, Lane::Unattributed)
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
    let mut unit = as_unit(
        writer
            .begin_opening(Opening::WithFirstCall, Lane::Unattributed)
            .await?,
    );
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

/// Only the released first unit's write (1) and the last unit's (3) are committed.
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

/// Units that end without a call while the next is queued (one shared transaction): one
/// dropped, one committed empty; the next unit releases the right savepoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn units_that_never_call_leave_the_writer_as_they_found_it() {
    let db = db().await;
    let writer = db.store.writer.clone();
    let (first_done, second) =
        released_before_opening(&db, Opening::WithFirstCall, |unit| async move {
            let idle_writer = writer.clone();
            let idle = tokio::spawn(async move {
                let idle = idle_writer
                    .begin_opening(Opening::WithFirstCall, Lane::Unattributed)
                    .await;
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

/// The same when the cancelled call never opened the savepoint (simulated), twice in one
/// group: the shared transaction is not failed, and the second rollback does not reach the
/// first unit's savepoint (the names alternate), so the released write is committed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_first_call_cancelled_before_it_opened_the_savepoint_fails_nothing() {
    let db = db().await;
    let writer = db.store.writer.clone();
    let (first_done, second) =
        released_before_opening(&db, Opening::WithFirstCall, |unit| async move {
            let again_writer = writer.clone();
            let again = tokio::spawn(async move {
                let unit = again_writer
                    .begin_opening(Opening::WithFirstCall, Lane::Unattributed)
                    .await;
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

/// A failed held statement fails its unit for good, even if its caller handles the error.
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

/// Three selects read together (a row, nothing, the first of several), each as its own type.
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
        UnitConn::Read(
            db.store
                .readers
                .acquire(crate::turns::Lane::Unattributed)
                .await
                .unwrap(),
        ),
        wake,
        None,
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
