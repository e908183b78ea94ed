//! The HA scenario of the fault campaign (docs/RELIABILITY.md, "HA formation"; run by
//! `scripts/ha`): two Tauros replicas with workers on a pg_auto_failover formation (a monitor,
//! a primary and a secondary), the reference peer and a webhook receiver; the lifecycle load
//! through the retrying driver while failovers are forced:
//!
//! - `planned`: `pg_autoctl perform failover` (the monitor drains the primary, promotes the
//!   secondary, the old primary rejoins as secondary);
//! - `kill`: a machine death of the primary: `kill -9` of its keeper and its postgres (the
//!   whole process group, so the keeper cannot restart postgres in place); the keeper is
//!   started again once the secondary is promoted, and rejoins as secondary.
//!
//! The formation is driven through `scripts/ha ctl ACTION DIR` (`--pg-script`, `--pg-dir`).
//! With `--expect-loss` (the negative control, asynchronous replication) the primary's
//! walsenders are stopped (SIGSTOP) for a while before the kill, so the standby is behind.
//!
//! The checker: the campaign's lifecycle and effects checks over the whole run, and the same
//! per failover over the keys whose latest step ended between that failover's command and the
//! next one's; the time from the command to the first 2xx after the monitor reports the new
//! primary writable; the 503s (and transport errors) between the command and that 2xx.
//!
//! The bank feed and its check are payments.rs; the report's tables tables.rs.

mod payments;
mod tables;

pub(crate) use tables::tables;

use crate::args::Args;
use crate::checker::{
    ALL_EVENTS, DbInvoice, Verdict, check_effects, check_lifecycle, db_invoices, settle,
};
use crate::ctx::{Ctx, prefix};
use crate::dead_ends;
use crate::driver::Driver;
use crate::nemesis::with_nemesis;
use crate::process::{Helper, Server, peer_command, spawn_helper, spawn_receiver};
use crate::workload::{KeyRecord, Records, Step, fixture, setup_post};
use payments::{Paid, check_payments, feed_payments};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What the HA scenario hands back to `run()`.
pub(crate) struct HaRun {
    pub(crate) records: Records,
    pub(crate) driver: Arc<Driver>,
    pub(crate) servers: Vec<Server>,
    pub(crate) helpers: Vec<Helper>,
    /// A single-host URL of the primary at the end (the checker's sqlx takes one host).
    pub(crate) check_url: String,
}

/// `scripts/ha ctl ACTION DIR EXTRA...`, blocking, bounded by `timeout`; success and stdout.
fn ctl(args: &Args, action: &str, extra: &[&str], secs: u64) -> (bool, String) {
    let out = Command::new("timeout")
        .arg("-s")
        .arg("KILL")
        .arg(secs.to_string())
        .arg(&args.pg_script)
        .arg("ctl")
        .arg(action)
        .arg(&args.pg_dir)
        .args(extra)
        .stdin(Stdio::null())
        .stderr(Stdio::inherit())
        .output();
    match out {
        Ok(o) => (
            o.status.success(),
            String::from_utf8_lossy(&o.stdout).trim().to_owned(),
        ),
        Err(e) => (false, e.to_string()),
    }
}

async fn ctl_async(args: &Args, action: &str, extra: &[&str], secs: u64) -> (bool, String) {
    let (args, action) = (args.clone(), action.to_owned());
    let extra: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let e: Vec<&str> = extra.iter().map(String::as_str).collect();
        ctl(&args, &action, &e, secs)
    })
    .await
    .unwrap_or((false, "panicked".into()))
}

/// The monitor's database (trust on the loopback; no TLS needed for it).
fn monitor_url(args: &Args) -> String {
    let port = std::fs::read_to_string(format!("{}/monitor.port", args.pg_dir)).unwrap_or_default();
    format!(
        "postgres://postgres@127.0.0.1:{}/pg_auto_failover",
        port.trim()
    )
}

/// The node the monitor reports as a writable primary (reported = assigned, primary or
/// wait_primary), if any.
async fn writable_primary(pool: &sqlx::PgPool) -> Option<String> {
    sqlx::query_scalar::<_, String>(
        "select nodename from pgautofailover.node \
         where reportedstate in ('primary', 'wait_primary') and goalstate = reportedstate \
         order by nodeid limit 1",
    )
    .fetch_optional(pool)
    .await
    .ok()
    .flatten()
}

#[derive(Clone, Debug)]
struct Failover {
    kind: &'static str,
    /// µs since the driver's epoch: the start of its period (the keys whose latest step ended
    /// from here to the next failover's period are its keys; for the control, before the lag).
    period_us: u64,
    /// µs since the driver's epoch: the command, the monitor's report of the new primary,
    /// the first 2xx after it.
    at_us: u64,
    promoted_us: Option<u64>,
    first_write_us: Option<u64>,
    from: String,
    to: String,
    /// The negative control: the walsenders stopped before the kill.
    lag: String,
}

pub(crate) async fn ha(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> HaRun {
    let args = &ctx.args;
    let q = args.quick;
    let control = args.expect_loss;
    let pre = prefix(args);
    let peer_db = format!("{}/{}-peer.db", args.work, args.label);
    let peer = spawn_helper(args, peer_command(args, 0, &peer_db, None), "peer");
    let receiver = spawn_receiver(args, 0);
    let hooks = format!("{}/chaos", receiver.url);
    let mut env = dead_ends::issuer_env(&peer.url, 2, None);
    env.extend(
        [
            ("TAUROS_ISSUER_TIMEOUT_SECONDS", "3"),
            ("TAUROS_WEBHOOK_ALLOW_HOSTS", "127.0.0.1"),
            ("TAUROS_JOB_BACKOFF_CAP_SECONDS", "2"),
            ("TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS", "2"),
        ]
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned())),
    );
    let mut replicas = Vec::new();
    for r in 0..2 {
        let mut s = Server::new(args, &format!("replica{r}"), env.clone());
        s.start(http, r == 0).await;
        replicas.push(s);
    }
    let bases: Vec<String> = replicas.iter().map(Server::base).collect();
    // A failover takes seconds: every command may retry for 30 s.
    let driver = Arc::new(Driver::new(bases, true, Duration::from_secs(30)));
    let f = Arc::new(fixture(&driver, 6, &args.label).await);
    let human = f.human.clone();
    setup_post(
        &driver,
        "/v1/webhook-endpoints",
        &human,
        json!({"url": hooks, "events": ALL_EVENTS, "description": "chaos ha"}),
    )
    .await;
    // The bank feed: an agent with only `settlement`, paying every issued invoice in full
    // during the load (and redelivering some of its events, as payment providers do).
    let feed = setup_post(
        &driver,
        "/v1/agents",
        &human,
        json!({"name": "HA bank feed", "capabilities": ["settlement"]}),
    )
    .await;
    let feed_key = feed["api_key"].as_str().map(str::to_owned);
    driver.counters.0.lock().unwrap().clear();
    driver.answers.lock().unwrap().clear();
    let payments: Arc<Mutex<BTreeMap<String, Paid>>> = Arc::default();
    let feeding = Arc::new(AtomicBool::new(false));
    let feeder = feed_key.clone().map(|key| {
        tokio::spawn(feed_payments(
            driver.clone(),
            human.clone(),
            key,
            payments.clone(),
            feeding.clone(),
            args.seed,
        ))
    });

    // The plan: the control is one kill with the standby behind; quick is one kill; the full
    // run alternates planned failovers and kills, four in all, the first chosen by the seed.
    let kinds: Vec<&'static str> = if control || q {
        vec!["kill"]
    } else if args.seed.is_multiple_of(2) {
        vec!["planned", "kill", "planned", "kill"]
    } else {
        vec!["kill", "planned", "kill", "planned"]
    };
    let mode = if control { "async" } else { "sync" };
    let monitor = sqlx::postgres::PgPoolOptions::new()
        .max_connections(2)
        .acquire_timeout(Duration::from_secs(5))
        .connect(&monitor_url(args))
        .await
        .expect("connect to the monitor");
    let failovers: Arc<Mutex<Vec<Failover>>> = Arc::default();
    let load_cap = Duration::from_secs(if q { 120 } else { 400 });
    let (fo, d2, mon) = (failovers.clone(), driver.clone(), monitor.clone());
    let records = with_nemesis(ctx, driver.clone(), f, 6, load_cap, move |stop| async move {
        for (n, kind) in kinds.into_iter().enumerate() {
            // Load on a healthy formation first.
            tokio::time::sleep(ctx.rand_ms(3000, 5000)).await;
            let (ok, state) = ctl_async(args, "healthy", &[mode, "120"], 130).await;
            if !ok {
                ctx.faults.add("formation_not_healthy", 1);
                eprintln!("ha: failover {n}: the formation is not healthy; stopping");
                break;
            }
            eprintln!("ha: failover {n} ({kind}): {state}");
            let from = writable_primary(&mon).await.unwrap_or_default();
            let period_us = d2.now_us();
            let mut lag = String::new();
            if control {
                // The standby falls behind: the primary's walsenders stop sending while
                // commits keep being acknowledged (asynchronous replication waits for none).
                let (_, pids) = ctl_async(args, "lag", &[], 20).await;
                lag = format!("walsender {pids} stopped 2 s before the kill");
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
            let at_us = d2.now_us();
            let planned = if kind == "planned" {
                let a = args.clone();
                Some(tokio::task::spawn_blocking(move || {
                    ctl(&a, "failover", &[], 100)
                }))
            } else {
                let (ok, out) = ctl_async(args, "crash", &[], 20).await;
                if !ok {
                    ctx.faults.add("crash_failed", 1);
                    eprintln!("ha: crash failed: {out}");
                }
                None
            };
            ctx.faults.add(
                if kind == "planned" {
                    "pg_autoctl perform failover"
                } else {
                    "kill -9 primary node (keeper + postgres)"
                },
                1,
            );
            // The monitor reports another node writable (bounded).
            let mut promoted_us = None;
            let mut to = String::new();
            let end = Instant::now() + Duration::from_secs(90);
            while Instant::now() < end {
                if let Some(p) = writable_primary(&mon).await
                    && p != from
                {
                    promoted_us = Some(d2.now_us());
                    to = p;
                    break;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            // The first 2xx after that.
            let mut first_write_us = None;
            if let Some(p) = promoted_us {
                let since = d2.epoch + Duration::from_micros(p);
                if let Some(d) = d2.first_ok_after(since, Duration::from_secs(60)).await {
                    first_write_us = Some(p + d.as_micros() as u64);
                }
            }
            ctx.recovered_in(first_write_us.map(|w| Duration::from_micros(w - at_us)));
            eprintln!(
                "ha: failover {n} ({kind}) {from} -> {to}: promoted after {:?} ms, first write after {:?} ms",
                promoted_us.map(|p| (p - at_us) / 1000),
                first_write_us.map(|w| (w - at_us) / 1000)
            );
            if let Some(t) = planned {
                let (ok, _) = t.await.unwrap_or((false, String::new()));
                if !ok {
                    ctx.faults.add("perform_failover_failed", 1);
                }
            } else {
                ctl_async(args, "unlag", &[], 20).await;
                let (ok, _) = ctl_async(args, "rejoin", &[], 30).await;
                if !ok {
                    ctx.faults.add("rejoin_failed", 1);
                }
            }
            fo.lock().unwrap().push(Failover {
                kind,
                period_us,
                at_us,
                promoted_us,
                first_write_us,
                from,
                to,
                lag,
            });
            if promoted_us.is_none() {
                break;
            }
        }
        // Load on the new primary for a while, then stop.
        tokio::time::sleep(Duration::from_secs(4)).await;
        stop.store(true, Ordering::Relaxed);
    })
    .await;

    // The formation back to a primary and its secondary (not waited for in the control: the
    // old primary's WAL diverged, its rejoin takes a pg_rewind, and nothing below needs it).
    if !control {
        let _ = ctl_async(args, "healthy", &[mode, "90"], 100).await;
    }
    let (_, primary) = ctl_async(args, "primary-url", &[db_name(&args.db_url)], 20).await;
    let check_url = primary;
    settle(
        http,
        &check_url,
        &pre,
        &hooks,
        &ALL_EVENTS,
        // The control lost approvals whose issue jobs went with them: no point waiting long.
        // The full run leaves a backlog of deliveries to its one endpoint (about 5,500 events,
        // delivered at roughly 25 a second here): up to 4 minutes, the quick run's 2,000 up to
        // 2 (a slower CI machine); it ends as soon as they stop coming.
        Duration::from_secs(if control {
            15
        } else if q {
            120
        } else {
            240
        }),
    )
    .await;
    // The feed pays what was issued after the load stopped too, then stops.
    feeding.store(true, Ordering::Relaxed);
    if let Some(feeder) = feeder {
        let _ = tokio::time::timeout(Duration::from_secs(120), feeder).await;
    } else {
        v.note("no bank feed: granting `settlement` did not answer an API key".into());
    }
    let db = db_invoices(&check_url, &pre)
        .await
        .expect("read the database");
    check_effects(http, &peer.url, &hooks, &ALL_EVENTS, &db, v).await;
    let paid = payments.lock().unwrap().clone();
    let settlement = check_payments(&check_url, &paid, v).await;
    extra.insert("settlement".into(), settlement);

    // Per failover: the keys whose latest step ended in its period.
    let recs = records.lock().unwrap().clone();
    let fos = failovers.lock().unwrap().clone();
    let answers = driver.answers.lock().unwrap().clone();
    let mut per = Vec::new();
    for (i, fo) in fos.iter().enumerate() {
        let next = fos.get(i + 1).map_or(u64::MAX, |n| n.period_us);
        let sub: BTreeMap<String, KeyRecord> = recs
            .iter()
            .filter(|(_, r)| r.last_us >= fo.period_us && r.last_us < next)
            .map(|(k, r)| (k.clone(), r.clone()))
            .collect();
        let sub_db: Vec<DbInvoice> = db
            .iter()
            .filter(|i| sub.contains_key(&i.key))
            .cloned()
            .collect();
        let mut pv = Verdict::default();
        check_lifecycle(&sub, &sub_db, &mut pv);
        let mut ev = Verdict::default();
        check_effects(http, &peer.url, &hooks, &ALL_EVENTS, &sub_db, &mut ev).await;
        let acknowledged: u64 = sub
            .values()
            .map(|r| r.steps.iter().filter(|s| **s == Step::Acked).count() as u64)
            .sum();
        let until = fo.first_write_us.unwrap_or(next.min(driver.now_us()));
        let window: Vec<u16> = answers
            .iter()
            .filter(|(t, _)| *t >= fo.at_us && *t <= until)
            .map(|(_, s)| *s)
            .collect();
        let count = |f: &dyn Fn(u16) -> bool| window.iter().filter(|s| f(**s)).count() as u64;
        let ms = |t: Option<u64>| t.map(|t| (t - fo.at_us) / 1000);
        per.push(json!({
            "n": i + 1,
            "kind": fo.kind,
            "from": fo.from,
            "to": fo.to,
            "lag": fo.lag,
            "keys": sub.len(),
            "acknowledged": acknowledged,
            "lost": pv.lost + ev.lost,
            "duplicated": pv.duplicated + ev.duplicated,
            "wrong": pv.wrong,
            "promoted_ms": ms(fo.promoted_us),
            "first_write_ms": ms(fo.first_write_us),
            "answers_503": count(&|s| s == 503),
            "answers_500": count(&|s| s == 500),
            "transport_errors": count(&|s| s == 0),
            "answers_2xx": count(&|s| (200..300).contains(&s)),
        }));
    }
    let acknowledged: u64 = recs
        .values()
        .map(|r| r.steps.iter().filter(|s| **s == Step::Acked).count() as u64)
        .sum();
    extra.insert("failovers".into(), json!(per));
    extra.insert(
        "ha".into(),
        json!({
            "replication": mode,
            "acknowledged": acknowledged,
            "answers_503": answers.iter().filter(|(_, s)| *s == 503).count(),
            "answers_500": answers.iter().filter(|(_, s)| *s == 500).count(),
            "transport_errors": answers.iter().filter(|(_, s)| *s == 0).count(),
        }),
    );
    if fos.len() < if control || q { 1 } else { 3 }
        || fos.iter().any(|f| f.first_write_us.is_none())
    {
        extra.insert(
            "scenario_failed".into(),
            json!("a failover did not complete"),
        );
        v.note(format!(
            "{} failovers, {} with a first write",
            fos.len(),
            fos.iter().filter(|f| f.first_write_us.is_some()).count()
        ));
    }
    monitor.close().await;
    HaRun {
        records,
        driver,
        servers: replicas,
        helpers: vec![peer, receiver],
        check_url,
    }
}

/// The database name of a (possibly multi-host) URL.
fn db_name(url: &str) -> &str {
    let after = url.split("://").nth(1).unwrap_or("");
    let path = after.split_once('/').map_or("", |(_, p)| p);
    path.split('?').next().unwrap_or("")
}
