//! `tauros peer`: the reference peer Tauros issues approved invoices to (docs/PEER.md). It
//! shares nothing with the service but the wire format: it depends on no other Tauros crate and
//! keeps its operations in its own SQLite file.

#![forbid(unsafe_code)]

mod faults;
mod op_key;
mod routes;
mod say;
mod server;
mod store;

use anyhow::Context;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// How long open connections get to finish after SIGINT/SIGTERM.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The default key memory: 30 days, longer than Tauros' `TAUROS_ISSUER_KEY_RETENTION` (24 h).
pub const DEFAULT_KEY_RETENTION_SECONDS: u64 = 30 * 24 * 3600;

/// `peer` options.
#[derive(Debug, clap::Args, Clone)]
pub struct PeerArgs {
    /// Address to listen on (port 0: any free port; the line printed on start names it).
    #[arg(long, env = "TAUROS_PEER_BIND", default_value = "127.0.0.1:0")]
    pub bind: String,
    /// The peer's SQLite file (created if missing); its operations survive a restart.
    #[arg(long, env = "TAUROS_PEER_DATABASE", default_value = "tauros-peer.db")]
    pub database: PathBuf,
    /// How long the peer remembers an operation key, in seconds: after that, recovery answers
    /// 404 `absent` and an execute under the key makes a new effect (default: 30 days).
    #[arg(long, env = "TAUROS_PEER_KEY_RETENTION_SECONDS", default_value_t = DEFAULT_KEY_RETENTION_SECONDS)]
    pub key_retention_seconds: u64,
    /// Log filter (tracing `EnvFilter` syntax), e.g. `info` or `debug`.
    #[arg(long, env = "TAUROS_LOG", default_value = "info")]
    pub log: String,
}

/// Runs the peer until `shutdown` resolves (the binary passes SIGINT/SIGTERM, installed
/// before the peer says it listens). Logging is the caller's to set up.
pub async fn run(args: PeerArgs, shutdown: impl Future<Output = ()>) -> anyhow::Result<()> {
    let store = store::Store::open(
        &args.database,
        Duration::from_secs(args.key_retention_seconds),
    )
    .await?;
    let listener = tokio::net::TcpListener::bind(&args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let address = listener.local_addr()?;
    let faults = Arc::new(faults::Faults::default());
    let router = routes::router(store.clone(), Arc::clone(&faults));
    let shutdown = async {
        shutdown.await;
        tracing::info!("stopping: open connections get a few seconds to finish");
    };
    say::say(&format!("peer listening on http://{address}"));
    server::serve(listener, router, faults, shutdown, SHUTDOWN_GRACE).await;
    store.close().await;
    tracing::info!("peer stopped");
    Ok(())
}
