//! Logging (tracing). The Prometheus recorder is `tauros_api`'s, which renders `/metrics`.

use tracing_subscriber::EnvFilter;

/// Installs the log subscriber; `filter` is an `EnvFilter` directive such as `info`.
pub fn init_logging(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr; stdout is for what a command prints on purpose (demo credentials).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}
