//! `serve`: the HTTP server's flags, and what they become for the app and the listener.

use super::jobs::{WebhookArgs, WorkerArgs};
use super::{DbArgs, Switch};
use clap::Args;

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
    /// Lifetime of a device token (what a browser keeps to be known at its next sign-in), in
    /// days.
    #[arg(long, env = "TAUROS_DEVICE_TOKEN_TTL_DAYS", default_value_t = 90)]
    pub device_token_ttl_days: i64,
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
    /// Failed sign-ins per email (from any address) before further attempts for it without a
    /// device token wait, and per device token before its attempts wait; 0: off.
    #[arg(long, env = "TAUROS_SIGN_IN_FAILURES", default_value_t = 10)]
    pub sign_in_failures: u32,
    /// Failed sign-ins for one email from one client address before further attempts for it
    /// from there wait; 0: off.
    #[arg(long, env = "TAUROS_SIGN_IN_ADDRESS_FAILURES", default_value_t = tauros_app::DEFAULT_SIGN_IN_ADDRESS_FAILURES)]
    pub sign_in_address_failures: u32,
    /// The window those failed sign-ins are counted in, in minutes.
    #[arg(long, env = "TAUROS_SIGN_IN_WINDOW_MINUTES", default_value_t = 15)]
    pub sign_in_window_minutes: u64,
    /// Minutes between sweeps that delete expired sessions and device tokens, used or expired
    /// invitations, and webhook delivery attempts older than 30 days.
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

impl ServeArgs {
    /// The app-level settings these flags describe; an error names a malformed variable.
    pub fn app_config(&self) -> anyhow::Result<tauros_app::AppConfig> {
        Ok(tauros_app::AppConfig {
            session_ttl: chrono::Duration::minutes(self.session_ttl_minutes.max(1)),
            api_key_ttl: chrono::Duration::days(self.api_key_ttl_days.max(1)),
            device_token_ttl: chrono::Duration::days(self.device_token_ttl_days.max(1)),
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
            shed_after: std::time::Duration::from_millis(tauros_api::DEFAULT_SHED_AFTER_MS),
            max_connections_per_address: self.max_connections_per_address.max(1),
            body_progress_min_bytes: self.body_progress_min_bytes,
            body_progress_window: seconds(self.body_progress_window_seconds),
        }
    }

    /// Whether the main listener, bound to `local`, serves `/metrics`, as the metrics flags say.
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
