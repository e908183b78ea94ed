//! The scenarios of replicas with workers: `replicas` (kill -9 of one replica at a time, the
//! peer and a webhook receiver) and `paused` (fencing: a replica frozen past its lease).

use crate::checker::{ALL_EVENTS, Verdict, check_effects, db_invoices, settle};
use crate::ctx::{Ctx, ScenarioRun, prefix};
use crate::driver::Driver;
use crate::nemesis::{running_jobs_of, signal, with_nemesis};
use crate::process::{Helper, Server, peer_command, spawn_helper, spawn_receiver};
use crate::workload::{Records, fixture, setup_post};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// `replicas`: three replicas with workers, one killed at a time, with the peer and a webhook
/// receiver; every issue and webhook exactly once.
pub(crate) async fn replicas(ctx: &Ctx, http: &reqwest::Client, v: &mut Verdict) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let pre = prefix(&args);
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut helpers: Vec<Helper> = Vec::new();
    let peer_db = format!("{}/{}-peer.db", args.work, args.label);
    let peer = spawn_helper(&args, peer_command(&args, 0, &peer_db, None), "peer");
    let receiver = spawn_receiver(&args, 0);
    let hooks = format!("{}/chaos", receiver.url);
    let env: Vec<(String, String)> = [
        ("TAUROS_ISSUER", "http".to_owned()),
        ("TAUROS_ISSUER_URL", format!("{}/invoices", peer.url)),
        ("TAUROS_ISSUER_TIMEOUT_SECONDS", "3".to_owned()),
        ("TAUROS_WEBHOOK_ALLOW_HOSTS", "127.0.0.1".to_owned()),
        ("TAUROS_WORKERS", "2".to_owned()),
        ("TAUROS_JOB_POLL_MS", "100".to_owned()),
        ("TAUROS_JOB_LEASE_SECONDS", "3".to_owned()),
        ("TAUROS_JOB_BACKOFF_CAP_SECONDS", "2".to_owned()),
        ("TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS", "2".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut replicas = Vec::new();
    for r in 0..3 {
        let mut s = Server::new(&args, &format!("replica{r}"), env.clone());
        s.start(http, r == 0).await;
        replicas.push(s);
    }
    let bases: Vec<String> = replicas.iter().map(Server::base).collect();
    driver = Arc::new(Driver::new(bases, true, Duration::from_secs(20)));
    let f = Arc::new(fixture(&driver, 6, &args.label).await);
    setup_post(
            &driver,
            "/v1/webhook-endpoints",
            &f.human,
            json!({"url": hooks, "events": ["invoice.created", "invoice.approved", "invoice.issued"], "description": "chaos"}),
        )
        .await;
    driver.counters.0.lock().unwrap().clear();
    let kills = if q { 3 } else { 8 };
    let load_for = Duration::from_secs(if q { 16 } else { 45 });
    let reps = Arc::new(tokio::sync::Mutex::new(replicas));
    let (ctx_ref, d2, reps2) = (ctx, driver.clone(), reps.clone());
    records = with_nemesis(
        ctx,
        driver.clone(),
        f,
        6,
        load_for,
        move |stop| async move {
            let end = Instant::now() + load_for - Duration::from_secs(2);
            for _ in 0..kills {
                tokio::time::sleep(ctx_ref.rand_ms(1000, if q { 3000 } else { 4000 })).await;
                if Instant::now() > end || stop.load(Ordering::Relaxed) {
                    break;
                }
                let r = ctx_ref.below(3) as usize;
                let mut all = reps2.lock().await;
                all[r].kill();
                ctx_ref.faults.add("kill -9 (replica)", 1);
                let down_at = Instant::now();
                tokio::time::sleep(ctx_ref.rand_ms(200, 1500)).await;
                all[r].start(&d2.client, false).await;
                ctx_ref
                    .recovery_ms
                    .lock()
                    .unwrap()
                    .push(down_at.elapsed().as_millis() as u64);
            }
        },
    )
    .await;
    settle(
        http,
        &args.db_url,
        &pre,
        &hooks,
        &["invoice.created", "invoice.approved", "invoice.issued"],
        Duration::from_secs(if q { 40 } else { 90 }),
    )
    .await;
    let db = db_invoices(&args.db_url, &pre)
        .await
        .expect("read the database");
    check_effects(http, &peer.url, &hooks, &ALL_EVENTS, &db, v).await;
    servers.extend(Arc::try_unwrap(reps).ok().unwrap().into_inner());
    helpers.push(peer);
    helpers.push(receiver);
    ScenarioRun {
        records,
        driver,
        servers,
        helpers,
    }
}

/// `paused`: a replica frozen past its lease while it holds a job (fencing).
pub(crate) async fn paused(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> ScenarioRun {
    let args = ctx.args.clone();
    let q = args.quick;
    let pre = prefix(&args);
    let records: Records;
    let driver: Arc<Driver>;
    let mut servers: Vec<Server> = Vec::new();
    let mut helpers: Vec<Helper> = Vec::new();
    // Fencing (docs/RELIABILITY.md, "paused worker"): two serving replicas with
    // workers and a short lease; the driver talks to B only. A is frozen (SIGSTOP)
    // while it holds an issue job, past its lease, so B's upkeep rescues the job and B
    // issues the invoice; then A is thawed (SIGCONT) and must stop its handler, not
    // finish it. Before each freeze the peer is made slow for a few calls, so an issue
    // is in flight when A freezes.
    const LEASE_S: u64 = 2;
    // Files per backend: both runs share the work directory and the label.
    let peer_db = format!("{}/{}-{}-peer.db", args.work, args.label, args.backend);
    let peer = spawn_helper(&args, peer_command(&args, 0, &peer_db, None), "peer");
    let receiver = spawn_receiver(&args, 0);
    let hooks = format!("{}/chaos", receiver.url);
    let env: Vec<(String, String)> = [
        ("TAUROS_ISSUER", "http".to_owned()),
        ("TAUROS_ISSUER_URL", format!("{}/invoices", peer.url)),
        ("TAUROS_ISSUER_TIMEOUT_SECONDS", "5".to_owned()),
        ("TAUROS_WEBHOOK_ALLOW_HOSTS", "127.0.0.1".to_owned()),
        ("TAUROS_WORKERS", "2".to_owned()),
        ("TAUROS_JOB_POLL_MS", "100".to_owned()),
        ("TAUROS_JOB_LEASE_SECONDS", LEASE_S.to_string()),
        ("TAUROS_JOB_BACKOFF_CAP_SECONDS", "1".to_owned()),
        ("TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS", "2".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let (a_name, b_name) = (
        format!("replicaA-{}", args.backend),
        format!("replicaB-{}", args.backend),
    );
    let mut b = Server::new(&args, &b_name, env.clone());
    b.start(http, true).await;
    let mut a = Server::new(&args, &a_name, env);
    a.start(http, false).await;
    let a_pid = a.pid().expect("replica A runs");
    driver = Arc::new(Driver::new(vec![b.base()], true, Duration::from_secs(20)));
    let f = Arc::new(fixture(&driver, 4, &args.label).await);
    setup_post(
        &driver,
        "/v1/webhook-endpoints",
        &f.human,
        json!({"url": hooks, "events": ["invoice.issued"], "description": "chaos"}),
    )
    .await;
    driver.counters.0.lock().unwrap().clear();
    let pauses = if q { 3 } else { 6 };
    let load_for = Duration::from_secs(if q { 18 } else { 45 });
    let caught = Arc::new(AtomicU64::new(0));
    let (ctx_ref, url, caught2) = (ctx, args.db_url.clone(), caught.clone());
    let (faults_url, slow_http) = (format!("{}/faults", peer.url), http.clone());
    records = with_nemesis(
        ctx,
        driver.clone(),
        f,
        1,
        load_for,
        move |stop| async move {
            let freeze = Duration::from_secs(LEASE_S) + Duration::from_millis(2500);
            let end = Instant::now() + load_for - freeze;
            for _ in 0..pauses {
                tokio::time::sleep(ctx_ref.rand_ms(300, 1200)).await;
                if Instant::now() > end || stop.load(Ordering::Relaxed) {
                    break;
                }
                // Freeze A while it holds a job (bounded wait for one): the next few
                // peer calls are slow, so issues stay in flight.
                let _ = slow_http
                    .post(&faults_url)
                    .json(&json!({"mode": "slow", "millis": 1500, "times": 6}))
                    .send()
                    .await;
                let wait = Instant::now() + Duration::from_secs(3);
                let mut holds = 0;
                while Instant::now() < wait {
                    holds = running_jobs_of(&url, a_pid).await;
                    if holds > 0 {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                signal(a_pid, "STOP");
                ctx_ref.faults.add("SIGSTOP past the lease", 1);
                if holds > 0 {
                    caught2.fetch_add(1, Ordering::Relaxed);
                }
                let frozen = Instant::now();
                tokio::time::sleep(freeze).await;
                signal(a_pid, "CONT");
                ctx_ref
                    .recovery_ms
                    .lock()
                    .unwrap()
                    .push(frozen.elapsed().as_millis() as u64);
            }
        },
    )
    .await;
    settle(
        http,
        &args.db_url,
        &pre,
        &hooks,
        &["invoice.issued"],
        Duration::from_secs(if q { 30 } else { 90 }),
    )
    .await;
    let db = db_invoices(&args.db_url, &pre)
        .await
        .expect("read the database");
    check_effects(http, &peer.url, &hooks, &["invoice.issued"], &db, v).await;
    // A's own account: each thawed handler stopped (fencing), none finished late.
    let log = std::fs::read_to_string(format!("{}/{}-{a_name}.log", args.work, args.label))
        .unwrap_or_default();
    let stopped = log
        .lines()
        .filter(|l| l.contains("handler stopped, its outcome is not reported"))
        .count() as u64;
    let late = log
        .lines()
        .filter(|l| l.contains("late result of a lost lease ignored"))
        .count() as u64;
    let caught = caught.load(Ordering::Relaxed);
    v.notes.insert(0, format!(
            "fencing: {caught} freezes caught A holding a job, {stopped} handlers of A stopped, {late} late results ignored"
        ));
    extra.insert(
        "fencing".into(),
        json!({"pauses_with_a_job": caught, "handlers_stopped": stopped, "late_results": late}),
    );
    if caught > 0 && stopped == 0 {
        v.wrong += 1;
        v.note(format!(
            "A was frozen holding a job {caught} times, and no handler of it stopped"
        ));
    }
    servers.push(a);
    servers.push(b);
    helpers.push(peer);
    helpers.push(receiver);
    ScenarioRun {
        records,
        driver,
        servers,
        helpers,
    }
}
