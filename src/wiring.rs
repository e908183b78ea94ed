//! Building and starting the crates: the store, the app, the workers, the claims' cleanup and
//! reaper, the metrics listener.

use crate::config::{DbArgs, IssuerArgs, WorkerArgs};
use crate::telemetry;
use anyhow::Context;
use std::sync::Arc;
use std::time::Duration;
use tauros_app::runtime::Workers;
use tauros_app::{App, AppConfig, AppError};

/// Claims one cleanup or reaper transaction deletes at most.
const REAP_BATCH: i64 = 500;

pub(crate) async fn open(db: &DbArgs) -> anyhow::Result<tauros_store::DynStore> {
    telemetry::init_logging(&db.log);
    let settings = tauros_store::PoolSettings {
        acquire_timeout: Duration::from_secs(db.db_acquire_timeout_seconds),
        statement_timeout: Duration::from_secs(db.db_statement_timeout_seconds),
        ..tauros_store::PoolSettings::new(db.db_max_connections)
    };
    let store = tauros_store::connect(&db.database_url, settings)
        .await
        .context("cannot open the database")?;
    store.migrate().await.context("cannot apply migrations")?;
    Ok(store)
}

/// Says, once at start, that webhook signing secrets are stored unsealed.
pub(crate) fn warn_unsealed(config: &AppConfig) {
    if config.webhooks.secret_key.is_none() {
        tracing::warn!(
            "TAUROS_SECRET_KEY is not set: webhook signing secrets are stored unsealed in the \
             database (see docs/SECURITY.md)"
        );
    }
}

/// Starts this process's job workers, unless there are none to start.
pub(crate) fn start_workers(app: &App, args: &WorkerArgs) -> anyhow::Result<Option<Workers>> {
    if args.workers == 0 && args.webhook_workers == 0 {
        return Ok(None);
    }
    let registry = Arc::new(args.registry()?);
    if registry.kinds().is_empty() {
        tracing::info!("no job kinds to run yet; workers idle");
    }
    let name = format!("{}:{}", hostname(), std::process::id());
    Ok(Some(Workers::start(
        app.clone(),
        registry,
        args.worker_config(name),
    )))
}

/// Claim cleanup (completed claims past retention) and the reaper (processing claims past the
/// abandonment horizon), every `--reap-interval-minutes`.
pub(crate) fn spawn_claim_maintenance(app: &App, args: &IssuerArgs) -> anyhow::Result<()> {
    let horizon = args.abandon_horizon()?;
    if args.reap_interval_minutes == 0 {
        return Ok(());
    }
    let every = Duration::from_secs(args.reap_interval_minutes.saturating_mul(60));
    let app = app.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match reap(&app, horizon).await {
                Ok((0, 0)) => {}
                Ok((cleaned, reaped)) => tracing::info!(cleaned, reaped, "effect claims tidied"),
                Err(e) => tracing::warn!(error = %e, "effect claim cleanup failed"),
            }
        }
    });
    Ok(())
}

pub(crate) async fn reap(app: &App, horizon: chrono::Duration) -> Result<(u64, u64), AppError> {
    let cleaned = app.clean_claims(REAP_BATCH).await?;
    let reaped = app.reap_claims(horizon, REAP_BATCH).await?;
    Ok((cleaned, reaped))
}

pub(crate) async fn stop_workers(workers: Option<Workers>, grace: Duration) {
    if let Some(workers) = workers
        && !workers.shutdown(grace).await
    {
        tracing::warn!(
            "grace period over; running jobs are left to their leases and will run again"
        );
    }
}

/// `/metrics` on its own address, under the same connection limits with a cap of its own: a
/// flood on one listener cannot take the other's connections.
pub(crate) async fn serve_metrics(
    bind: &str,
    app: App,
    limits: tauros_api::ConnectionLimits,
) -> anyhow::Result<()> {
    let metrics = tauros_api::listen(bind)
        .await
        .with_context(|| format!("cannot listen on {bind} for metrics"))?;
    tokio::spawn(async move {
        let router = tauros_api::ops_metrics_router(app);
        if let Err(e) = tauros_api::serve(metrics, router, limits, std::future::pending()).await {
            tracing::error!(error = %e, "metrics listener stopped");
        }
    });
    Ok(())
}

/// This machine's name, for the jobs' `worker` column.
pub(crate) fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}
