//! The command line and its configuration: here the commands, the database and the values
//! several commands share. Every flag has an environment variable and a documented default
//! (`tauros --help`, `tauros serve --help`).

mod admin;
mod jobs;
mod serve;

pub use admin::{BootstrapArgs, OrgSetArgs, ReapArgs, UserUnlockArgs};
pub use jobs::{IssuerArgs, WorkerArgs, WorkerCommandArgs};
pub use serve::ServeArgs;

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
    /// Humans' sign-ins, for the operator of the machine.
    #[command(subcommand)]
    User(UserCommand),
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

/// `tauros user …`
#[derive(Debug, Subcommand)]
pub enum UserCommand {
    /// Clear the failed sign-ins counted for an email across addresses, audited with interface
    /// `cli`: the way in for a human whose email is under a guessing attack and who signs in
    /// from a device without a device token. Running servers forget the count at its next
    /// sign-in attempt.
    Unlock(UserUnlockArgs),
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

/// A duration with its unit: `30s`, `90m`, `24h`, `2d` (whole, positive, at most ten years).
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

/// The database pool that fits this machine: 4 connections per core, 8 to 32. On few cores
/// more connections only add context switches between the server and the database they share;
/// a pool of 8 still lets concurrent commits share their WAL flushes.
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
