//! The nemesis's tools: the lifecycle load with a fault schedule alongside, signals,
//! PostgreSQL's crashes and backend terminations, the TCP proxy that drops answers, a full
//! disk.

use crate::counters::Counters;
use crate::ctx::{Ctx, prefix};
use crate::driver::Driver;
use crate::rng::Rng;
use crate::workload::{Fixture, Records, final_retries, lifecycle_load};
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Runs the lifecycle load with a nemesis alongside; returns the records.
pub(crate) async fn with_nemesis<N, Fut>(
    ctx: &Ctx,
    d: Arc<Driver>,
    f: Arc<Fixture>,
    workers: usize,
    load_for: Duration,
    nemesis: N,
) -> Records
where
    N: FnOnce(Arc<AtomicBool>) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let records: Records = Arc::default();
    let stop = Arc::new(AtomicBool::new(false));
    let until = Instant::now() + load_for;
    let load = tokio::spawn(lifecycle_load(
        d.clone(),
        f.clone(),
        records.clone(),
        prefix(&ctx.args),
        workers,
        until,
        stop.clone(),
    ));
    nemesis(stop.clone()).await;
    // The nemesis is done (or out of time): the load runs to its own deadline.
    load.await.unwrap();
    let retried = final_retries(&d, &f, &records).await;
    ctx.faults.add("final_retries", retried);
    records
}

/// Sends SIGSTOP or SIGCONT (`what`) to `pid`.
pub(crate) fn signal(pid: u32, what: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{what}"))
        .arg(pid.to_string())
        .status();
}

/// How many jobs a worker of process `pid` holds (`running`, its `host:pid/n` in `worker`).
pub(crate) async fn running_jobs_of(url: &str, pid: u32) -> i64 {
    let sql =
        format!("select count(*) from jobs where state = 'running' and worker like '%:{pid}/%'");
    let result: anyhow::Result<i64> = async {
        if url.starts_with("postgres") {
            let pool = sqlx::PgPool::connect(url).await?;
            let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                .fetch_one(&pool)
                .await?;
            pool.close().await;
            Ok(n)
        } else {
            let pool = sqlx::SqlitePool::connect(url).await?;
            let n = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.clone()))
                .fetch_one(&pool)
                .await?;
            pool.close().await;
            Ok(n)
        }
    }
    .await;
    result.unwrap_or(0)
}

pub(crate) async fn pg_terminate(ctx: &Ctx, url: &str) -> u64 {
    use sqlx::Row;
    let Ok(pool) = sqlx::PgPool::connect(url).await else {
        return 0;
    };
    let pids: Vec<i32> = sqlx::query(
        "select pid from pg_stat_activity where datname = current_database() \
         and pid <> pg_backend_pid() and backend_type = 'client backend' order by pid",
    )
    .fetch_all(&pool)
    .await
    .map(|rows| rows.iter().map(|r| r.get::<i32, _>(0)).collect())
    .unwrap_or_default();
    let mut n = 0;
    let want = 1 + ctx.below(3);
    for _ in 0..want {
        if pids.is_empty() {
            break;
        }
        let pid = pids[ctx.below(pids.len() as u64) as usize];
        if sqlx::query("select pg_terminate_backend($1)")
            .bind(pid)
            .execute(&pool)
            .await
            .is_ok()
        {
            n += 1;
        }
    }
    pool.close().await;
    n
}

pub(crate) fn pg_ctl(ctx: &Ctx, what: &str) -> bool {
    Command::new(&ctx.args.pg_script)
        .arg(what)
        .arg(&ctx.args.pg_dir)
        .stdout(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

pub(crate) async fn pg_checkpoint(url: &str) {
    if let Ok(pool) = sqlx::PgPool::connect(url).await {
        let _ = sqlx::query("checkpoint").execute(&pool).await;
        pool.close().await;
    }
}
// ------------------------------------------------------------------------------------------
// The TCP proxy that drops responses after the server has committed (S7).

pub(crate) async fn proxy(
    listener: tokio::net::TcpListener,
    upstream: String,
    percent: u64,
    seed: u64,
    dropped: Arc<Counters>,
) {
    let mut n = 0u64;
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        n += 1;
        // The decision for the n-th connection comes from the seed.
        let drop_it = Rng::new(seed, n).below(100) < percent;
        let upstream = upstream.clone();
        let dropped = dropped.clone();
        tokio::spawn(async move {
            let Ok(server) = tokio::net::TcpStream::connect(&upstream).await else {
                return;
            };
            let (mut cr, mut cw) = client.into_split();
            let (mut sr, mut sw) = server.into_split();
            let up = tokio::spawn(async move {
                let _ = tokio::io::copy(&mut cr, &mut sw).await;
                let _ = sw.shutdown().await;
            });
            let mut buf = vec![0u8; 16 * 1024];
            let mut first = true;
            while let Ok(k) = sr.read(&mut buf).await {
                if k == 0 {
                    break;
                }
                if first && drop_it {
                    // The server has answered, so it has committed: drop the answer unread.
                    let status = String::from_utf8_lossy(&buf[..k.min(12)]).into_owned();
                    let status = status.split(' ').nth(1).unwrap_or("?").to_owned();
                    dropped.add(&format!("responses dropped ({status})"), 1);
                    up.abort();
                    return;
                }
                first = false;
                if cw.write_all(&buf[..k]).await.is_err() {
                    break;
                }
            }
            let _ = cw.shutdown().await;
            up.abort();
        });
    }
}

/// Fills the file system holding `path` until it refuses a write; the bytes written.
pub(crate) fn fill_disk(path: &str) -> u64 {
    let Ok(mut f) = std::fs::File::create(path) else {
        return 0;
    };
    let chunk = vec![0u8; 64 * 1024];
    let mut total = 0u64;
    for _ in 0..1_000_000 {
        match f.write(&chunk) {
            Ok(0) | Err(_) => break,
            Ok(n) => total += n as u64,
        }
    }
    let _ = f.sync_all();
    total
}

pub(crate) async fn sqlite_integrity(url: &str) -> String {
    use sqlx::Row;
    let Ok(pool) = sqlx::SqlitePool::connect(url).await else {
        return "cannot open".into();
    };
    let r = sqlx::query("pragma integrity_check")
        .fetch_all(&pool)
        .await
        .map(|rows| {
            rows.iter()
                .map(|r| r.get::<String, _>(0))
                .collect::<Vec<_>>()
                .join("; ")
        })
        .unwrap_or_else(|e| e.to_string());
    pool.close().await;
    r
}
