//! The command line and its configuration. Every flag has an environment variable and a
//! documented default (`tauros --help`, `tauros serve --help`).

use clap::{Args, Parser, Subcommand};

/// Default database: a SQLite file in the working directory, created if missing.
pub const DEFAULT_DATABASE_URL: &str = "sqlite://tauros.db?mode=rwc";

/// Tauros: AI agents propose invoices, humans approve them.
#[derive(Debug, Parser)]
#[command(name = "tauros", version, about)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

// Parsed once at start and moved into its command: the size of the largest variant costs
// nothing worth a box.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Apply migrations, then serve the HTTP API (and run job workers) until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Apply migrations, then run job workers without HTTP until SIGINT or SIGTERM.
    Worker(WorkerCommandArgs),
    /// Apply migrations and exit.
    Migrate(DbArgs),
    /// Delete completed effect claims past retention and reap abandoned processing ones, once.
    Reap(ReapArgs),
    /// Create an organisation and its first approver (password read from standard input).
    BootstrapApprover(BootstrapArgs),
    /// Print the OpenAPI document.
    Openapi,
    /// Organisation settings, for the operator of the machine.
    #[command(subcommand)]
    Org(OrgCommand),
    /// Run the reference peer (the external system invoices are issued to, with fault
    /// injection for tests) until SIGINT or SIGTERM. It uses its own SQLite file, not Tauros'
    /// database.
    Peer(tauros_peer::PeerArgs),
}

/// `tauros org …`
#[derive(Debug, Subcommand)]
pub enum OrgCommand {
    /// Change an organisation's settings at once, audited with interface `cli`. This is the
    /// operator's way out of a one-approver organisation with four eyes on (through the API,
    /// turning four eyes off then needs a second approver).
    Set(OrgSetArgs),
}

/// `on` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Switch {
    On,
    Off,
}

impl Switch {
    pub fn is_on(self) -> bool {
        self == Switch::On
    }
}

/// `org set` options.
#[derive(Debug, Args, Clone)]
pub struct OrgSetArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// The organisation's name.
    #[arg(long)]
    pub org: String,
    /// `four_eyes`: an approver may not decide on invoices of agents they own.
    #[arg(long, value_enum)]
    pub four_eyes: Option<Switch>,
    /// `shared_review`: approvers see and decide on every agent's invoices.
    #[arg(long, value_enum)]
    pub shared_review: Option<Switch>,
}

/// Where the database is.
#[derive(Debug, Args, Clone)]
pub struct DbArgs {
    /// Database URL: `sqlite://FILE?mode=rwc` (embedded), `postgres://USER@HOST/DB`, or a
    /// formation's `postgres://USER@HOST1:PORT1,HOST2:PORT2/DB?target_session_attrs=read-write`
    /// (Tauros follows the host that accepts writes); `sslmode=require` or `verify-full` (with
    /// `sslrootcert=FILE`) for TLS.
    #[arg(long, env = "DATABASE_URL", default_value = DEFAULT_DATABASE_URL)]
    pub database_url: String,
    /// Maximum pooled database connections (default: 4 per CPU core, from 8 to 32).
    #[arg(long, env = "TAUROS_DB_MAX_CONNECTIONS", default_value_t = default_pool_size())]
    pub db_max_connections: u32,
    /// PostgreSQL: seconds a request waits for a database connection (and for a new one to
    /// open) before it is answered 503 `unavailable`, safe to retry. Bounds what a request
    /// waits during a failover.
    #[arg(long, env = "TAUROS_DB_ACQUIRE_TIMEOUT_SECONDS", default_value_t = 5,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub db_acquire_timeout_seconds: u64,
    /// PostgreSQL: the server cancels a statement running longer than this many seconds
    /// (`statement_timeout`; migrations have no limit). 0: no limit.
    #[arg(
        long,
        env = "TAUROS_DB_STATEMENT_TIMEOUT_SECONDS",
        default_value_t = 30
    )]
    pub db_statement_timeout_seconds: u64,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `tauros=debug`.
    #[arg(long, env = "TAUROS_LOG", default_value = "info")]
    pub log: String,
}

/// `serve` options.
#[derive(Debug, Args, Clone)]
pub struct ServeArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// Address to listen on.
    #[arg(long, env = "TAUROS_BIND", default_value = "127.0.0.1:8080")]
    pub bind: String,
    /// Seed a demo organisation (if absent) and print how to sign in.
    #[arg(long, env = "TAUROS_DEMO", default_value_t = false)]
    pub demo: bool,
    /// Serve /metrics on this separate address instead of the main one.
    #[arg(long, env = "TAUROS_METRICS_BIND")]
    pub metrics_bind: Option<String>,
    /// Serve /metrics on the main address even when it is not a loopback address (without
    /// it, /metrics is served there only on loopback; elsewhere it answers 404).
    #[arg(long, env = "TAUROS_METRICS_PUBLIC", default_value_t = false, value_parser = clap::builder::BoolishValueParser::new())]
    pub metrics_public: bool,
    /// Comma-separated browser origins allowed by CORS (none by default).
    #[arg(
        long,
        env = "TAUROS_CORS_ORIGINS",
        value_delimiter = ',',
        default_value = ""
    )]
    pub cors_origins: Vec<String>,
    /// Serve the MCP tool surface for agents at /mcp.
    #[arg(long, env = "TAUROS_MCP", value_enum, default_value = "on")]
    pub mcp: Switch,
    /// Comma-separated browser origins allowed to call /mcp; unset or empty: the CORS origins.
    /// A request with any other `Origin` is refused (requests without one, as agents send,
    /// are not).
    #[arg(long, env = "TAUROS_MCP_ORIGINS")]
    pub mcp_origins: Option<String>,
    /// Lifetime of a human's session token, in minutes.
    #[arg(long, env = "TAUROS_SESSION_TTL_MINUTES", default_value_t = 720)]
    pub session_ttl_minutes: i64,
    /// Lifetime of a newly issued agent API key, in days.
    #[arg(long, env = "TAUROS_API_KEY_TTL_DAYS", default_value_t = 365)]
    pub api_key_ttl_days: i64,
    /// Lifetime of an invitation, in hours.
    #[arg(long, env = "TAUROS_INVITATION_TTL_HOURS", default_value_t = 168)]
    pub invitation_ttl_hours: i64,
    /// Threads that hash passwords (default: half the cores, 1–4; each hash maps 19 MiB and
    /// returns it when done).
    #[arg(long, env = "TAUROS_PASSWORD_THREADS", default_value_t = tauros_app::default_password_threads())]
    pub password_threads: usize,
    /// Password hashing jobs that may wait; a sign-in beyond that hears 503 with Retry-After.
    #[arg(long, env = "TAUROS_PASSWORD_QUEUE", default_value_t = 16)]
    pub password_queue: usize,
    /// Requests a second per credential (API key or session); 0 turns the limit off.
    #[arg(long, env = "TAUROS_RATE_LIMIT_PER_SECOND", default_value_t = 100)]
    pub rate_limit_per_second: u32,
    /// Requests a credential may send at once above that rate.
    #[arg(long, env = "TAUROS_RATE_LIMIT_BURST", default_value_t = 200)]
    pub rate_limit_burst: u32,
    /// Failed sign-ins per email (from any address) before further attempts for it wait; 0:
    /// off.
    #[arg(long, env = "TAUROS_SIGN_IN_FAILURES", default_value_t = 10)]
    pub sign_in_failures: u32,
    /// Failed sign-ins per client address (any email) before further attempts from it wait;
    /// 0: off.
    #[arg(long, env = "TAUROS_SIGN_IN_ADDRESS_FAILURES", default_value_t = tauros_app::DEFAULT_SIGN_IN_ADDRESS_FAILURES)]
    pub sign_in_address_failures: u32,
    /// The window those failed sign-ins are counted in, in minutes.
    #[arg(long, env = "TAUROS_SIGN_IN_WINDOW_MINUTES", default_value_t = 15)]
    pub sign_in_window_minutes: u64,
    /// Minutes between sweeps that delete expired sessions, used or expired invitations, and
    /// webhook delivery attempts older than 30 days.
    #[arg(long, env = "TAUROS_PRUNE_INTERVAL_MINUTES", default_value_t = 10)]
    pub prune_interval_minutes: u64,
    /// With an issuer configured: seconds between sweeps that enqueue the issue job of every
    /// approved invoice that has none (one sweep always runs at start-up); 0: only that one.
    #[arg(long, env = "TAUROS_ISSUE_REDRIVE_SECONDS", default_value_t = 300)]
    pub issue_redrive_seconds: u64,
    /// Seconds a request's head (request line and headers) may take to arrive, from the
    /// connection's accept or the request's first byte; then the connection is closed.
    #[arg(long, env = "TAUROS_HEADER_READ_TIMEOUT_SECONDS", default_value_t = tauros_api::DEFAULT_HEADER_READ_TIMEOUT_SECONDS)]
    pub header_read_timeout_seconds: u64,
    /// Seconds a request body may make no progress (then 408 and the connection is closed),
    /// and a client may take no byte of its answer (then the connection is closed).
    #[arg(long, env = "TAUROS_BODY_TIMEOUT_SECONDS", default_value_t = tauros_api::DEFAULT_BODY_TIMEOUT_SECONDS)]
    pub body_timeout_seconds: u64,
    /// Seconds a keep-alive connection with no request in flight may wait for the next one.
    #[arg(long, env = "TAUROS_IDLE_TIMEOUT_SECONDS", default_value_t = tauros_api::DEFAULT_IDLE_TIMEOUT_SECONDS)]
    pub idle_timeout_seconds: u64,
    /// Connections served at once (per listener); more wait in the listen backlog.
    #[arg(long, env = "TAUROS_MAX_CONNECTIONS", default_value_t = tauros_api::DEFAULT_MAX_CONNECTIONS)]
    pub max_connections: usize,
    /// Connections served at once from one client address (per listener); a further one from
    /// that address is closed at once.
    #[arg(long, env = "TAUROS_MAX_CONNECTIONS_PER_ADDRESS", default_value_t = tauros_api::DEFAULT_MAX_CONNECTIONS_PER_ADDRESS)]
    pub max_connections_per_address: usize,
    /// Bytes a request body must bring in every progress window (or end within it); else 408
    /// and the connection is closed.
    #[arg(long, env = "TAUROS_BODY_PROGRESS_MIN_BYTES", default_value_t = tauros_api::DEFAULT_BODY_PROGRESS_MIN_BYTES)]
    pub body_progress_min_bytes: u64,
    /// Seconds of that progress window.
    #[arg(long, env = "TAUROS_BODY_PROGRESS_WINDOW_SECONDS", default_value_t = tauros_api::DEFAULT_BODY_PROGRESS_WINDOW_SECONDS)]
    pub body_progress_window_seconds: u64,
    /// Seconds in-flight requests and running jobs get to finish after SIGINT/SIGTERM.
    #[arg(long, env = "TAUROS_SHUTDOWN_GRACE_SECONDS", default_value_t = 30)]
    pub shutdown_grace_seconds: u64,
    /// Webhooks.
    #[command(flatten)]
    pub webhooks: WebhookArgs,
    /// Job workers.
    #[command(flatten)]
    pub jobs: WorkerArgs,
}

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

/// A command-line value that `Debug` never shows (the arguments derive it).
#[derive(Clone)]
pub struct Hidden(pub String);

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hidden(…)")
    }
}

impl std::str::FromStr for Hidden {
    type Err = std::convert::Infallible;

    fn from_str(s: &str) -> Result<Hidden, Self::Err> {
        Ok(Hidden(s.to_owned()))
    }
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

/// A duration with its unit: `30s`, `90m`, `24h`, `2d` (a positive whole number, at most ten
/// years).
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let text = text.trim();
    let split = text.len().saturating_sub(1);
    let (digits, unit) = text.split_at(split);
    let seconds_per = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("`{text}` needs a unit: s, m, h or d (e.g. 24h)")),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("`{text}` is not a whole number with a unit (e.g. 24h)"))?;
    let seconds = n.saturating_mul(seconds_per);
    if n == 0 || seconds > 10 * 365 * 86_400 {
        return Err(format!(
            "`{text}` must be more than 0 and at most ten years"
        ));
    }
    Ok(std::time::Duration::from_secs(seconds))
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

/// `reap` options.
#[derive(Debug, Args, Clone)]
pub struct ReapArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// Retention and the abandonment horizon.
    #[command(flatten)]
    pub issuer: IssuerArgs,
}

/// `bootstrap-approver` options.
#[derive(Debug, Args, Clone)]
pub struct BootstrapArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// Organisation name (created if it does not exist).
    #[arg(long, env = "TAUROS_BOOTSTRAP_ORG")]
    pub org: String,
    /// The approver's email.
    #[arg(long, env = "TAUROS_BOOTSTRAP_EMAIL")]
    pub email: String,
    /// Read the password from standard input (a trailing newline is trimmed). Required.
    #[arg(long, required = true)]
    pub password_stdin: bool,
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

impl ServeArgs {
    /// The app-level settings these flags describe; an error names a malformed variable.
    pub fn app_config(&self) -> anyhow::Result<tauros_app::AppConfig> {
        Ok(tauros_app::AppConfig {
            session_ttl: chrono::Duration::minutes(self.session_ttl_minutes.max(1)),
            api_key_ttl: chrono::Duration::days(self.api_key_ttl_days.max(1)),
            invitation_ttl: chrono::Duration::hours(self.invitation_ttl_hours.max(1)),
            password_threads: self.password_threads.max(1),
            password_queue: self.password_queue.max(1),
            rate_limit_per_second: self.rate_limit_per_second,
            rate_limit_burst: self.rate_limit_burst,
            sign_in_failures: self.sign_in_failures,
            sign_in_window: std::time::Duration::from_secs(self.sign_in_window_minutes.max(1) * 60),
            sign_in_address_failures: self.sign_in_address_failures,
            sign_in_record_entries: tauros_app::DEFAULT_SIGN_IN_RECORD_ENTRIES,
            issuer_configured: self.jobs.issuer.issuer.is_some(),
            claim_retention: chrono::Duration::days(self.jobs.issuer.claim_retention_days.max(1)),
            issuer_key_retention: self.jobs.issuer.key_retention(),
            webhooks: self.webhooks.config()?,
        })
    }

    /// The connection limits these flags describe (each at least 1).
    pub fn limits(&self) -> tauros_api::ConnectionLimits {
        let seconds = |s: u64| std::time::Duration::from_secs(s.max(1));
        tauros_api::ConnectionLimits {
            header_read_timeout: seconds(self.header_read_timeout_seconds),
            body_timeout: seconds(self.body_timeout_seconds),
            idle_timeout: seconds(self.idle_timeout_seconds),
            max_connections: self.max_connections.max(1),
            max_connections_per_address: self.max_connections_per_address.max(1),
            body_progress_min_bytes: self.body_progress_min_bytes,
            body_progress_window: seconds(self.body_progress_window_seconds),
        }
    }

    /// Whether the main listener, bound to `local`, serves `/metrics`: not when it has a
    /// listener of its own (`TAUROS_METRICS_BIND`), and on a non-loopback address only when
    /// the operator says so (`TAUROS_METRICS_PUBLIC`).
    pub fn metrics_on_main(&self, local: std::net::SocketAddr) -> bool {
        self.metrics_bind.is_none()
            && (local.ip().to_canonical().is_loopback() || self.metrics_public)
    }

    /// The CORS origins that were actually given.
    pub fn origins(&self) -> Vec<String> {
        self.cors_origins
            .iter()
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// The MCP endpoint's settings: its own origins if given, else the CORS origins.
    pub fn mcp(&self) -> tauros_api::mcp::McpConfig {
        let own: Vec<String> = self
            .mcp_origins
            .as_deref()
            .unwrap_or("")
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        tauros_api::mcp::McpConfig {
            enabled: self.mcp.is_on(),
            origins: if own.is_empty() { self.origins() } else { own },
        }
    }
}

/// The database pool that fits this machine: 4 connections per core, 8 to 32. On few cores
/// more connections only add context switches between the server and the database they
/// share (PERFORMANCE.md measures it); a pool of 8 still lets concurrent commits share their
/// WAL flushes.
pub fn default_pool_size() -> u32 {
    let cores = std::thread::available_parallelism().map_or(2, std::num::NonZero::get);
    u32::try_from(cores.saturating_mul(4))
        .unwrap_or(u32::MAX)
        .clamp(8, 32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// `tauros serve` with these flags, parsed as the binary parses them (no process
    /// environment is changed: that would race the other tests).
    fn serve(flags: &[&str]) -> Result<ServeArgs, clap::Error> {
        let args = ["tauros", "serve"].iter().chain(flags);
        match Cli::try_parse_from(args)?.command {
            Command::Serve(serve) => Ok(serve),
            other => panic!("parsed as {other:?}"),
        }
    }

    #[test]
    fn deliveries_have_a_pool_of_their_own_with_its_own_setting() {
        let defaults = serve(&[]).unwrap().jobs.worker_config("h:1".to_owned());
        assert_eq!((defaults.workers, defaults.webhook_workers), (2, 2));
        let args = ["--workers", "0", "--webhook-workers", "5"];
        let config = serve(&args).unwrap().jobs.worker_config("h:1".to_owned());
        assert_eq!((config.workers, config.webhook_workers), (0, 5));
    }

    #[test]
    fn the_webhook_disable_window_reads_a_number_and_a_unit() {
        let days = |d: u64| std::time::Duration::from_secs(d * 86_400);
        let config = serve(&[]).unwrap().webhooks.config().unwrap();
        assert_eq!(config.disable_after, days(3));
        assert_eq!(config.max_attempts, 25);
        for (text, seconds) in [
            ("72h", 259_200),
            ("90m", 5_400),
            ("45s", 45),
            (" 1d ", 86_400),
        ] {
            assert_eq!(parse_duration(text).unwrap().as_secs(), seconds, "{text}");
        }
        for wrong in ["", "0s", "2", "3 weeks", "-1d", "1.5h", "d"] {
            assert!(parse_duration(wrong).is_err(), "{wrong}");
        }
        let args = ["--webhook-disable-after", "3w"];
        let e = serve(&args).unwrap().webhooks.config().unwrap_err();
        assert!(
            e.to_string().contains("TAUROS_WEBHOOK_DISABLE_AFTER"),
            "{e}"
        );
        let args = ["--webhook-max-attempts", "0"];
        assert!(serve(&args).unwrap().webhooks.config().is_err());
    }

    #[test]
    fn the_issuer_key_retention_is_a_duration_with_a_unit_24_hours_by_default() {
        let config = serve(&[]).unwrap().app_config().unwrap();
        assert_eq!(config.issuer_key_retention, chrono::Duration::hours(24));
        let config = serve(&["--issuer-key-retention", "90m"])
            .unwrap()
            .app_config()
            .unwrap();
        assert_eq!(config.issuer_key_retention, chrono::Duration::minutes(90));
        assert_eq!(
            parse_duration("2d"),
            Ok(std::time::Duration::from_secs(172_800))
        );
        assert_eq!(
            parse_duration("30s"),
            Ok(std::time::Duration::from_secs(30))
        );
        for wrong in ["24", "0h", "h", "1.5h", "-1h", "24 hours", "99999d"] {
            assert!(parse_duration(wrong).is_err(), "{wrong}");
        }
        let wrong = serve(&["--issuer-key-retention", "soon"]).unwrap_err();
        assert_eq!(wrong.kind(), clap::error::ErrorKind::ValueValidation);
    }

    #[test]
    fn mcp_is_on_by_default_turned_off_with_off_and_nothing_else() {
        assert!(serve(&[]).unwrap().mcp().enabled);
        assert!(serve(&["--mcp", "on"]).unwrap().mcp().enabled);
        assert!(!serve(&["--mcp", "off"]).unwrap().mcp().enabled);
        let wrong = serve(&["--mcp", "no"]).unwrap_err();
        assert_eq!(wrong.kind(), clap::error::ErrorKind::InvalidValue);
    }

    #[test]
    fn mcp_origins_are_their_own_else_the_cors_origins() {
        let cors = [
            "--cors-origins",
            "https://console.example, https://ops.example",
        ];
        // Unset or empty: the CORS origins, trimmed.
        let unset_or_empty: [&[&str]; 3] = [&[], &["--mcp-origins", ""], &["--mcp-origins", " , "]];
        for own in unset_or_empty {
            let args: Vec<&str> = cors.iter().chain(own).copied().collect();
            assert_eq!(
                serve(&args).unwrap().mcp().origins,
                ["https://console.example", "https://ops.example"],
                "{own:?}"
            );
        }
        // Given: only those, the CORS list ignored.
        let args: Vec<&str> = cors
            .iter()
            .chain(&[
                "--mcp-origins",
                " https://agent.example ,,https://ide.example",
            ])
            .copied()
            .collect();
        assert_eq!(
            serve(&args).unwrap().mcp().origins,
            ["https://agent.example", "https://ide.example"]
        );
        // Neither: no browser origin may call /mcp.
        assert!(serve(&[]).unwrap().mcp().origins.is_empty());
    }

    #[test]
    fn metrics_are_on_the_main_listener_only_on_loopback_unless_made_public() {
        let at = |a: &str| a.parse::<std::net::SocketAddr>().unwrap();
        let plain = serve(&[]).unwrap();
        assert!(plain.metrics_on_main(at("127.0.0.1:8080")));
        assert!(plain.metrics_on_main(at("[::1]:8080")));
        assert!(!plain.metrics_on_main(at("0.0.0.0:8080")));
        assert!(!plain.metrics_on_main(at("[::]:8080")));
        assert!(!plain.metrics_on_main(at("10.1.2.3:8080")));
        let public = serve(&["--metrics-public"]).unwrap();
        assert!(public.metrics_on_main(at("0.0.0.0:8080")));
        let own = serve(&["--metrics-bind", "127.0.0.1:9090", "--metrics-public"]).unwrap();
        assert!(!own.metrics_on_main(at("127.0.0.1:8080")));
    }

    /// The flags above are read from the documented variables.
    #[test]
    fn the_mcp_settings_come_from_the_documented_variables() {
        let cli = Cli::command();
        let serve = cli.find_subcommand("serve").expect("serve");
        let env = |id: &str| {
            let arg = serve.get_arguments().find(|a| a.get_id() == id);
            arg.and_then(|a| a.get_env()).and_then(|e| e.to_str())
        };
        assert_eq!(env("mcp"), Some("TAUROS_MCP"));
        assert_eq!(env("mcp_origins"), Some("TAUROS_MCP_ORIGINS"));
        assert_eq!(env("cors_origins"), Some("TAUROS_CORS_ORIGINS"));
    }
}
