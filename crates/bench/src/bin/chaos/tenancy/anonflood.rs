//! `anonflood`: anonymous sign-in and invitation floods; the server's peak memory.

use super::{TenancyRun, client_from, code_of, env_of, report, timed};
use crate::checker::Verdict;
use crate::counters::Counters;
use crate::ctx::Ctx;
use crate::process::Server;
use crate::workload::{DEMO_EMAIL, DEMO_PASSWORD};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A distinct, valid-looking email of exactly 254 characters (the longest the contract
/// admits): a short local part and a domain of labels of at most 60 characters.
fn long_email(n: usize) -> String {
    let a = "a".repeat(60);
    let e = format!(
        "flood{:07}@{a}.{a}.{a}.{}.com",
        n % 10_000_000,
        "a".repeat(54)
    );
    debug_assert_eq!(e.len(), 254);
    e
}

/// The process's resident memory, from /proc (VmRSS, or VmHWM: its peak), in KiB.
fn proc_kib(pid: u32, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// A flooding client sends its next request at once, except after a 503 or 429 (or a
/// transport error): then it waits 50 ms, as a careless client would (not the Retry-After), so
/// the flood is the service's cost of answering and not a loopback busy loop.
async fn pace(status: u16) {
    if matches!(status, 0 | 429 | 503) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// `anonflood`: anonymous sign-in and invitation floods from other loopback addresses while a
/// legitimate sign-in comes from 127.0.0.1; the server's peak RSS.
pub(crate) async fn anonflood(
    ctx: &Ctx,
    http: &reqwest::Client,
    v: &mut Verdict,
    extra: &mut BTreeMap<String, Value>,
) -> TenancyRun {
    let args = &ctx.args;
    let q = args.quick;
    let sign_ins = if q { 1_000 } else { 10_000 };
    let accepts_parallel = 64;
    const RSS_LIMIT_MIB: f64 = 150.0;
    // The sign-in limit on, at its default (Server::spawn turns it off for the others).
    let env = env_of(&[("TAUROS_SIGN_IN_FAILURES", "10".to_owned())]);
    let mut s = Server::new(args, "serve", env);
    s.start(http, true).await;
    let base = s.base();
    let pid = s.pid().expect("the server runs");
    let rss_start = proc_kib(pid, "VmRSS:").unwrap_or(0);
    let done = Arc::new(AtomicBool::new(false));
    let rss_max = Arc::new(AtomicU64::new(rss_start));
    let sampler = {
        let (done, rss_max) = (done.clone(), rss_max.clone());
        tokio::spawn(async move {
            while !done.load(Ordering::Relaxed) {
                if let Some(k) = proc_kib(pid, "VmRSS:") {
                    rss_max.fetch_max(k, Ordering::Relaxed);
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };
    let started = Instant::now();
    let deadline = started + Duration::from_secs(if q { 30 } else { 150 });
    let answers = Arc::new(Counters::default());
    let next = Arc::new(AtomicUsize::new(0));
    let mut tasks = Vec::new();
    // The sign-in flood: 32 connections from 127.0.0.2.
    let flood = client_from([127, 0, 0, 2], true, Duration::from_secs(10));
    for _ in 0..32 {
        let (c, answers, next, url) = (
            flood.clone(),
            answers.clone(),
            next.clone(),
            format!("{base}/v1/sessions"),
        );
        tasks.push(tokio::spawn(async move {
            loop {
                let n = next.fetch_add(1, Ordering::Relaxed);
                if n >= sign_ins || Instant::now() > deadline {
                    break;
                }
                let body = json!({"email": long_email(n), "password": "a wrong password"});
                let (status, _, b) = timed(c.post(&url).json(&body)).await;
                answers.add(&format!("sign-in {}", code_of(status, &b)), 1);
                pace(status).await;
            }
        }));
    }
    // 64 parallel invitation accepts with bogus (well-formed) tokens from 127.0.0.3, for as
    // long as the sign-in flood lasts.
    let accept = client_from([127, 0, 0, 3], true, Duration::from_secs(10));
    let signing = Arc::new(AtomicBool::new(true));
    let mut accept_tasks = Vec::new();
    for t in 0..accepts_parallel {
        let (c, answers, signing, url) = (
            accept.clone(),
            answers.clone(),
            signing.clone(),
            format!("{base}/v1/invitations/accept"),
        );
        accept_tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while signing.load(Ordering::Relaxed) && Instant::now() < deadline {
                i += 1;
                let token = format!("tinv_{:0>43}", format!("bogus{t}x{i}"));
                let body = json!({"invitation_token": token, "password": "a new long password"});
                let (status, _, b) = timed(c.post(&url).json(&body)).await;
                answers.add(&format!("accept {}", code_of(status, &b)), 1);
                pace(status).await;
            }
        }));
    }
    // The legitimate sign-in, from 127.0.0.1, at 10 %, 50 % and 90 % of the flood. A 503
    // (the password pool's queue is full), a 429 or a transport error is retried every 250 ms,
    // bounded: a person retries too; it must end 201. A person's browser waits longer than
    // the campaign's 5 s client timeout: 20 s.
    let person = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .unwrap();
    let mut legit = Vec::new();
    for share in [10, 50, 90] {
        let wait_end = Instant::now() + Duration::from_secs(60);
        while next.load(Ordering::Relaxed) * 100 < sign_ins * share && Instant::now() < wait_end {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let t = Instant::now();
        let mut statuses = Vec::new();
        let mut last = 0;
        while t.elapsed() < Duration::from_secs(if q { 10 } else { 20 }) {
            let (status, _, _) = timed(
                person
                    .post(format!("{base}/v1/sessions"))
                    .json(&json!({"email": DEMO_EMAIL, "password": DEMO_PASSWORD})),
            )
            .await;
            statuses.push(status);
            last = status;
            if status != 503 && status != 429 && status != 0 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
        legit.push(json!({
            "at_percent": share, "status": last, "attempts": statuses.len(),
            "ms": t.elapsed().as_millis() as u64, "answers": statuses,
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    signing.store(false, Ordering::Relaxed);
    for t in accept_tasks {
        t.await.unwrap();
    }
    let flood_s = started.elapsed().as_secs_f64();
    done.store(true, Ordering::Relaxed);
    let _ = sampler.await;
    let hwm = proc_kib(pid, "VmHWM:").unwrap_or(0);
    let peak_kib = hwm.max(rss_max.load(Ordering::Relaxed));
    let peak_mib = (peak_kib as f64 / 1024.0 * 10.0).round() / 10.0;
    let legit_ok = legit.iter().all(|l| l["status"] == 201);
    let snapshot = answers.snapshot();
    let internal: u64 = snapshot
        .iter()
        .filter(|(k, _)| k.ends_with(" 500") || k.contains(" 500 "))
        .map(|(_, n)| *n)
        .sum();
    let sent: u64 = snapshot
        .iter()
        .filter(|(k, _)| k.starts_with("sign-in"))
        .map(|(_, n)| *n)
        .sum();
    let mut failed = Vec::new();
    if !legit_ok {
        failed.push("the legitimate sign-in did not succeed".to_owned());
    }
    if peak_mib >= RSS_LIMIT_MIB {
        failed.push(format!("peak RSS {peak_mib} MiB ≥ {RSS_LIMIT_MIB} MiB"));
    }
    if internal > 0 {
        failed.push(format!("{internal} answers were 500"));
    }
    if sent < sign_ins as u64 {
        v.note(format!(
            "only {sent} of {sign_ins} wrong sign-ins were sent before the time bound"
        ));
    }
    let summary = format!(
        "{sent} wrong sign-ins + invitation accepts in {flood_s:.1} s; peak RSS {peak_mib} MiB (start {:.1} MiB, limit {RSS_LIMIT_MIB}); legitimate sign-ins {}",
        rss_start as f64 / 1024.0,
        legit
            .iter()
            .map(|l| format!(
                "{} after {} attempt(s), {} ms",
                l["status"], l["attempts"], l["ms"]
            ))
            .collect::<Vec<_>>()
            .join(" / ")
    );
    report(
        "anonflood",
        &summary,
        &failed,
        json!({
            "sign_ins": sign_ins, "sent": sent, "accepts_parallel": accepts_parallel,
            "answers": snapshot, "flood_seconds": (flood_s * 10.0).round() / 10.0,
            "rss_start_mib": (rss_start as f64 / 1024.0 * 10.0).round() / 10.0,
            "rss_peak_mib": peak_mib, "rss_limit_mib": RSS_LIMIT_MIB,
            "legitimate": legit, "legitimate_ok": legit_ok,
        }),
        v,
        extra,
    );
    TenancyRun::of_server(s)
}
