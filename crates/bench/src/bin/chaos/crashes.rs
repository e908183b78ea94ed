//! One server's faults under the lifecycle load: `kill` (kill -9 of the server), `pgcrash`
//! (PostgreSQL crashed and backends terminated; the negative control with `--expect-loss`),
//! `drop` (answers dropped after the commit) and `diskfull` (a full disk under SQLite).

use crate::checker::Verdict;
use crate::counters::Counters;
use crate::ctx::{Ctx, ScenarioRun, base_env};
use crate::driver::Driver;
use crate::nemesis::{
    fill_disk, pg_checkpoint, pg_ctl, pg_terminate, proxy, sqlite_integrity, with_nemesis,
};
use crate::process::Server;
use crate::workload::{Records, fixture};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// `kill`: `kill -9` of the server under the lifecycle load, restarted each time.
pub(crate) async fn kill(ctx: &Ctx, http: &reqwest::Client) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut s = Server::new(&args, "serve", base_env());
    s.start(http, true).await;
    driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(20)));
    let f = Arc::new(fixture(&driver, 8, &args.label).await);
    let kills = if q { 4 } else { 10 };
    let load_for = Duration::from_secs(if q { 16 } else { 45 });
    let server = Arc::new(tokio::sync::Mutex::new(s));
    let srv = server.clone();
    let (ctx_ref, d2) = (ctx, driver.clone());
    records = with_nemesis(
        ctx,
        driver.clone(),
        f,
        8,
        load_for,
        move |stop| async move {
            let end = Instant::now() + load_for - Duration::from_secs(2);
            for _ in 0..kills {
                tokio::time::sleep(if q {
                    ctx_ref.rand_ms(1000, 3000)
                } else {
                    ctx_ref.rand_ms(1000, 5000)
                })
                .await;
                if Instant::now() > end || stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut s = srv.lock().await;
                s.kill();
                let killed_at = Instant::now();
                ctx_ref.faults.add("kill -9", 1);
                s.start(&d2.client, false).await;
                drop(s);
                ctx_ref.recovered_in(
                    d2.first_ok_after(killed_at, Duration::from_secs(20))
                        .await
                        .map(|x| x + Duration::ZERO),
                );
            }
        },
    )
    .await;
    let s = Arc::try_unwrap(server).ok().unwrap().into_inner();
    servers.push(s);
    ScenarioRun {
        records,
        driver,
        servers,
        helpers: Vec::new(),
    }
}

/// `pgcrash`: PostgreSQL crashed (`stop -m immediate`) and restarted, and backends terminated,
/// in a seeded order under the lifecycle load; with `--expect-loss` the negative control.
pub(crate) async fn pgcrash(ctx: &Ctx, http: &reqwest::Client) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut s = Server::new(&args, "serve", base_env());
    s.start(http, true).await;
    driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(25)));
    servers.push(s);
    let f = Arc::new(fixture(&driver, 8, &args.label).await);
    // Setup is durable before the first crash, also with synchronous_commit=off.
    pg_checkpoint(&args.db_url).await;
    let crashes = if args.expect_loss {
        if q { 4 } else { 5 }
    } else if q {
        2
    } else {
        4
    };
    let terminations = if q { 3 } else { 6 };
    let load_for = Duration::from_secs(if q { 20 } else { 45 });
    let (ctx_ref, d2, url) = (ctx, driver.clone(), args.db_url.clone());
    records = with_nemesis(
        ctx,
        driver.clone(),
        f,
        8,
        load_for,
        move |stop| async move {
            let end = Instant::now() + load_for - Duration::from_secs(3);
            let mut plan: Vec<bool> = (0..crashes).map(|_| true).collect();
            plan.extend((0..terminations).map(|_| false));
            // A seeded order of crashes and terminations.
            for i in (1..plan.len()).rev() {
                let j = ctx_ref.below(i as u64 + 1) as usize;
                plan.swap(i, j);
            }
            // A crash costs about 2.5 s (stop, down, restart, the pool's recovery):
            // leave room for every planned one before the load's deadline.
            let busy = 3000 + 2500 * crashes as u64;
            let gap = (load_for.as_millis() as u64).saturating_sub(busy) / (plan.len() as u64 + 1);
            let gap = gap.max(300);
            for crash in plan {
                tokio::time::sleep(ctx_ref.rand_ms(gap / 2, gap)).await;
                if Instant::now() > end || stop.load(Ordering::Relaxed) {
                    break;
                }
                if crash {
                    if !pg_ctl(ctx_ref, "crash") {
                        ctx_ref.faults.add("pg_crash_failed", 1);
                        continue;
                    }
                    ctx_ref.faults.add("pg stop -m immediate", 1);
                    tokio::time::sleep(ctx_ref.rand_ms(300, 1500)).await;
                    if !pg_ctl(ctx_ref, "restart") {
                        panic!("PostgreSQL did not restart");
                    }
                    let back = Instant::now();
                    ctx_ref.recovered_in(d2.first_ok_after(back, Duration::from_secs(30)).await);
                } else {
                    let n = pg_terminate(ctx_ref, &url).await;
                    ctx_ref.faults.add("pg_terminate_backend", n);
                }
            }
        },
    )
    .await;
    ScenarioRun {
        records,
        driver,
        servers,
        helpers: Vec::new(),
    }
}

/// `drop`: answers dropped after the server committed (the proxy), one connection per request.
pub(crate) async fn drop_answers(ctx: &Ctx, http: &reqwest::Client) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut s = Server::new(&args, "serve", base_env());
    s.start(http, true).await;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let at = listener.local_addr().unwrap();
    let dropped: Arc<Counters> = Arc::default();
    let upstream = format!("127.0.0.1:{}", s.port);
    tokio::spawn(proxy(listener, upstream, 10, args.seed, dropped.clone()));
    // Setup straight to the server; the measured traffic through the proxy, one
    // connection per request, so each dropped answer is one request's.
    let setup = Driver::new(vec![s.base()], true, Duration::from_secs(20));
    let f = Arc::new(fixture(&setup, 8, &args.label).await);
    driver = Arc::new(Driver::new(
        vec![format!("http://{at}")],
        false,
        Duration::from_secs(20),
    ));
    servers.push(s);
    let load_for = Duration::from_secs(if q { 10 } else { 30 });
    records = with_nemesis(ctx, driver.clone(), f, 8, load_for, |_| async {}).await;
    for (k, n) in dropped.snapshot() {
        ctx.faults.add(&k, n);
    }
    ScenarioRun {
        records,
        driver,
        servers,
        helpers: Vec::new(),
    }
}

/// `diskfull`: the file system of the SQLite database filled up under the load, then freed.
pub(crate) async fn diskfull(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut s = Server::new(&args, "serve", base_env());
    s.start(http, true).await;
    driver = Arc::new(Driver::new(vec![s.base()], true, Duration::from_secs(15)));
    let f = Arc::new(fixture(&driver, 4, &args.label).await);
    let server = Arc::new(tokio::sync::Mutex::new(s));
    let srv = server.clone();
    let load_for = Duration::from_secs(if q { 14 } else { 30 });
    let (ctx_ref, d2, fill) = (ctx, driver.clone(), args.fill_dir.clone());
    let full_figures: Arc<Mutex<BTreeMap<String, Value>>> = Arc::default();
    let ff = full_figures.clone();
    records = with_nemesis(ctx, driver.clone(), f, 4, load_for, move |_stop| async move {
            let rounds = if q { 1 } else { 2 };
            for round in 0..rounds {
                tokio::time::sleep(ctx_ref.rand_ms(2000, 3000)).await;
                let path = format!("{fill}/filler");
                let bytes = fill_disk(&path);
                ctx_ref.faults.add("disk full", 1);
                let before = d2.counters.snapshot();
                tokio::time::sleep(Duration::from_secs(3)).await;
                let after = d2.counters.snapshot();
                let delta = |k: &str| after.get(k).unwrap_or(&0) - before.get(k).unwrap_or(&0);
                let alive = srv.lock().await.alive();
                ff.lock().unwrap().insert(
                    format!("full{round}"),
                    json!({"filler_bytes": bytes, "5xx": delta("resp.5xx"), "2xx": delta("resp.fresh") + delta("resp.replayed"), "server_alive": alive}),
                );
                let _ = std::fs::remove_file(&path);
                let freed = Instant::now();
                if !alive {
                    ctx_ref.faults.add("server died on a full disk", 1);
                    srv.lock().await.start(&d2.client, false).await;
                }
                ctx_ref.recovered_in(d2.first_ok_after(freed, Duration::from_secs(20)).await);
            }
        })
        .await;
    extra.insert("disk".into(), json!(full_figures.lock().unwrap().clone()));
    // Nothing corrupt: SQLite's own check over the whole file.
    let ok = sqlite_integrity(&args.db_url).await;
    extra.insert("integrity_check".into(), json!(ok));
    if ok != "ok" {
        v.wrong += 1;
        v.note(format!("integrity_check: {ok}"));
    }
    let s = Arc::try_unwrap(server).ok().unwrap().into_inner();
    servers.push(s);
    ScenarioRun {
        records,
        driver,
        servers,
        helpers: Vec::new(),
    }
}
