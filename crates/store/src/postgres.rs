//! The PostgreSQL adapter: the production backend (row locks, many replicas, one database).

use super::sql::{
    Backend, Decoded, Stmt, classify_other, execute, fetch_all, fetch_optional, first_row,
};
use crate::error::{Constraint, StoreError, StoreResult};
use crate::formation::Hosts;
use crate::jobs::{Claim, JobRow};
use crate::turns::Lane;
use crate::unit::{Reader, Store, Tx};
use async_trait::async_trait;
use sqlx::PgPool;
use sqlx::postgres::{PgListener, PgPoolOptions, PgRow};
use std::sync::{Arc, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

mod lender;

use lender::{Lease, Lender};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// The channel a committed enqueue notifies.
const JOBS_CHANNEL: &str = "tauros_jobs";

/// A pool to the writable host of `DATABASE_URL` (one host, or a [`crate::formation`]'s).
pub struct PgStore {
    shared: Arc<Shared>,
    /// Woken by the listener; workers wait on it between polls.
    wake: Arc<Notify>,
    listening: OnceLock<()>,
}

/// What the store and its units share: the pool to the writable host, and how to find another.
struct Shared {
    hosts: Hosts,
    settings: PoolSettings,
    /// The connections to the host last found writable, and that host's index in `hosts`.
    current: RwLock<(Arc<Lender>, usize)>,
    /// Held while the hosts are probed: one probe at a time, the others go on answering 503.
    probing: tokio::sync::Mutex<Option<Instant>>,
    /// One more connection that `LISTEN`s for enqueues (opened when workers first wait).
    listen_pool: PgPool,
    /// Bumped when the pool moves to another host: units waiting on the old one start again.
    moved: tokio::sync::watch::Sender<u64>,
}

/// How a PostgreSQL pool behaves (docs/OPERATIONS.md lists the settings).
#[derive(Clone, Debug)]
pub struct PoolSettings {
    pub max_connections: u32,
    /// How long a unit waits for a connection before answering `unavailable`.
    pub acquire_timeout: Duration,
    /// The server cancels a statement running longer (`statement_timeout`); zero: no limit.
    pub statement_timeout: Duration,
}

impl PoolSettings {
    /// The defaults with `max_connections`: 5 s to get a connection, 30 s per statement.
    pub fn new(max_connections: u32) -> PoolSettings {
        PoolSettings {
            max_connections,
            acquire_timeout: Duration::from_secs(5),
            statement_timeout: Duration::from_secs(30),
        }
    }
}

/// A pooled connection idle at least this long is pinged before it is handed out (replaced if
/// the ping fails); one used more recently is handed out as it is, sparing each request a round
/// trip (docs/DECISIONS.md, "A pooled connection is pinged only after a pause").
const PING_AFTER_IDLE: Duration = Duration::from_secs(1);

/// Probes are at least this far apart: a failover's burst of failures costs one probe.
const PROBE_SPACING: Duration = Duration::from_millis(250);

/// How long one probe goes on while no host accepts writes (a failover takes seconds).
const PROBE_PERSISTENCE: Duration = Duration::from_secs(120);

impl PgStore {
    /// Opens a pool to `url`'s writable host, or fails with each host's answer.
    pub async fn connect(url: &str, settings: PoolSettings) -> anyhow::Result<PgStore> {
        let statement_ms = settings.statement_timeout.as_millis().to_string();
        let hosts = Hosts::parse(url)?.map(|options| {
            options.application_name("tauros").options([
                ("statement_timeout", statement_ms.as_str()),
                // A transaction left open by a vanished client releases its locks.
                ("idle_in_transaction_session_timeout", "60000"),
            ])
        });
        let index = match hosts.writable(settings.acquire_timeout).await {
            Ok(index) => index,
            Err(tried) => anyhow::bail!(
                "no host of DATABASE_URL accepts writes: {}",
                tried.join("; ")
            ),
        };
        let listen_pool = PgPoolOptions::new()
            .max_connections(1)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_lazy_with(hosts.nodes()[index].options.clone());
        let shared = Arc::new_cyclic(|weak: &Weak<Shared>| Shared {
            current: RwLock::new((lender_to(&hosts, index, &settings, weak.clone()), index)),
            hosts,
            settings,
            probing: tokio::sync::Mutex::new(None),
            listen_pool,
            moved: tokio::sync::watch::Sender::new(0),
        });
        // Prove the pool works before answering.
        shared.lender().lend(Lane::Unattributed).await?;
        Ok(PgStore {
            shared,
            wake: Arc::new(Notify::new()),
            listening: OnceLock::new(),
        })
    }

    /// `get` (a connection, or one with a transaction begun) from the current pool. A unit waiting
    /// for a connection when the store follows a failover starts again on the new pool at once, not
    /// after the old pool's acquire timeout. Its error is classified (and may start a probe).
    async fn on_pool<T, F, Fut>(&self, get: F) -> StoreResult<T>
    where
        F: Fn(Arc<Lender>) -> Fut,
        Fut: std::future::Future<Output = Result<T, sqlx::Error>>,
    {
        let mut moved = self.shared.moved.subscribe();
        let got = tokio::select! {
            got = get(self.shared.lender()) => got,
            _ = moved.changed() => get(self.shared.lender()).await,
        };
        got.map_err(|e| self.shared.failed(map_err(e)))
    }
}

/// The connections to host `index`, each new one checked to accept writes; one that does not
/// (the host was demoted to a standby) is refused and starts a probe.
fn lender_to(
    hosts: &Hosts,
    index: usize,
    settings: &PoolSettings,
    shared: Weak<Shared>,
) -> Arc<Lender> {
    let pool = PgPoolOptions::new()
        .max_connections(settings.max_connections)
        .acquire_timeout(settings.acquire_timeout)
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for >= PING_AFTER_IDLE {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .after_connect(move |conn, _meta| {
            let shared = shared.clone();
            Box::pin(async move {
                if crate::formation::accepts_writes(conn).await? {
                    return Ok(());
                }
                if let Some(shared) = shared.upgrade() {
                    shared.probe();
                }
                Err(sqlx::Error::Protocol(
                    "the host no longer accepts writes (a standby); looking for the new primary"
                        .into(),
                ))
            })
        })
        .connect_lazy_with(hosts.nodes()[index].options.clone());
    Arc::new(Lender::new(
        pool,
        settings.max_connections,
        settings.acquire_timeout,
    ))
}

fn timed_out() -> sqlx::Error {
    sqlx::Error::Io(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "no answer from the database within the statement timeout",
    ))
}

impl Shared {
    /// Runs one statement of a unit (or its commit, or a claim), bounded on this side too: the
    /// server's `statement_timeout` cannot end a wait on a host that vanished without a reset, so
    /// after the statement plus the acquire timeout (the server's cancel comes first) the unit is
    /// unavailable and a probe starts. No bound when statements are unlimited.
    async fn bounded<T>(
        self: &Arc<Self>,
        work: impl std::future::Future<Output = StoreResult<T>>,
    ) -> StoreResult<T> {
        let statement = self.settings.statement_timeout;
        let answer = if statement.is_zero() {
            work.await
        } else {
            tokio::time::timeout(statement + self.settings.acquire_timeout, work)
                .await
                .unwrap_or_else(|_| Err(StoreError::Unavailable(timed_out())))
        };
        answer.map_err(|e| self.failed(e))
    }

    fn lender(&self) -> Arc<Lender> {
        Arc::clone(
            &self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0,
        )
    }

    /// Starts a probe when `err` says this host is unreachable or read-only.
    fn failed(self: &Arc<Self>, err: StoreError) -> StoreError {
        if let StoreError::Unavailable(_) = &err {
            self.probe();
        }
        err
    }

    /// Looks for the writable host in the background (unless a probe ran just now); moves there.
    fn probe(self: &Arc<Self>) {
        let shared = Arc::clone(self);
        tokio::spawn(async move {
            let Ok(mut last) = shared.probing.try_lock() else {
                return;
            };
            if last.is_some_and(|at| at.elapsed() < PROBE_SPACING) {
                return;
            }
            let found = shared.writable_host(&mut last).await;
            drop(last);
            if let Some(index) = found {
                shared.move_to(index).await;
            }
        });
    }

    /// The index of the host that accepts writes. While none does, it asks every
    /// [`PROBE_SPACING`] for at most [`PROBE_PERSISTENCE`], so the first write after a promotion
    /// waits for the promotion, not a request's timeout. `last`: when the hosts last answered.
    async fn writable_host(&self, last: &mut Option<Instant>) -> Option<usize> {
        let started = Instant::now();
        let mut warned = false;
        loop {
            let found = self.hosts.writable(self.settings.acquire_timeout).await;
            *last = Some(Instant::now());
            let tried = match found {
                Ok(index) => return Some(index),
                Err(tried) => tried.join("; "),
            };
            metrics::counter!("tauros_database_probes_total", "found" => "none").increment(1);
            if started.elapsed() >= PROBE_PERSISTENCE {
                tracing::warn!(hosts = %tried, "no database host accepts writes; probing stops until the next failure");
                return None;
            }
            if !std::mem::replace(&mut warned, true) {
                tracing::warn!(hosts = %tried, "no database host accepts writes; probing until one does");
            }
            tokio::time::sleep(PROBE_SPACING).await;
        }
    }

    /// Moves every later unit (and those waiting on the old pool, [`PgStore::on_pool`]) to a pool
    /// to host `index`; the old pool closes once its lent connections come back.
    async fn move_to(self: &Arc<Self>, index: usize) {
        let old = {
            let mut current = self
                .current
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            if current.1 == index {
                metrics::counter!("tauros_database_probes_total", "found" => "same").increment(1);
                return;
            }
            metrics::counter!("tauros_database_probes_total", "found" => "new").increment(1);
            let fresh = lender_to(&self.hosts, index, &self.settings, Arc::downgrade(self));
            std::mem::replace(&mut *current, (fresh, index)).0
        };
        self.moved.send_modify(|moves| *moves += 1);
        let node = &self.hosts.nodes()[index];
        tracing::warn!(host = %node.name, "the writable database host changed; following it");
        self.listen_pool.set_connect_options(node.options.clone());
        old.close().await;
    }
}

/// One unit of work: a transaction (as [`Tx`]) or a plain connection (as [`Reader`]).
pub(super) struct PgUnit(Lease, Arc<Shared>);

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
        // 08xxx connection exceptions; 57P01 admin shutdown, 57P02 crash shutdown, 57P03
        // cannot connect now (starting, or in recovery); 53300 too many connections; 25006 a
        // write refused by a read-only session (the host was demoted during a failover).
        if db.code().is_some_and(|code| {
            code.starts_with("08")
                || matches!(&*code, "57P01" | "57P02" | "57P03" | "53300" | "25006")
        }) {
            return StoreError::Unavailable(err);
        }
    }
    classify_other(err)
}

/// A connection with a transaction begun on it, for `lane`'s work.
async fn begun(lender: Arc<Lender>, lane: Lane) -> Result<Lease, sqlx::Error> {
    let mut lease = lender.lend(lane).await?;
    lease.begin().await?;
    Ok(lease)
}

/// Delivered to every listener when the transaction commits, dropped when it rolls back.
async fn notify_jobs(unit: &mut PgUnit) -> StoreResult<()> {
    sqlx::query("select pg_notify($1, '')")
        .bind(JOBS_CHANNEL)
        .execute(unit.0.conn())
        .await
        .map_err(|e| unit.1.failed(map_err(e)))?;
    unit.0.settled();
    Ok(())
}

impl crate::sql::stmt::sealed::Sealed for PgUnit {}

impl crate::sql::stmt::RowsAffected for sqlx::postgres::PgQueryResult {
    fn rows_affected(&self) -> u64 {
        self.rows_affected()
    }
}

#[async_trait]
impl Backend for PgUnit {
    const FOR_UPDATE: &'static str = " for update";
    const FOR_SHARE: &'static str = " for share";
    const SKIP_LOCKED: &'static str = " for update skip locked";
    const SANCTION_REAP: &'static str = "select set_config('tauros.reap', 'on', true)";
    const UNSANCTION_REAP: &'static str = "select set_config('tauros.reap', 'off', true)";
    const NOW: &'static str = "now()";

    fn now_plus_ms(param: &str) -> String {
        now_plus_ms(param)
    }

    fn json_texts(param: &str) -> String {
        format!("select jsonb_array_elements_text({param}::jsonb)")
    }

    fn map_err(err: sqlx::Error) -> StoreError {
        map_err(err)
    }

    async fn fetch_optional_row<O: Decoded>(&mut self, stmt: Stmt<'_>) -> StoreResult<Option<O>> {
        let shared = Arc::clone(&self.1);
        shared
            .bounded(async {
                let row = fetch_optional(self.0.conn(), stmt).await.map_err(map_err)?;
                self.0.settled();
                Ok(row)
            })
            .await
    }

    async fn fetch_all_rows<O: Decoded>(&mut self, stmt: Stmt<'_>) -> StoreResult<Vec<O>> {
        let shared = Arc::clone(&self.1);
        shared
            .bounded(async {
                let rows = fetch_all(self.0.conn(), stmt).await.map_err(map_err)?;
                self.0.settled();
                Ok(rows)
            })
            .await
    }

    async fn execute_stmt(&mut self, stmt: Stmt<'_>) -> StoreResult<u64> {
        let shared = Arc::clone(&self.1);
        shared
            .bounded(async {
                let affected = execute(self.0.conn(), stmt).await.map_err(map_err)?;
                self.0.settled();
                Ok(affected)
            })
            .await
    }

    type Row = PgRow;

    fn decode<O: Decoded>(row: &PgRow) -> StoreResult<O> {
        O::from_row(row).map_err(map_err)
    }

    // One statement after the other: sqlx does not pipeline a connection's statements.
    async fn fetch_first_rows(&mut self, stmts: Vec<Stmt<'_>>) -> StoreResult<Vec<Option<PgRow>>> {
        let shared = Arc::clone(&self.1);
        shared
            .bounded(async {
                let mut rows = Vec::with_capacity(stmts.len());
                for stmt in stmts {
                    rows.push(first_row(self.0.conn(), stmt).await.map_err(map_err)?);
                }
                self.0.settled();
                Ok(rows)
            })
            .await
    }

    async fn wake_workers(&mut self) -> StoreResult<()> {
        notify_jobs(self).await
    }
}

impl Reader for PgUnit {}

#[async_trait]
impl Tx for PgUnit {
    async fn commit(mut self: Box<Self>) -> StoreResult<()> {
        let shared = Arc::clone(&self.1);
        shared
            .bounded(async { self.0.commit().await.map_err(map_err) })
            .await
    }

    // A transaction never reads another's uncommitted writes: nothing to wait for. The
    // lender rolls it back before the connection is lent again.
    async fn abandon(self: Box<Self>) -> StoreResult<()> {
        Ok(())
    }
}

#[async_trait]
impl Store for PgStore {
    async fn begin(&self, lane: Lane) -> StoreResult<Box<dyn Tx>> {
        let lease = self.on_pool(|lender| begun(lender, lane)).await?;
        Ok(Box::new(PgUnit(lease, Arc::clone(&self.shared))))
    }

    async fn reader(&self, lane: Lane) -> StoreResult<Box<dyn Reader>> {
        let lease = self
            .on_pool(|lender| async move { lender.lend(lane).await })
            .await?;
        Ok(Box::new(PgUnit(lease, Arc::clone(&self.shared))))
    }

    async fn migrate(&self) -> StoreResult<()> {
        // Migrations may outlast a statement timeout: none, on a connection of their own.
        let options = self.shared.lender().connect_options();
        let migrations = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(self.shared.settings.acquire_timeout)
            .after_connect(|conn, _meta| {
                Box::pin(async move {
                    sqlx::query("set statement_timeout = 0")
                        .execute(conn)
                        .await
                        .map(|_| ())
                })
            })
            .connect_lazy_with((*options).clone());
        let ran = MIGRATOR.run(&migrations).await;
        migrations.close().await;
        ran.map_err(|e| match e {
            sqlx::migrate::MigrateError::Execute(e) => self.shared.failed(map_err(e)),
            other => StoreError::Other(other.into()),
        })
    }

    async fn readiness(&self) -> StoreResult<bool> {
        let applied: Vec<(i64,)> = self
            .on_pool(|lender| async move {
                let mut lease = lender.lend(Lane::Unattributed).await?;
                let applied = sqlx::query_as(
                    "select version from _sqlx_migrations where success order by version",
                )
                .fetch_all(lease.conn())
                .await?;
                lease.settled();
                Ok(applied)
            })
            .await?;
        Ok(super::sql::migrations_current(&MIGRATOR, &applied))
    }

    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn claim_job(&self, claim: &Claim<'_>) -> StoreResult<Option<JobRow>> {
        let lease = self
            .on_pool(|lender| begun(lender, Lane::Unattributed))
            .await?;
        self.shared.bounded(claim_job(lease, claim)).await
    }

    async fn wait_for_jobs(&self, timeout: Duration) {
        self.listening.get_or_init(|| {
            tokio::spawn(listen(
                self.shared.listen_pool.clone(),
                Arc::downgrade(&self.wake),
            ));
        });
        let _ = tokio::time::timeout(timeout, self.wake.notified()).await;
    }
}

// Backend-only statements: `FOR UPDATE SKIP LOCKED` claims and `LISTEN/NOTIFY` wake-ups.

/// Candidates per organisation and kind: concurrent claimers on one organisation's backlog
/// find one that no other holds as long as fewer than this many claim at once.
const HEADS: u32 = 16;

/// Claims in a transaction of its own that holds row locks only for the update: concurrent
/// claimers skip locked rows instead of waiting, so no two get the same job. Fair across
/// organisations (docs/JOBS.md, "Fairness"): a skip scan over `jobs_fair_idx` finds those with
/// waiting jobs, each one's earliest [`HEADS`] due jobs per kind are read unlocked, and the
/// first in turn order that no other claimer holds is locked (`skip locked`) and taken; locking
/// inside the probe would walk the whole backlog (`jobs_due_idx`). With a lane limit, the pool's
/// claims are serialized by a transaction-scoped advisory lock, so a lane's count holds still.
async fn claim_job(mut tx: Lease, claim: &Claim<'_>) -> StoreResult<Option<JobRow>> {
    if claim.lane_limit.is_some() {
        sqlx::query("select pg_advisory_xact_lock(hashtext('tauros.claim.' || $1))")
            .bind(claim.pool)
            .execute(tx.conn())
            .await
            .map_err(map_err)?;
    }
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "with recursive orgs (org_id) as (
             (select org_id from jobs
              where state in ('available', 'scheduled', 'retryable')
              order by org_id limit 1)
             union all
             select (select j.org_id from jobs j
                     where j.state in ('available', 'scheduled', 'retryable')
                       and j.org_id > orgs.org_id
                     order by j.org_id limit 1)
             from orgs where orgs.org_id is not null
         ),
         heads as (
             select o.org_id, head.id, head.run_at, t.last_claimed_at
             from orgs o
             cross join unnest($2::text[]) as k (kind)
             cross join lateral (
                 select j.id, j.run_at from jobs j
                 where j.org_id = o.org_id and j.kind = k.kind
                   and j.state in ('available', 'scheduled', 'retryable') and j.run_at <= $1
                   and (j.lane is null or $7::bigint is null
                        or (select count(*) from jobs r
                            where r.org_id = j.org_id and r.lane = j.lane
                              and r.state = 'running' and r.lane is not null) < $7::bigint)
                 order by j.run_at, j.id
                 limit {HEADS}
             ) head
             left join job_turns t on t.org_id = o.org_id and t.pool = $6
             where o.org_id is not null
         ),
         next as (
             select j.id, j.org_id from (
                 select * from heads
                 order by last_claimed_at nulls first, run_at, id
                 limit {HEADS} * 4
             ) h
             join jobs j on j.org_id = h.org_id and j.id = h.id
             where j.state in ('available', 'scheduled', 'retryable') and j.run_at <= $1
             order by h.last_claimed_at nulls first, h.run_at, h.id
             limit 1
             for update of j skip locked
         ),
         turn as (
             insert into job_turns (org_id, pool, last_claimed_at)
             select org_id, $6, $1 from next
             on conflict (org_id, pool) do update set last_claimed_at = excluded.last_claimed_at
         )
         update jobs set state = 'running', lease_token = $3, lease_expires_at = {until},
             worker = $5, executions = jobs.executions + 1, started_at = $1, updated_at = $1
         from next where jobs.org_id = next.org_id and jobs.id = next.id
         returning jobs.*",
        until = now_plus_ms("$4"),
    )))
    .bind(claim.now)
    .bind(claim.kinds)
    .bind(claim.lease_token)
    .bind(crate::sql::millis(claim.lease))
    .bind(claim.worker)
    .bind(claim.pool)
    .bind(claim.lane_limit)
    .fetch_optional(tx.conn())
    .await
    .map_err(map_err)?;
    tx.commit().await.map_err(map_err)?;
    Ok(row)
}

/// The transaction's `now()` plus the milliseconds bound at `param`.
fn now_plus_ms(param: &str) -> String {
    format!("(now() + {param}::bigint * interval '1 millisecond')")
}

/// Forwards notifications to the store's waiters until it is gone (a miss costs one poll).
async fn listen(pool: PgPool, wake: Weak<Notify>) {
    let mut listener = None;
    loop {
        if wake.strong_count() == 0 {
            return;
        }
        let current = match listener.as_mut() {
            Some(current) => current,
            None => match PgListener::connect_with(&pool).await {
                Ok(mut fresh) => match fresh.listen(JOBS_CHANNEL).await {
                    Ok(()) => listener.insert(fresh),
                    Err(e) => {
                        tracing::debug!(error = %e, "cannot listen for enqueued jobs");
                        tokio::time::sleep(Duration::from_secs(1)).await;
                        continue;
                    }
                },
                Err(e) => {
                    tracing::debug!(error = %e, "cannot connect to listen for enqueued jobs");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
        };
        match current.recv().await {
            Ok(_) => match wake.upgrade() {
                Some(wake) => wake.notify_waiters(),
                None => return,
            },
            Err(e) => {
                tracing::debug!(error = %e, "listening for enqueued jobs failed; reconnecting");
                listener = None;
                tokio::time::sleep(Duration::from_secs(1)).await;
            }
        }
    }
}
