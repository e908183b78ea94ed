//! What every scenario is handed: the run's arguments, its seeded randomness and fault
//! counters (`Ctx`), and what a scenario hands back to `run` (`ScenarioRun`).

use crate::args::Args;
use crate::counters::Counters;
use crate::driver::Driver;
use crate::process::{Helper, Server};
use crate::rng::Rng;
use crate::workload::Records;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub(crate) struct Ctx {
    pub(crate) args: Args,
    pub(crate) rng: Mutex<Rng>,
    pub(crate) faults: Counters,
    pub(crate) recovery_ms: Mutex<Vec<u64>>,
    pub(crate) started: Instant,
}

impl Ctx {
    pub(crate) fn rand_ms(&self, lo: u64, hi: u64) -> Duration {
        self.rng.lock().unwrap().millis(lo, hi)
    }
    pub(crate) fn below(&self, n: u64) -> u64 {
        self.rng.lock().unwrap().below(n)
    }
    pub(crate) fn recovered_in(&self, d: Option<Duration>) {
        match d {
            Some(d) => self.recovery_ms.lock().unwrap().push(d.as_millis() as u64),
            None => self.faults.add("no_recovery_within_bound", 1),
        }
    }
}

pub(crate) fn prefix(args: &Args) -> String {
    format!("chaos-{}-{}-{}", args.label, args.backend, args.seed)
}

pub(crate) fn base_env() -> Vec<(String, String)> {
    Vec::new()
}

/// What a scenario of crashes.rs, workers.rs or resend.rs hands back to `run()`.
pub(crate) struct ScenarioRun {
    pub(crate) records: Records,
    pub(crate) driver: Arc<Driver>,
    pub(crate) servers: Vec<Server>,
    pub(crate) helpers: Vec<Helper>,
}
