//! The client driver: every command retried with the same `Idempotency-Key` (and body) on
//! connection errors, timeouts, 5xx and 409 in-flight, bounded by attempts and time.

use crate::counters::Counters;
use serde_json::Value;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Outcome {
    /// A 2xx; `replayed` from the `Idempotent-Replayed` header or the body's `replayed`.
    Ok { body: Value, replayed: bool },
    /// 409 `idempotency_conflict`.
    Mismatch,
    /// Any other definite refusal (4xx): status and code.
    Refused(u16, String),
    /// Retries exhausted on transport errors, timeouts or 5xx: it may or may not have happened.
    Indeterminate,
}

pub(crate) struct Driver {
    pub(crate) client: reqwest::Client,
    pub(crate) bases: Mutex<Vec<String>>,
    pub(crate) rr: AtomicUsize,
    pub(crate) counters: Counters,
    /// Microseconds since `epoch` of the latest 2xx.
    pub(crate) last_ok_us: AtomicU64,
    pub(crate) epoch: Instant,
    pub(crate) max_attempts: u32,
    pub(crate) op_budget: Duration,
    /// Whether a 5xx was ever a 500 (a bug: faults should give 503).
    pub(crate) statuses_5xx: Counters,
    /// Every answer: (end µs since `epoch`, status; 0 for a transport error), for the
    /// windows of the HA scenario (ha/).
    pub(crate) answers: Mutex<Vec<(u64, u16)>>,
}

impl Driver {
    pub(crate) fn new(bases: Vec<String>, keep_alive: bool, op_budget: Duration) -> Driver {
        let mut b = reqwest::Client::builder()
            .timeout(Duration::from_secs(5))
            .connect_timeout(Duration::from_secs(1));
        if !keep_alive {
            b = b.pool_max_idle_per_host(0);
        }
        Driver {
            client: b.build().unwrap(),
            bases: Mutex::new(bases),
            rr: AtomicUsize::new(0),
            counters: Counters::default(),
            last_ok_us: AtomicU64::new(0),
            epoch: Instant::now(),
            max_attempts: 40,
            op_budget,
            statuses_5xx: Counters::default(),
            answers: Mutex::default(),
        }
    }

    pub(crate) fn base(&self) -> String {
        let bases = self.bases.lock().unwrap();
        bases[self.rr.fetch_add(1, Ordering::Relaxed) % bases.len()].clone()
    }

    pub(crate) fn now_us(&self) -> u64 {
        self.epoch.elapsed().as_micros() as u64
    }

    pub(crate) fn answered(&self, status: u16) {
        let at = self.now_us();
        self.answers.lock().unwrap().push((at, status));
    }

    /// Waits (bounded) for the first 2xx after `since`; its delay, or None.
    pub(crate) async fn first_ok_after(
        &self,
        since: Instant,
        within: Duration,
    ) -> Option<Duration> {
        let since_us = since.duration_since(self.epoch).as_micros() as u64;
        let end = Instant::now() + within;
        while Instant::now() < end {
            let last = self.last_ok_us.load(Ordering::Relaxed);
            if last > since_us {
                return Some(Duration::from_micros(last - since_us));
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        None
    }

    /// One command, retried with the same key (and body) on connection errors, timeouts,
    /// 5xx and 409 in-flight, with backoff, bounded by attempts and time. Returns the final
    /// outcome and whether any attempt was indeterminate.
    pub(crate) async fn call(
        &self,
        command: &str,
        path: &str,
        token: &str,
        key: Option<&str>,
        body: Option<&Value>,
        budget: Duration,
    ) -> (Outcome, bool) {
        let end = Instant::now() + budget;
        let mut uncertain = false;
        let mut backoff = Duration::from_millis(25);
        for attempt in 0..self.max_attempts {
            if attempt > 0 {
                self.counters.add("retries", 1);
            }
            self.counters.add(&format!("req.{command}"), 1);
            let mut req = self
                .client
                .post(format!("{}{path}", self.base()))
                .bearer_auth(token);
            if let Some(key) = key {
                req = req.header("idempotency-key", key);
            }
            req = match body {
                Some(b) => req.json(b),
                None => req,
            };
            match req.send().await {
                Err(_) => {
                    self.counters.add("resp.transport", 1);
                    self.answered(0);
                    uncertain = true;
                }
                Ok(res) => {
                    let status = res.status().as_u16();
                    self.answered(status);
                    let replayed_header = res
                        .headers()
                        .get("idempotent-replayed")
                        .and_then(|v| v.to_str().ok())
                        == Some("true");
                    match res.bytes().await {
                        Err(_) => {
                            self.counters.add("resp.transport", 1);
                            uncertain = true;
                        }
                        Ok(bytes) => {
                            let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                            let code = body["code"].as_str().unwrap_or("").to_owned();
                            if (200..300).contains(&status) {
                                self.last_ok_us.store(self.now_us(), Ordering::Relaxed);
                                let replayed =
                                    replayed_header || body["replayed"].as_bool() == Some(true);
                                if replayed {
                                    self.counters.add(&format!("replayed.{command}"), 1);
                                }
                                self.counters.add(
                                    if replayed {
                                        "resp.replayed"
                                    } else {
                                        "resp.fresh"
                                    },
                                    1,
                                );
                                return (Outcome::Ok { body, replayed }, uncertain);
                            } else if status == 409 && code == "idempotency_conflict" {
                                self.counters.add("resp.409_mismatch", 1);
                                return (Outcome::Mismatch, uncertain);
                            } else if status == 409
                                && (code.contains("in_progress") || code.contains("in_flight"))
                            {
                                self.counters.add("resp.409_inflight", 1);
                            } else if status >= 500 || status == 429 {
                                self.counters.add("resp.5xx", 1);
                                self.statuses_5xx.add(&format!("{status} {code}"), 1);
                                uncertain = true;
                            } else {
                                self.counters.add("resp.other_4xx", 1);
                                self.counters.add(&format!("refused.{status} {code}"), 1);
                                return (Outcome::Refused(status, code), uncertain);
                            }
                        }
                    }
                }
            }
            if Instant::now() + backoff > end {
                break;
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_millis(800));
        }
        self.counters.add("final.indeterminate_attempt", 1);
        (Outcome::Indeterminate, true)
    }
}
