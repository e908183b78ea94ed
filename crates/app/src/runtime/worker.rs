//! Workers (docs/JOBS.md, "Workers"): two pools of claim loops and an upkeep loop. The webhooks
//! pool runs only deliveries, capped per endpoint in the claim, so endpoints that never answer
//! hold delivery workers only. Handlers run fenced by the lease (`LeaseWatch`, `Fenced`); idle
//! loops wait for a wake-up or the poll: polling alone is correct, wake-ups shorten the wait.

use super::{JobContext, JobError, Registry};
use crate::app::App;
use crate::jobs::{ClaimedJob, JobFailure, MAIN_POOL, Pool, Retention};
use std::future::Future;
use std::io::Write;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tauros_domain::job::FailureKind;
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::Instant;
use tracing::Instrument;

/// How this process runs jobs.
#[derive(Clone, Debug)]
pub struct WorkerConfig {
    /// Jobs of the main pool (every kind but webhook deliveries) run at once (claim loops).
    pub workers: usize,
    /// Webhook deliveries run at once (the webhooks pool's claim loops).
    pub webhook_workers: usize,
    /// How long a claim holds a job without a heartbeat.
    pub lease: Duration,
    /// The longest an idle loop waits before it looks for due jobs again.
    pub poll: Duration,
    /// Interrupted executions after which a job is discarded.
    pub max_interruptions: i32,
    pub retention: Retention,
    /// Finished jobs deleted per state and upkeep round.
    pub prune_batch: i64,
    /// Test seam (`TAUROS_TEST_PAUSE_AFTER_CLAIM`): pause forever after each claim, to be killed.
    pub pause_after_claim: bool,
    /// This process in the jobs' `worker` column (`host:pid`).
    pub name: String,
}

/// Running workers; dropping them aborts every loop (and the handlers they run).
pub struct Workers {
    stop: watch::Sender<bool>,
    tasks: JoinSet<()>,
}

impl Workers {
    /// Starts the claim loops of both pools and the upkeep loop on the current runtime.
    pub fn start(app: App, registry: Arc<Registry>, config: WorkerConfig) -> Workers {
        let (stop, _) = watch::channel(false);
        let config = Arc::new(config);
        let mut tasks = JoinSet::new();
        let (deliveries, others): (Vec<&'static str>, Vec<&'static str>) = registry
            .kinds()
            .into_iter()
            .partition(|kind| *kind == super::webhooks::KIND);
        let pools = [
            (MAIN_POOL, others, None, config.workers, ""),
            (
                WEBHOOK_POOL,
                deliveries,
                Some(tauros_domain::webhook::MAX_IN_FLIGHT_PER_ENDPOINT),
                config.webhook_workers,
                "webhooks/",
            ),
        ];
        for (name, kinds, lane_limit, count, prefix) in pools {
            if kinds.is_empty() {
                continue;
            }
            let claims = Arc::new(PoolClaims {
                name,
                kinds,
                lane_limit,
            });
            for n in 1..=count {
                tasks.spawn(claim_loop(
                    app.clone(),
                    Arc::clone(&registry),
                    Arc::clone(&config),
                    Arc::clone(&claims),
                    format!("{}/{prefix}{n}", config.name),
                    stop.subscribe(),
                ));
            }
        }
        tasks.spawn(upkeep_loop(app, registry, config, stop.subscribe()));
        Workers { stop, tasks }
    }

    /// Stops claiming; running jobs get `grace` to settle, then are dropped and stay `running`
    /// until another worker's upkeep rescues them (no attempt used). True if all finished in time.
    pub async fn shutdown(mut self, grace: Duration) -> bool {
        let _ = self.stop.send(true);
        let drained = tokio::time::timeout(grace, async {
            while self.tasks.join_next().await.is_some() {}
        })
        .await
        .is_ok();
        self.tasks.abort_all();
        drained
    }
}

/// The pool of webhook deliveries.
pub const WEBHOOK_POOL: &str = "webhooks";

/// What one pool's claim loops claim.
struct PoolClaims {
    name: &'static str,
    kinds: Vec<&'static str>,
    lane_limit: Option<i64>,
}

/// Waits `timeout` or until the stop signal; true when stopping.
async fn stopped_within(stop: &mut watch::Receiver<bool>, timeout: Duration) -> bool {
    if *stop.borrow() {
        return true;
    }
    match tokio::time::timeout(timeout, stop.changed()).await {
        Ok(changed) => changed.is_err() || *stop.borrow(),
        Err(_) => false,
    }
}

async fn claim_loop(
    app: App,
    registry: Arc<Registry>,
    config: Arc<WorkerConfig>,
    claims: Arc<PoolClaims>,
    worker: String,
    mut stop: watch::Receiver<bool>,
) {
    let pool = Pool {
        name: claims.name,
        kinds: &claims.kinds,
        lane_limit: claims.lane_limit,
    };
    loop {
        if *stop.borrow() {
            return;
        }
        let claimed_at = Instant::now();
        match app.claim_job_for(pool, config.lease, &worker).await {
            Ok(Some(job)) => {
                if config.pause_after_claim {
                    pause(&job).await;
                }
                let span = tracing::info_span!("job", id = %job.id, kind = %job.kind, attempt = job.attempt);
                run(&app, &registry, &config, job, claimed_at)
                    .instrument(span)
                    .await;
            }
            Ok(None) => {
                tokio::select! {
                    () = app.wait_for_jobs(config.poll) => {}
                    changed = stop.changed() => if changed.is_err() { return },
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, worker, "claiming a job failed");
                if stopped_within(&mut stop, config.poll).await {
                    return;
                }
            }
        }
    }
}

/// The named pause point after a claim: the line tells a test the claim has committed.
async fn pause(job: &ClaimedJob) {
    {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "tauros: paused after claim of job {} (worker {}, lease {})",
            job.id, job.worker, job.lease_token
        );
        let _ = out.flush();
    }
    std::future::pending::<()>().await;
}

/// A handler task that is aborted when dropped (lease lost, timeout, shutdown).
struct AbortOnDrop<T>(JoinHandle<T>);

impl<T> Drop for AbortOnDrop<T> {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The lease as this worker knows it, on the monotonic clock (which counts while frozen): it
/// holds at least until `held_until`, measured from when the claim or last good heartbeat was
/// *sent*, so never past the database's deadline. The handler stops `margin` before it.
struct LeaseWatch {
    held_until: std::sync::Mutex<Instant>,
    margin: Duration,
}

impl LeaseWatch {
    fn new(held_until: Instant, margin: Duration) -> LeaseWatch {
        LeaseWatch {
            held_until: std::sync::Mutex::new(held_until),
            margin,
        }
    }

    /// When the handler must have stopped unless a heartbeat extends the lease first.
    fn stop_at(&self) -> Instant {
        let held_until = *self.held_until.lock().unwrap_or_else(|e| e.into_inner());
        held_until.checked_sub(self.margin).unwrap_or(held_until)
    }

    fn extend(&self, held_until: Instant) {
        let mut current = self.held_until.lock().unwrap_or_else(|e| e.into_inner());
        *current = (*current).max(held_until);
    }

    fn holds(&self) -> bool {
        Instant::now() < self.stop_at()
    }
}

/// A handler raced against its lease, checked at every poll, so a worker thawed after a freeze
/// longer than its lease takes no further step (`None`: stopped). The claim loop aborts it too
/// when the lease ends while the handler waits.
struct Fenced<F> {
    handler: Pin<Box<F>>,
    lease: Arc<LeaseWatch>,
}

impl<F: Future> Future for Fenced<F> {
    type Output = Option<F::Output>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if !self.lease.holds() {
            return Poll::Ready(None);
        }
        self.handler.as_mut().poll(cx).map(Some)
    }
}

/// Why a worker stopped a handler without reporting an outcome.
#[derive(Debug)]
enum Stop {
    /// A heartbeat found the lease gone: the job was rescued (and maybe claimed elsewhere).
    LeaseLost,
    /// No heartbeat succeeded in time: the lease may end any moment, so the handler stops.
    HeartbeatFailed,
}

enum Outcome {
    Finished(Result<(), JobError>),
    Panicked,
    TimedOut,
    Stopped(Stop),
}

/// Runs one claimed job to its settled outcome. `claimed_at` is when the claim was sent.
async fn run(
    app: &App,
    registry: &Registry,
    config: &WorkerConfig,
    job: ClaimedJob,
    claimed_at: Instant,
) {
    let Some(entry) = registry.entry(&job.kind) else {
        // Claims name only registered kinds; a row edited since is failed for good.
        let failure = JobError::permanent("unknown_kind", "no handler for this kind");
        settle(app, registry, &job, Outcome::Finished(Err(failure))).await;
        return;
    };
    let Ok(args) = serde_json::from_str(&job.args) else {
        let failure = JobError::permanent("invalid_args", "the stored args are not JSON");
        settle(app, registry, &job, Outcome::Finished(Err(failure))).await;
        return;
    };
    let ctx = JobContext {
        app: app.clone(),
        job: job.clone(),
    };
    let (beat, margin) = beat_and_margin(config.lease);
    let lease = Arc::new(LeaseWatch::new(claimed_at + config.lease, margin));
    let mut handler = AbortOnDrop(tokio::spawn(Fenced {
        handler: Box::pin((entry.handler)(ctx, args)),
        lease: Arc::clone(&lease),
    }));
    let mut heartbeat = tokio::time::interval_at(Instant::now() + beat, beat);
    heartbeat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let deadline = tokio::time::sleep(entry.timeout);
    tokio::pin!(deadline);
    let mut failures = 0u32;
    let outcome = loop {
        let stop_at = lease.stop_at();
        tokio::select! {
            biased;
            joined = &mut handler.0 => break match joined {
                Ok(Some(result)) => Outcome::Finished(result),
                Ok(None) => Outcome::Stopped(Stop::HeartbeatFailed),
                Err(_) => Outcome::Panicked,
            },
            () = tokio::time::sleep_until(stop_at) => break Outcome::Stopped(Stop::HeartbeatFailed),
            _ = heartbeat.tick() => {
                let sent = Instant::now();
                // Bounded by the stop: a database that does not answer cannot hold the
                // handler past the point where the lease may end.
                match tokio::time::timeout_at(stop_at, app.heartbeat(&job, config.lease)).await {
                    Ok(Ok(true)) => lease.extend(sent + config.lease),
                    Ok(Ok(false)) => break Outcome::Stopped(Stop::LeaseLost),
                    Ok(Err(e)) => {
                        failures += 1;
                        tracing::warn!(error = %e, job = %job.id, failures, "heartbeat failed; the handler stops unless one succeeds before its lease would run out");
                    }
                    Err(_) => break Outcome::Stopped(Stop::HeartbeatFailed),
                }
            },
            () = &mut deadline => break Outcome::TimedOut,
        }
    };
    // Stop the handler (and its peer call) before reporting: nothing of this attempt runs on.
    if !matches!(outcome, Outcome::Finished(_) | Outcome::Panicked) {
        handler.0.abort();
        let _ = (&mut handler.0).await;
    }
    settle(app, registry, &job, outcome).await;
}

/// The heartbeat interval (a third of the lease) and the stop margin (half a beat).
fn beat_and_margin(lease: Duration) -> (Duration, Duration) {
    let beat = (lease / 3).max(Duration::from_millis(100));
    (beat, beat / 2)
}

async fn settle(app: &App, registry: &Registry, job: &ClaimedJob, outcome: Outcome) {
    let kind = job.kind.clone();
    let failure = match outcome {
        Outcome::Finished(Ok(())) => {
            match app.complete_job(job).await {
                Ok(true) => {
                    metrics::counter!("tauros_job_completions_total", "kind" => kind).increment(1);
                }
                Ok(false) => stale(job),
                Err(e) => {
                    tracing::warn!(error = %e, job = %job.id, "recording a completion failed; the lease will expire and the job run again");
                }
            }
            return;
        }
        Outcome::Stopped(why) => {
            metrics::counter!("tauros_job_stops_total", "kind" => kind).increment(1);
            match why {
                Stop::LeaseLost => {
                    tracing::warn!(job = %job.id, worker = %job.worker, "lease lost while running: handler stopped, its outcome is not reported");
                }
                Stop::HeartbeatFailed => {
                    tracing::warn!(job = %job.id, worker = %job.worker, "no heartbeat succeeded before the lease could run out: handler stopped, its outcome is not reported; the job runs again once its lease expires");
                }
            }
            return;
        }
        Outcome::Finished(Err(JobError::Retryable { code, message })) => JobFailure {
            kind: FailureKind::Retryable,
            code,
            message,
        },
        Outcome::Finished(Err(JobError::Permanent { code, message })) => JobFailure {
            kind: FailureKind::Permanent,
            code,
            message,
        },
        Outcome::Panicked => JobFailure {
            kind: FailureKind::Retryable,
            code: "panic".to_owned(),
            message: "the handler panicked".to_owned(),
        },
        Outcome::TimedOut => JobFailure {
            kind: FailureKind::Retryable,
            code: "timeout".to_owned(),
            message: "the execution took longer than its kind's timeout".to_owned(),
        },
    };
    match app
        .fail_job(job, &failure, registry.backoff_cap(&kind))
        .await
    {
        Ok(Some(next)) if next.discarded() => {
            metrics::counter!("tauros_job_discards_total", "kind" => kind).increment(1);
            tracing::warn!(job = %job.id, code = %failure.code, attempt = job.attempt, "job discarded");
        }
        Ok(Some(next)) => {
            metrics::counter!("tauros_job_retries_total", "kind" => kind).increment(1);
            tracing::info!(job = %job.id, code = %failure.code, retry_at = %next.run_at, "job will be retried");
        }
        Ok(None) => stale(job),
        Err(e) => {
            tracing::warn!(error = %e, job = %job.id, "recording a failure failed; the lease will expire and the job run again");
        }
    }
}

fn stale(job: &ClaimedJob) {
    tracing::warn!(job = %job.id, worker = %job.worker, "late result of a lost lease ignored");
}

/// Rescues expired leases and prunes finished jobs, every half lease (0.5–15 s).
async fn upkeep_loop(
    app: App,
    registry: Arc<Registry>,
    config: Arc<WorkerConfig>,
    mut stop: watch::Receiver<bool>,
) {
    let every = (config.lease / 2).clamp(Duration::from_millis(500), Duration::from_secs(15));
    let cap_of = |kind: &str| registry.backoff_cap(kind);
    loop {
        match app
            .rescue_expired_leases(config.max_interruptions, &cap_of, 100)
            .await
        {
            Ok(rescued) => {
                for r in rescued {
                    metrics::counter!("tauros_job_interruptions_total", "kind" => r.kind.clone())
                        .increment(1);
                    if r.next.discarded() {
                        metrics::counter!("tauros_job_discards_total", "kind" => r.kind.clone())
                            .increment(1);
                        tracing::warn!(job = %r.id, interruptions = r.next.interruptions, "job discarded after repeated interruptions");
                    } else {
                        tracing::info!(job = %r.id, retry_at = %r.next.run_at, "interrupted job will run again");
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "rescuing expired leases failed"),
        }
        match app.prune_jobs(&config.retention, config.prune_batch).await {
            Ok(0) => {}
            Ok(n) => tracing::debug!(pruned = n, "finished jobs pruned"),
            Err(e) => tracing::warn!(error = %e, "pruning finished jobs failed"),
        }
        if stopped_within(&mut stop, every).await {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A handler that takes a step every few milliseconds, for ever.
    async fn stepper(steps: Arc<AtomicU32>) {
        loop {
            steps.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn a_handler_stops_at_its_next_step_once_its_lease_could_have_ended() {
        let steps = Arc::new(AtomicU32::new(0));
        let lease = Arc::new(LeaseWatch::new(
            Instant::now() + Duration::from_millis(60),
            Duration::from_millis(20),
        ));
        let fenced = Fenced {
            handler: Box::pin(stepper(Arc::clone(&steps))),
            lease,
        };
        assert!(fenced.await.is_none(), "stopped, not finished");
        assert!(steps.load(Ordering::SeqCst) >= 1);
    }

    #[tokio::test]
    async fn a_thawed_handler_takes_no_step_and_an_extended_lease_keeps_it() {
        // Frozen past its lease: the first poll after the thaw stops it before it runs.
        let steps = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let lease = Arc::new(LeaseWatch::new(start, Duration::ZERO));
        let fenced = Fenced {
            handler: Box::pin(stepper(Arc::clone(&steps))),
            lease: Arc::clone(&lease),
        };
        assert!(fenced.await.is_none());
        assert_eq!(steps.load(Ordering::SeqCst), 0);
        // A successful heartbeat moves the stop on; an older one never moves it back.
        let lease = LeaseWatch::new(start + Duration::from_secs(30), Duration::from_secs(5));
        assert!(lease.holds());
        lease.extend(start + Duration::from_secs(60));
        lease.extend(start + Duration::from_secs(40));
        assert_eq!(lease.stop_at(), start + Duration::from_secs(55));
    }

    #[test]
    fn the_heartbeat_is_a_third_of_the_lease_and_the_margin_half_a_beat() {
        assert_eq!(
            beat_and_margin(Duration::from_secs(30)),
            (Duration::from_secs(10), Duration::from_secs(5))
        );
        assert_eq!(
            beat_and_margin(Duration::from_millis(150)),
            (Duration::from_millis(100), Duration::from_millis(50))
        );
    }
}
