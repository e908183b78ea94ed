//! `slowheads`: slow connections from many addresses fill the connection cap; a prompt client
//! must still be answered within a second.

use super::{TenancyRun, ms, percentile, report};
use crate::checker::Verdict;
use crate::counters::Counters;
use crate::ctx::Ctx;
use crate::process::Server;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// The goal: every answer to the prompt client within this.
const GOAL: Duration = Duration::from_secs(1);

/// The loopback address of attacker `i`: 127.16.0.1 onwards, 250 to a /24, clear of the
/// prompt client (127.0.0.1) and of the other scenarios' addresses (127.0.0.x).
fn attacker_address(i: usize) -> [u8; 4] {
    [127, 16 + (i / 250) as u8, 0, 1 + (i % 250) as u8]
}

/// One attacker: connects from `from`, sends a request line and then one byte of a header
/// line a second, never ending it; when the server closes it, it comes back 100 ms later.
async fn slow_head(
    to: std::net::SocketAddr,
    from: [u8; 4],
    stop: Arc<AtomicBool>,
    c: Arc<Counters>,
) {
    while !stop.load(Ordering::Relaxed) {
        let Ok(sock) = TcpSocket::new_v4() else {
            return;
        };
        if sock.bind(std::net::SocketAddr::from((from, 0))).is_err() {
            c.add("bind failed", 1);
            return;
        }
        let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(5), sock.connect(to)).await
        else {
            c.add("connect failed", 1);
            tokio::time::sleep(Duration::from_millis(250)).await;
            continue;
        };
        let opened = Instant::now();
        let mut alive = s
            .write_all(format!("GET /healthz HTTP/1.1\r\nHost: {to}\r\nX-Slow: ").as_bytes())
            .await
            .is_ok();
        if alive {
            c.add("connections opened", 1);
        }
        while alive && !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_secs(1)).await;
            let mut buf = [0u8; 64];
            // Closed by the server: end of stream, or an error on the write.
            let ended = matches!(
                tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await,
                Ok(Ok(0) | Err(_))
            );
            alive = !ended && s.write_all(b"a").await.is_ok();
        }
        if !alive {
            c.add("closed by the server", 1);
            c.add("held ms total", opened.elapsed().as_millis() as u64);
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The soft limit of open files of process `pid` ("self" for this one).
fn open_files_limit(pid: &str) -> Option<u64> {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// `slowheads`: 1,100 connections from 1,100 addresses send their heads a byte a second (the
/// server's default cap is 1,024); a prompt client from 127.0.0.1 asks `GET /healthz` every
/// 250 ms on a new connection. Goal: every answer within a second (printed, as `noisy`'s goal
/// is; the run fails only on a wrong answer, a transport error or a file-descriptor shortage).
pub(crate) async fn slowheads(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> TenancyRun {
    let args = &ctx.args;
    let q = args.quick;
    let attackers: usize = std::env::var("CHAOS_SLOW_HEADS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1100);
    let flood_for = Duration::from_secs(if q { 15 } else { 40 });
    let mut s = Server::new(args, "serve", Vec::new());
    s.start(http, true).await;
    let base = s.base();
    let pid = s.pid().expect("the server runs").to_string();
    let need = attackers as u64 + 300;
    let mut failed = Vec::new();
    for (who, limit) in [
        ("this process", open_files_limit("self")),
        ("the server", open_files_limit(&pid)),
    ] {
        if limit.is_some_and(|l| l < need) {
            failed.push(format!(
                "file descriptors: {who} may open {} files, fewer than the {need} needed (ulimit -n)",
                limit.unwrap_or(0)
            ));
        }
    }
    let to: std::net::SocketAddr = base
        .trim_start_matches("http://")
        .parse()
        .expect("the server's address");
    let stop = Arc::new(AtomicBool::new(false));
    let counters = Arc::new(Counters::default());
    let mut tasks = Vec::new();
    if failed.is_empty() {
        for i in 0..attackers {
            let (stop, c) = (stop.clone(), counters.clone());
            tasks.push(tokio::spawn(slow_head(to, attacker_address(i), stop, c)));
        }
    }
    // The ramp: until every attacker connected once (at most 15 s), then 2 s more.
    let ramp_end = Instant::now() + Duration::from_secs(15);
    while failed.is_empty()
        && counters.get("connections opened") < attackers as u64
        && Instant::now() < ramp_end
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_secs(2)).await;
    let prompt = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .pool_max_idle_per_host(0)
        .local_address(std::net::IpAddr::from([127, 0, 0, 1]))
        .build()
        .unwrap();
    let mut latencies = Vec::new();
    let mut wrong = BTreeMap::<String, u64>::new();
    let end = Instant::now() + flood_for;
    while failed.is_empty() && Instant::now() < end {
        let t = Instant::now();
        let status = match prompt.get(format!("{base}/healthz")).send().await {
            Ok(r) => r.status().as_u16(),
            Err(_) => 0,
        };
        latencies.push(t.elapsed().as_micros() as u64);
        if status != 200 {
            *wrong.entry(status.to_string()).or_default() += 1;
        }
        tokio::time::sleep(Duration::from_millis(250).saturating_sub(t.elapsed())).await;
    }
    stop.store(true, Ordering::Relaxed);
    for t in &tasks {
        t.abort();
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let metrics = http.get(format!("{base}/metrics")).send().await.ok();
    let metrics = match metrics {
        Some(r) => r.text().await.unwrap_or_default(),
        None => String::new(),
    };
    let metric = |name: &str| -> u64 {
        metrics
            .lines()
            .filter(|l| l.starts_with(name))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    let shed = metric("http_connections_shed_total");
    let header_timeouts = metric("http_timeouts_total{limit=\"header\"}");
    let n = latencies.len();
    let over = latencies
        .iter()
        .filter(|l| **l > GOAL.as_micros() as u64)
        .count();
    let (p50, p99, max) = (
        ms(percentile(&mut latencies, 50.0)),
        ms(percentile(&mut latencies, 99.0)),
        ms(latencies.iter().copied().max().unwrap_or(0)),
    );
    let met = failed.is_empty() && n > 0 && over == 0 && wrong.is_empty();
    if !wrong.is_empty() {
        failed.push(format!("the prompt client got {wrong:?}"));
    }
    let snapshot = counters.snapshot();
    let summary = format!(
        "prompt client {n} requests, p50 / p99 / max {p50} / {p99} / {max} ms, over 1 s {over}; {attackers} attackers: connections opened {}, closed by the server {}; server shed {shed}, header timeouts {header_timeouts}; goal (every answer within 1 s) {}",
        counters.get("connections opened"),
        counters.get("closed by the server"),
        if met { "met" } else { "missed" },
    );
    report(
        "slowheads",
        &summary,
        &failed,
        json!({
            "attackers": attackers, "prompt_requests": n, "p50_ms": p50, "p99_ms": p99,
            "max_ms": max, "over_goal": over, "wrong": wrong, "attack": snapshot,
            "shed": shed, "header_timeouts": header_timeouts,
            "goal": {"max_ms": GOAL.as_millis() as u64, "met": met},
        }),
        v,
        extra,
    );
    TenancyRun::of_server(s)
}
