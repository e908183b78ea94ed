//! The fault campaign of `scripts/chaos` (docs/RELIABILITY.md): a client driver that retries
//! with the same `Idempotency-Key`, a nemesis (kill -9, PostgreSQL crash and backend
//! termination, dropped responses, a full disk), and a checker that compares what clients were
//! told with what the database (and the reference peer, and a webhook receiver) holds.
//!
//! ```text
//! chaos run --scenario kill --backend postgres --db-url postgres://… --seed 7 [--quick] …
//! chaos report results.jsonl [--doc docs/RELIABILITY.md --command "scripts/chaos --seed 7"]
//! chaos proxy --listen 127.0.0.1:9000 --upstream 127.0.0.1:8080 --drop-percent 10 --seed 7
//! ```
//!
//! `run` prints one JSON line (the figures) on stdout; everything else goes to stderr. Every
//! loop is bounded by a count and a deadline; the fault schedule comes from the seed. Every
//! child process it starts is written to `--pids` (so the script can end them by id) and is
//! killed when the run ends.
//!
//! The modules: `args` (the command line), `process` (the service, the peer, the webhook
//! receiver), `driver` (the retrying client), `workload` (the setup and the lifecycle load),
//! `nemesis` (the faults' tools), `checker`, `ctx` (what each scenario is handed), `run` (one
//! run: the scenario, then the checker),
//! `report`; the scenario families: `concurrent` (storm, race), `crashes` (kill, pgcrash, drop,
//! diskfull), `workers` (replicas, paused), `resend`, `dead_ends` (refuse, peerday, restore),
//! `ha` and `tenancy` (noisy, anonflood, slowheads).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod args;
mod checker;
mod concurrent;
mod counters;
mod crashes;
mod ctx;
mod dead_ends;
mod driver;
mod ha;
mod nemesis;
mod process;
mod report;
mod resend;
mod rng;
mod run;
mod tenancy;
mod workers;
mod workload;

use args::{Cli, Command};
use clap::Parser;
use std::sync::Arc;

#[tokio::main]
async fn main() -> std::process::ExitCode {
    match Cli::parse().command {
        Command::Run(args) => {
            let out = run::run(args.labelled()).await;
            println!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Command::Report {
            results,
            doc,
            command,
            marker,
        } => {
            if report::report(&results, doc.as_deref(), &command, &marker) {
                std::process::ExitCode::SUCCESS
            } else {
                std::process::ExitCode::FAILURE
            }
        }
        Command::Proxy {
            listen,
            upstream,
            drop_percent,
            seed,
        } => {
            let l = tokio::net::TcpListener::bind(&listen)
                .await
                .expect("listen");
            println!("proxy listening on http://{}", l.local_addr().unwrap());
            nemesis::proxy(l, upstream, drop_percent, seed, Arc::default()).await;
            std::process::ExitCode::SUCCESS
        }
    }
}
