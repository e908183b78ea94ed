//! What the operator configures: lifetimes, costs and limits.

use chrono::Duration;
use tauros_domain::webhook::{AllowList, SecretKey};

/// Lifetimes and costs the operator may tune.
#[derive(Clone, Debug)]
pub struct AppConfig {
    /// How long a human's session token lives.
    pub session_ttl: Duration,
    /// How long a newly issued API key lives.
    pub api_key_ttl: Duration,
    /// How long an invitation may be accepted.
    pub invitation_ttl: Duration,
    /// Threads that hash passwords (each hash maps 19 MiB of working memory and returns it).
    pub password_threads: usize,
    /// Password hashing jobs that may wait; beyond that a sign-in hears 503 at once.
    pub password_queue: usize,
    /// Requests a second per credential (0: no limit), and the burst above that rate.
    pub rate_limit_per_second: u32,
    pub rate_limit_burst: u32,
    /// How long a device token lives (docs/SECURITY.md, "Nobody can lock a human out").
    pub device_token_ttl: Duration,
    /// Failed sign-ins per email (from any address; they stop only sign-ins without a device
    /// token) and per device, within `sign_in_window` (0: no limit).
    pub sign_in_failures: u32,
    pub sign_in_window: std::time::Duration,
    /// Failed sign-ins for one email from one client address within `sign_in_window` (0: no
    /// limit).
    pub sign_in_address_failures: u32,
    /// Entries the failed-sign-in record holds at most; over it, the oldest windows go first.
    pub sign_in_record_entries: usize,
    /// Whether an issuer is configured: approving then enqueues the issue job.
    pub issuer_configured: bool,
    /// How long a completed effect claim is kept (with the peer's stored response, for operators).
    pub claim_retention: Duration,
    /// How long the issuer remembers an operation key; an older claim never executes by itself.
    pub issuer_key_retention: Duration,
    /// Where deliveries may go, and the key that seals signing secrets.
    pub webhooks: WebhookConfig,
}

impl Default for AppConfig {
    fn default() -> Self {
        AppConfig {
            session_ttl: Duration::hours(12),
            api_key_ttl: Duration::days(365),
            invitation_ttl: Duration::days(7),
            device_token_ttl: Duration::days(90),
            password_threads: default_password_threads(),
            password_queue: 16,
            rate_limit_per_second: 100,
            rate_limit_burst: 200,
            sign_in_failures: 10,
            sign_in_window: std::time::Duration::from_secs(15 * 60),
            sign_in_address_failures: DEFAULT_SIGN_IN_ADDRESS_FAILURES,
            sign_in_record_entries: DEFAULT_SIGN_IN_RECORD_ENTRIES,
            issuer_configured: false,
            claim_retention: Duration::days(tauros_domain::effect::DEFAULT_RETENTION_DAYS),
            issuer_key_retention: Duration::hours(
                tauros_domain::effect::DEFAULT_KEY_RETENTION_HOURS,
            ),
            webhooks: WebhookConfig::default(),
        }
    }
}

/// Default: failed sign-ins for one email from one client address in a window.
pub const DEFAULT_SIGN_IN_ADDRESS_FAILURES: u32 = 10;
/// Default: entries of the failed-sign-in record (docs/SECURITY.md: under 10 MiB).
pub const DEFAULT_SIGN_IN_RECORD_ENTRIES: usize = 100_000;

/// Half the cores (one to four), so sign-ins never take every core from the API.
pub fn default_password_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get() / 2)
        .clamp(1, 4)
}

/// How this process treats webhooks.
#[derive(Clone, Debug)]
pub struct WebhookConfig {
    /// Hosts deliveries may go to (`TAUROS_WEBHOOK_ALLOW_HOSTS`); empty: any public host.
    pub allow_hosts: AllowList,
    /// Seals signing secrets at rest (`TAUROS_SECRET_KEY`); `None` stores them as they are.
    pub secret_key: Option<SecretKey>,
    /// Counted attempts of one delivery cycle (`TAUROS_WEBHOOK_MAX_ATTEMPTS`, 25).
    pub max_attempts: i32,
    /// Failing time before an endpoint is disabled (`TAUROS_WEBHOOK_DISABLE_AFTER`, 3 days).
    pub disable_after: std::time::Duration,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        WebhookConfig {
            allow_hosts: AllowList::default(),
            secret_key: None,
            max_attempts: tauros_domain::job::DEFAULT_MAX_ATTEMPTS,
            disable_after: tauros_domain::webhook::DEFAULT_DISABLE_AFTER,
        }
    }
}
