//! How `serve` and `worker` run jobs: the worker pools, webhook deliveries and the issuer.

use super::{DbArgs, Hidden, parse_duration};
use clap::Args;

/// `worker` options.
#[derive(Debug, Args, Clone)]
pub struct WorkerCommandArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// Serve /metrics on this address (none by default).
    #[arg(long, env = "TAUROS_METRICS_BIND")]
    pub metrics_bind: Option<String>,
    /// Seconds running jobs get to finish after SIGINT/SIGTERM; then they are left to lease
    /// expiry.
    #[arg(long, env = "TAUROS_SHUTDOWN_GRACE_SECONDS", default_value_t = 30)]
    pub shutdown_grace_seconds: u64,
    /// Webhooks.
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    /// Job workers.
    #[command(flatten)]
    pub jobs: WorkerArgs,
}

/// Webhooks: where deliveries may go and how signing secrets are kept (`serve` and `worker`
/// must agree: one registers endpoints, the other delivers).
#[derive(Debug, Args, Clone)]
pub struct WebhookArgs {
    /// Comma-separated hosts webhook deliveries may go to whatever they resolve to, and the
    /// only ones then: names, `*.domain`, IPv4 or IPv6 addresses. Empty: any host whose
    /// addresses are all public (never loopback, private, link-local, shared or reserved ones).
    #[arg(long, env = "TAUROS_WEBHOOK_ALLOW_HOSTS", default_value = "")]
    pub webhook_allow_hosts: String,
    /// Base64 of 32 random bytes (`openssl rand -base64 32`) that seals webhook signing
    /// secrets in the database (ChaCha20-Poly1305). Unset: secrets are stored unsealed, and a
    /// warning says so at start. Prefer the environment variable to the flag.
    #[arg(long, env = "TAUROS_SECRET_KEY", hide_env_values = true)]
    pub secret_key: Option<Hidden>,
    /// Counted attempts of one delivery cycle (1–1000); then the delivery is `failed` until an
    /// approver resends it (a new cycle of as many attempts).
    #[arg(long, env = "TAUROS_WEBHOOK_MAX_ATTEMPTS", default_value_t = tauros_domain::job::DEFAULT_MAX_ATTEMPTS)]
    pub webhook_max_attempts: i32,
    /// How long an endpoint may fail without a single success before it is disabled (its
    /// deliveries then held until an approver re-enables it): a number with a unit, `s`, `m`,
    /// `h` or `d` (`3d`, `72h`, `90m`).
    #[arg(long, env = "TAUROS_WEBHOOK_DISABLE_AFTER", default_value = "3d")]
    pub webhook_disable_after: String,
}

impl WebhookArgs {
    /// The app's webhook settings; an error names a malformed variable.
    pub fn config(&self) -> anyhow::Result<tauros_app::WebhookConfig> {
        let allow_hosts = tauros_domain::webhook::AllowList::parse(&self.webhook_allow_hosts)
            .map_err(|e| anyhow::anyhow!("TAUROS_WEBHOOK_ALLOW_HOSTS: {e}"))?;
        let secret_key = self
            .secret_key
            .as_ref()
            .map(|k| k.0.as_str())
            .filter(|k| !k.trim().is_empty())
            .map(tauros_domain::webhook::SecretKey::parse)
            .transpose()
            .map_err(|e| anyhow::anyhow!(e))?;
        if !(1..=tauros_domain::job::MAX_MAX_ATTEMPTS).contains(&self.webhook_max_attempts) {
            anyhow::bail!("TAUROS_WEBHOOK_MAX_ATTEMPTS must be from 1 to 1000");
        }
        let disable_after = parse_duration(&self.webhook_disable_after)
            .map_err(|e| anyhow::anyhow!("TAUROS_WEBHOOK_DISABLE_AFTER: {e}"))?;
        Ok(tauros_app::WebhookConfig {
            allow_hosts,
            secret_key,
            max_attempts: self.webhook_max_attempts,
            disable_after,
        })
    }
}

/// How a process runs jobs (`serve` and `worker`).
#[derive(Debug, Args, Clone)]
pub struct WorkerArgs {
    /// Jobs this process runs at once, of every kind but webhook deliveries (the main pool); 0
    /// runs none of them.
    #[arg(long, env = "TAUROS_WORKERS", default_value_t = 2)]
    pub workers: usize,
    /// Webhook deliveries this process runs at once (a pool of their own, so endpoints that
    /// never answer cannot delay issuing); 0 runs none. With `--workers 0` too, `serve` only
    /// answers HTTP.
    #[arg(long, env = "TAUROS_WEBHOOK_WORKERS", default_value_t = 2)]
    pub webhook_workers: usize,
    /// Seconds a claimed job is held without a heartbeat (workers heartbeat every third); a
    /// crashed worker's job runs again this long after its last heartbeat.
    #[arg(long, env = "TAUROS_JOB_LEASE_SECONDS", default_value_t = 30)]
    pub job_lease_seconds: u64,
    /// Longest wait, in milliseconds, before an idle worker looks for due jobs again.
    #[arg(long, env = "TAUROS_JOB_POLL_MS", default_value_t = 1000)]
    pub job_poll_ms: u64,
    /// Seconds one execution may take, for kinds that set no limit; longer is a failed attempt.
    #[arg(long, env = "TAUROS_JOB_TIMEOUT_SECONDS", default_value_t = 60)]
    pub job_timeout_seconds: u64,
    /// Seconds where the retry backoff (1 s, 2 s, 4 s, …) stops doubling, for kinds that set
    /// none; up to 25 % jitter comes on top.
    #[arg(long, env = "TAUROS_JOB_BACKOFF_CAP_SECONDS", default_value_t = 60)]
    pub job_backoff_cap_seconds: u64,
    /// Interrupted executions (expired leases) after which a job is discarded.
    #[arg(long, env = "TAUROS_JOB_MAX_INTERRUPTIONS", default_value_t = 10)]
    pub job_max_interruptions: i32,
    /// Hours a completed job is kept before it is pruned.
    #[arg(
        long,
        env = "TAUROS_JOB_RETENTION_COMPLETED_HOURS",
        default_value_t = 24
    )]
    pub job_retention_completed_hours: u64,
    /// Days a discarded or cancelled job is kept before it is pruned.
    #[arg(long, env = "TAUROS_JOB_RETENTION_DISCARDED_DAYS", default_value_t = 7)]
    pub job_retention_discarded_days: u64,
    /// Finished jobs deleted per state in one pruning round.
    #[arg(long, env = "TAUROS_JOB_PRUNE_BATCH", default_value_t = 1000)]
    pub job_prune_batch: i64,
    /// Seconds where the retry backoff of webhook deliveries stops doubling (1 s, 2 s, 4 s, …;
    /// up to 25 % jitter on top); with 25 attempts, the default spans 13 to 16 hours.
    #[arg(
        long,
        env = "TAUROS_WEBHOOK_BACKOFF_CAP_SECONDS",
        default_value_t = 3600
    )]
    pub webhook_backoff_cap_seconds: u64,
    /// Register the built-in test job kinds (`test.echo.v1`). For tests only.
    #[arg(long, env = "TAUROS_TEST_JOBS", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub test_jobs: bool,
    /// Test seam, honoured only with --test-jobs: after each claim, print a line and wait
    /// forever, so a test can kill the worker right after a claim.
    #[arg(
        long,
        env = "TAUROS_TEST_PAUSE_AFTER_CLAIM",
        default_value_t = false,
        value_parser = clap::builder::BoolishValueParser::new()
    )]
    pub test_pause_after_claim: bool,
    /// Issuing approved invoices.
    #[command(flatten)]
    pub issuer: IssuerArgs,
}

impl WorkerArgs {
    /// The kinds this process runs: the issuer's when one is configured.
    pub fn registry(&self) -> anyhow::Result<tauros_app::runtime::Registry> {
        let defaults = tauros_app::runtime::Defaults {
            backoff_cap: std::time::Duration::from_secs(self.job_backoff_cap_seconds),
            timeout: std::time::Duration::from_secs(self.job_timeout_seconds.max(1)),
        };
        let webhooks = tauros_app::runtime::webhooks::DeliveryPolicy {
            backoff_cap: std::time::Duration::from_secs(self.webhook_backoff_cap_seconds.max(1)),
        };
        if self.test_jobs && !tauros_app::runtime::TEST_KINDS_BUILT {
            anyhow::bail!(
                "TAUROS_TEST_JOBS is for tests: this build has no test job kinds (they are built \
                 with tauros-app's `testing` feature, as the test builds are)"
            );
        }
        let mut registry = tauros_app::runtime::registry(defaults, webhooks, self.test_jobs);
        if let Some(issuer) = self.issuer.issuer(self.test_jobs)? {
            tauros_app::issuing::register(&mut registry, issuer);
        }
        Ok(registry)
    }

    /// The workers' settings; `name` is this process (`host:pid`).
    pub fn worker_config(&self, name: String) -> tauros_app::runtime::WorkerConfig {
        let hours = |h: u64| std::time::Duration::from_secs(h.saturating_mul(3600));
        tauros_app::runtime::WorkerConfig {
            workers: self.workers,
            webhook_workers: self.webhook_workers,
            lease: std::time::Duration::from_secs(self.job_lease_seconds.max(1)),
            poll: std::time::Duration::from_millis(self.job_poll_ms.max(10)),
            max_interruptions: self.job_max_interruptions.max(1),
            retention: tauros_app::Retention {
                completed: hours(self.job_retention_completed_hours),
                discarded: hours(self.job_retention_discarded_days.saturating_mul(24)),
                cancelled: hours(self.job_retention_discarded_days.saturating_mul(24)),
            },
            prune_batch: self.job_prune_batch.max(1),
            pause_after_claim: self.test_jobs && self.test_pause_after_claim,
            name,
        }
    }
}

/// Which issuer an approved invoice goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum IssuerKind {
    /// Issue locally: numbered and `issued`, no other system involved.
    None,
    /// POST the invoice to `--issuer-url` with its operation key (docs/EFFECTS.md).
    Http,
}

/// Issuing and the claim protocol (`serve` and `worker`).
#[derive(Debug, Args, Clone)]
pub struct IssuerArgs {
    /// `none` or `http`; unset: issuing is off, and approved invoices wait for
    /// `POST /v1/invoices/{id}/issue` by an approver.
    #[arg(long, env = "TAUROS_ISSUER", value_enum)]
    pub issuer: Option<IssuerKind>,
    /// With `--issuer http`: where invoices are POSTed (recovery reads `{url}/{operation key}`).
    #[arg(long, env = "TAUROS_ISSUER_URL")]
    pub issuer_url: Option<String>,
    /// Seconds one call to the issuer may take; longer counts as an unknown outcome.
    #[arg(long, env = "TAUROS_ISSUER_TIMEOUT_SECONDS", default_value_t = 10)]
    pub issuer_timeout_seconds: u64,
    /// Days a completed claim (and its stored response) is kept.
    #[arg(long, env = "TAUROS_CLAIM_RETENTION_DAYS", default_value_t = tauros_domain::effect::DEFAULT_RETENTION_DAYS)]
    pub claim_retention_days: i64,
    /// How long the issuer deduplicates an operation key: a number with a unit, `s`, `m`, `h`
    /// or `d` (`24h`, `90m`, `2d`); a claim older than that is never executed again
    /// automatically (issuing stops at `needs_review` when the issuer holds nothing).
    #[arg(long, env = "TAUROS_ISSUER_KEY_RETENTION", default_value = "24h", value_parser = parse_duration)]
    pub issuer_key_retention: std::time::Duration,
    /// Days a claim may stay processing before the reaper may delete it (at least 1).
    #[arg(long, env = "TAUROS_CLAIM_ABANDON_DAYS", default_value_t = tauros_domain::effect::DEFAULT_ABANDON_DAYS)]
    pub claim_abandon_days: i64,
    /// Minutes between claim cleanup and reaper rounds in `serve` and `worker`; 0: never.
    #[arg(long, env = "TAUROS_REAP_INTERVAL_MINUTES", default_value_t = 60)]
    pub reap_interval_minutes: u64,
    /// Tests only, with --test-jobs: the issue job prints `paused at POINT` and waits there
    /// (`before_execute`, `after_execute`, `before_finalise`), so a test can kill the worker.
    #[arg(long, env = "TAUROS_TEST_PAUSE_AT")]
    pub test_pause_at: Option<String>,
}

impl IssuerArgs {
    /// `TAUROS_ISSUER_KEY_RETENTION` as the app holds it.
    pub fn key_retention(&self) -> chrono::Duration {
        chrono::Duration::from_std(self.issuer_key_retention).unwrap_or(chrono::Duration::hours(
            tauros_domain::effect::DEFAULT_KEY_RETENTION_HOURS,
        ))
    }

    /// The configured issuer, if any.
    pub fn issuer(&self, test_seams: bool) -> anyhow::Result<Option<tauros_app::issuing::Issuer>> {
        let timeout = std::time::Duration::from_secs(self.issuer_timeout_seconds.max(1));
        let pause = match (&self.test_pause_at, test_seams) {
            (Some(point), true) => Some(tauros_app::issuing::PausePoint::parse(point).ok_or_else(|| {
                anyhow::anyhow!(
                    "TAUROS_TEST_PAUSE_AT must be before_execute, after_execute or before_finalise"
                )
            })?),
            _ => None,
        };
        let adapter: std::sync::Arc<dyn tauros_app::issuing::IssuerAdapter> = match self.issuer {
            None => return Ok(None),
            Some(IssuerKind::None) => std::sync::Arc::new(tauros_app::issuing::LocalIssuer),
            Some(IssuerKind::Http) => {
                let url = self
                    .issuer_url
                    .as_deref()
                    .filter(|u| !u.trim().is_empty())
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "TAUROS_ISSUER=http needs TAUROS_ISSUER_URL (where invoices are POSTed)"
                        )
                    })?;
                let parsed = reqwest::Url::parse(url)
                    .map_err(|e| anyhow::anyhow!("TAUROS_ISSUER_URL {url:?} is not a URL: {e}"))?;
                if !matches!(parsed.scheme(), "http" | "https") {
                    anyhow::bail!("TAUROS_ISSUER_URL must be an http or https URL");
                }
                std::sync::Arc::new(tauros_app::issuing::HttpIssuer::new(url, timeout)?)
            }
        };
        Ok(Some(tauros_app::issuing::Issuer::new(
            adapter, timeout, pause,
        )))
    }

    /// The reaper's horizon (at least the one-day floor).
    pub fn abandon_horizon(&self) -> anyhow::Result<chrono::Duration> {
        tauros_domain::effect::abandonment_horizon(self.claim_abandon_days)
            .map_err(anyhow::Error::msg)
    }
}
