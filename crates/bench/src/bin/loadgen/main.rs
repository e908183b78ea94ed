//! Load generator for `scripts/bench`: keep-alive HTTP/1.1 connections, one task per
//! connection, latencies in an HDR histogram. Prints one JSON line per run.
//!
//! Setup goes through the public API (sign in as the demo approver, create a fresh agent,
//! customer and destination), so the measured requests are exactly what clients send.
//!
//! ```text
//! cargo run --release -p tauros-bench --bin loadgen -- --base-url http://127.0.0.1:8080 \
//!     --scenario create --concurrency 32 --seconds 10
//! ```
//!
//! `--scenario fixture` only sets up (one invoice) and prints what an external client (`wrk`
//! in `scripts/bench`) needs to send the same GET and replay: the agent key, the invoice id,
//! its idempotency key and its body.
//!
//! `--ticks process PID` and `--ticks cluster POSTMASTER` only print the CPU clock ticks so far
//! of a process, or of PostgreSQL's whole process tree, the same counts a run charges (wrk's
//! runs in `scripts/bench` read them this way).
//!
//! `--scenario floor` measures the stack's floor instead (crates/bench/src/bin/floor.rs):
//! `GET /inv/{id}` with the bearer `--token`, over the invoice ids in the file `--ids` (one a
//! line), in rotation like `get`; no setup through Tauros's API.
//!
//! The modules: `fixture` (the setup), `scenario` (one unit of work of each), `ticks` (CPU
//! time from /proc).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fixture;
mod scenario;
mod ticks;

use clap::Parser;
use fixture::{draft, fixture};
use hdrhistogram::Histogram;
use scenario::step;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};
use ticks::{cluster_ticks, cpu_ticks};

/// The load generator of scripts/bench (docs/PERFORMANCE.md). A flag given twice takes its last
/// value.
#[derive(Parser)]
#[command(name = "loadgen", args_override_self = true)]
pub(crate) struct Args {
    #[arg(long, default_value = "http://127.0.0.1:8080")]
    pub(crate) base_url: String,
    /// The approver the setup signs in as.
    #[arg(long, default_value = "demo@tauros.local")]
    pub(crate) email: String,
    #[arg(long, default_value = "tauros-demo-password")]
    pub(crate) password: String,
    /// create, replay, get, lifecycle, fixture or floor.
    #[arg(long, default_value = "create")]
    pub(crate) scenario: String,
    #[arg(long, default_value_t = 8)]
    pub(crate) concurrency: usize,
    #[arg(long, default_value_t = 10.0)]
    pub(crate) seconds: f64,
    /// Invoices created up front for `replay` and `get`.
    #[arg(long, default_value_t = 200)]
    pub(crate) pool: usize,
    /// The server whose CPU time the measured window is charged.
    #[arg(long)]
    pub(crate) server_pid: Option<u32>,
    /// PostgreSQL's postmaster: the database's CPU over the window is its whole process tree's
    /// (`cluster_ticks`), backends that start or end inside the window included.
    #[arg(long)]
    pub(crate) db_postmaster: Option<u32>,
    /// `floor` only: the floor's bearer token.
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) token: String,
    /// `floor` only: a file of invoice ids, one a line.
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) ids: String,
    /// Only print the CPU clock ticks so far of a process (`process PID`) or of PostgreSQL's
    /// whole process tree (`cluster POSTMASTER`).
    #[arg(long, num_args = 2, value_names = ["WHAT", "PID"])]
    pub(crate) ticks: Option<Vec<String>>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some([what, pid]) = args.ticks.as_deref() {
        let ticks = match (what.as_str(), pid.parse().ok()) {
            ("process", Some(pid)) => cpu_ticks(pid),
            ("cluster", Some(pid)) => cluster_ticks(pid),
            _ => panic!("usage: loadgen --ticks process|cluster PID"),
        };
        println!("{ticks}");
        return;
    }
    let fixture = Arc::new(fixture(&args).await);
    if args.scenario == "fixture" {
        let (key, id) = &fixture.invoices[0];
        println!(
            "{}",
            json!({
                "agent_key": fixture.agent,
                "invoice_id": id,
                "idempotency_key": key,
                "body": draft(&fixture, 0).to_string(),
            })
        );
        return;
    }
    let counter = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    // The server's peak resident set is measured over the window from here (scripts/bench
    // reads VmHWM after the run): the setup's sign-in hashes a password with 19 MiB of
    // Argon2 memory that is returned at once, which is not what load costs.
    if let Some(server) = args.server_pid {
        let _ = std::fs::write(format!("/proc/{server}/clear_refs"), "5");
    }
    let server_before = args.server_pid.map(cpu_ticks);
    let db_before = args.db_postmaster.map(cluster_ticks);
    let deadline = Instant::now() + Duration::from_secs_f64(args.seconds);
    let started = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..args.concurrency {
        let (f, counter, errors, scenario) = (
            Arc::clone(&fixture),
            Arc::clone(&counter),
            Arc::clone(&errors),
            args.scenario.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
            while Instant::now() < deadline {
                let n = counter.fetch_add(1, Ordering::Relaxed);
                let t = Instant::now();
                if !step(&f, &scenario, n).await {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
                hist.saturating_record(t.elapsed().as_micros() as u64);
            }
            hist
        }));
    }
    let mut hist = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
    for t in tasks {
        hist.add(t.await.unwrap()).unwrap();
    }
    let elapsed = started.elapsed().as_secs_f64();
    // Clock ticks are 1/100 s: 10,000 µs each.
    let per_op = |ticks: u64| (ticks as f64 * 10_000.0) / hist.len().max(1) as f64;
    let server_cpu_us = args
        .server_pid
        .zip(server_before)
        .map(|(p, before)| per_op(cpu_ticks(p).saturating_sub(before)));
    let db_cpu_us = args
        .db_postmaster
        .zip(db_before)
        .map(|(p, before)| per_op(cluster_ticks(p).saturating_sub(before)));
    let ms = |q: f64| hist.value_at_quantile(q) as f64 / 1000.0;
    println!(
        "{}",
        json!({
            "scenario": args.scenario,
            "concurrency": args.concurrency,
            "operations": hist.len(),
            "errors": errors.load(Ordering::Relaxed),
            "seconds": elapsed,
            "throughput": hist.len() as f64 / elapsed,
            "p50_ms": ms(0.5),
            "p99_ms": ms(0.99),
            "p999_ms": ms(0.999),
            "server_cpu_us": server_cpu_us,
            "db_cpu_us": db_cpu_us,
        })
    );
}
