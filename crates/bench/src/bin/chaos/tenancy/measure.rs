//! What `noisy` measures: B's work and its latencies, and the job waits from the jobs API.

use super::{code_of, ms, percentile, timed};
use crate::counters::Counters;
use crate::dead_ends::standing;
use crate::driver::Driver;
use crate::workload::{APPROVE, CREATE, Fixture, KeyRecord, Records, SUBMIT, Step, lifecycle_step};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Latencies of one phase of B's work, in microseconds.
#[derive(Default)]
pub(super) struct PhaseLat {
    get: Vec<u64>,
    create: Vec<u64>,
    /// From the approve answer to the invoice read back `issued`.
    issued: Vec<u64>,
    /// Approvals not seen `issued` within the bound (counted at the bound in `issued`).
    not_issued: u64,
}

impl PhaseLat {
    pub(super) fn figures(&mut self) -> Value {
        let mut f = json!({"not_issued_within_bound": self.not_issued});
        for (name, v) in [
            ("get", &mut self.get),
            ("create", &mut self.create),
            ("approve_to_issued", &mut self.issued),
        ] {
            f[name] = json!({
                "n": v.len(),
                "p50_ms": ms(percentile(v, 50.0)),
                "p99_ms": ms(percentile(v, 99.0)),
            });
        }
        f
    }
}

/// B's side: its driver (no keep-alive: every request opens a connection, as a fresh client
/// would, so a connection cap A exhausts shows in B's figures), fixture and records.
pub(super) struct BSide {
    pub(super) d: Arc<Driver>,
    pub(super) f: Arc<Fixture>,
    pub(super) records: Records,
    pub(super) http: reqwest::Client,
    pub(super) base: String,
    pub(super) pre: String,
    pub(super) get_errors: Counters,
    pub(super) issue_bound: Duration,
}

/// B works for `dur`: two workers run create → submit → approve → poll until `issued`, one
/// reads (an invoice, the list) every 50 ms.
pub(super) async fn b_phase(b: &Arc<BSide>, tag: &str, dur: Duration) -> PhaseLat {
    let lat = Arc::new(Mutex::new(PhaseLat::default()));
    let until = Instant::now() + dur;
    let mut tasks = Vec::new();
    for w in 0..2 {
        let (b, lat, tag) = (b.clone(), lat.clone(), tag.to_owned());
        tasks.push(tokio::spawn(async move {
            for i in 0..10_000 {
                if Instant::now() >= until {
                    break;
                }
                let key = format!("{}-{tag}-w{w}-{i}", b.pre);
                b.records.lock().unwrap().insert(
                    key.clone(),
                    KeyRecord {
                        agent: w % b.f.agents.len(),
                        ..KeyRecord::default()
                    },
                );
                let t = Instant::now();
                lifecycle_step(&b.d, &b.f, &b.records, &key, CREATE).await;
                let created = t.elapsed().as_micros() as u64;
                if b.records.lock().unwrap()[&key].steps[CREATE] != Step::Acked {
                    continue;
                }
                lat.lock().unwrap().create.push(created);
                lifecycle_step(&b.d, &b.f, &b.records, &key, SUBMIT).await;
                if b.records.lock().unwrap()[&key].steps[SUBMIT] != Step::Acked {
                    continue;
                }
                lifecycle_step(&b.d, &b.f, &b.records, &key, APPROVE).await;
                let rec = b.records.lock().unwrap()[&key].clone();
                if rec.steps[APPROVE] != Step::Acked {
                    continue;
                }
                let approved = Instant::now();
                let id = rec.invoice_id.unwrap_or_default();
                let url = format!("{}/v1/invoices/{id}", b.base);
                let mut issued = false;
                while approved.elapsed() < b.issue_bound {
                    let (status, _, inv) = timed(b.http.get(&url).bearer_auth(&b.f.human)).await;
                    if status != 200 {
                        b.get_errors
                            .add(&format!("poll {}", code_of(status, &inv)), 1);
                    } else if standing(&inv) == "issued" {
                        issued = true;
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                let waited = approved.elapsed().as_micros() as u64;
                let mut l = lat.lock().unwrap();
                l.issued.push(waited);
                if !issued {
                    l.not_issued += 1;
                }
            }
        }));
    }
    {
        let (b, lat) = (b.clone(), lat.clone());
        tasks.push(tokio::spawn(async move {
            let agent = &b.f.agents[0].key;
            let mut n = 0u64;
            while Instant::now() < until {
                n += 1;
                let latest = b
                    .records
                    .lock()
                    .unwrap()
                    .values()
                    .rev()
                    .filter(|r| r.agent == 0)
                    .find_map(|r| r.invoice_id.clone());
                let url = match (n % 2, latest) {
                    (0, Some(id)) => format!("{}/v1/invoices/{id}", b.base),
                    _ => format!("{}/v1/invoices?limit=20", b.base),
                };
                let (status, us, body) = timed(b.http.get(&url).bearer_auth(agent)).await;
                if status == 200 {
                    lat.lock().unwrap().get.push(us);
                } else {
                    b.get_errors
                        .add(&format!("get {}", code_of(status, &body)), 1);
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    Arc::try_unwrap(lat).ok().unwrap().into_inner().unwrap()
}

/// Pages through `/v1/jobs?kind=…` (at most `pages` pages of 100).
pub(super) async fn list_jobs(
    http: &reqwest::Client,
    base: &str,
    token: &str,
    kind: &str,
    pages: usize,
) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor = String::new();
    for _ in 0..pages {
        let url = format!("{base}/v1/jobs?kind={kind}&limit=100{cursor}");
        let Ok(r) = http.get(&url).bearer_auth(token).send().await else {
            break;
        };
        let Ok(page) = r.json::<Value>().await else {
            break;
        };
        items.extend(page["items"].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => break,
        }
    }
    items
}

fn at(v: &Value) -> Option<chrono::DateTime<chrono::Utc>> {
    v.as_str()
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(s).ok())
        .map(|t| t.with_timezone(&chrono::Utc))
}

/// Job waits and run times, in ms, for the jobs created in `[from, to)`. A finished job's
/// `run_at` is its finishing time (the runtime moves it), so: a job waiting to run has waited
/// `now - run_at`; one that started on its first execution waited `started_at - created_at`
/// (issue jobs and deliveries are due when created); a running retry `started_at - run_at`;
/// a finished retry is left out (its due time is gone). Run time: `finished_at - started_at`,
/// or `now - started_at` while it runs.
pub(super) fn job_figures(
    jobs: &[Value],
    from: chrono::DateTime<chrono::Utc>,
    to: chrono::DateTime<chrono::Utc>,
    now: chrono::DateTime<chrono::Utc>,
) -> Value {
    let us = |d: chrono::TimeDelta| d.num_microseconds().unwrap_or(0).max(0) as u64;
    let mut waits = Vec::new();
    let mut runs = Vec::new();
    let mut unstarted = 0u64;
    for j in jobs {
        let (Some(created), Some(run_at)) = (at(&j["created_at"]), at(&j["run_at"])) else {
            continue;
        };
        if created < from || created >= to {
            continue;
        }
        let state = j["state"].as_str().unwrap_or("");
        let started = at(&j["started_at"]);
        let first = j["executions"].as_i64().unwrap_or(0) <= 1;
        match (state, started) {
            ("available" | "scheduled" | "retryable", _) | (_, None) => {
                unstarted += 1;
                waits.push(us(now - run_at));
            }
            (_, Some(s)) if first => waits.push(us(s - created)),
            ("running", Some(s)) => waits.push(us(s - run_at)),
            _ => {}
        }
        match (state, started, at(&j["finished_at"])) {
            (_, Some(s), Some(f)) => runs.push(us(f - s)),
            ("running", Some(s), None) => runs.push(us(now - s)),
            _ => {}
        }
    }
    let max_wait = waits.iter().copied().max().unwrap_or(0);
    let max_run = runs.iter().copied().max().unwrap_or(0);
    json!({
        "jobs": jobs.iter().filter(|j| at(&j["created_at"]).is_some_and(|c| c >= from && c < to)).count(),
        "not_started": unstarted,
        "wait_p50_ms": ms(percentile(&mut waits, 50.0)),
        "wait_p99_ms": ms(percentile(&mut waits, 99.0)),
        "wait_max_ms": ms(max_wait),
        "run_max_ms": ms(max_run),
    })
}
