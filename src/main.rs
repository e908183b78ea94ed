//! The `tauros` command line: serve, worker, migrate, bootstrap-approver, openapi, org set, peer.

mod config;
mod process;
mod telemetry;

use crate::config::{
    BootstrapArgs, Cli, Command, DbArgs, IssuerArgs, OrgCommand, OrgSetArgs, ReapArgs, ServeArgs,
    WorkerArgs, WorkerCommandArgs,
};
use anyhow::Context;
use clap::Parser;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tauros_api::HttpConfig;
use tauros_app::runtime::Workers;
use tauros_app::{App, AppConfig, AppError};

use tokio::io::AsyncReadExt;

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => serve(args).await,
        Command::Worker(args) => worker(args).await,
        Command::Migrate(args) => migrate(args).await,
        Command::BootstrapApprover(args) => bootstrap(args).await,
        Command::Openapi => print_openapi(),
        Command::Org(OrgCommand::Set(args)) => org_set(args).await,
        Command::Peer(args) => peer(args).await,
        Command::Reap(args) => reap_once(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tauros: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn open(db: &DbArgs) -> anyhow::Result<tauros_store::DynStore> {
    telemetry::init_logging(&db.log);
    let store = tauros_store::connect(&db.database_url, db.db_max_connections)
        .await
        .context("cannot open the database")?;
    store.migrate().await.context("cannot apply migrations")?;
    Ok(store)
}

/// The reference peer, with the same logging and signals as every long-running command.
async fn peer(args: tauros_peer::PeerArgs) -> anyhow::Result<()> {
    telemetry::init_logging(&args.log);
    let stop = process::shutdown_signal()?;
    tauros_peer::run(args, stop).await
}

async fn migrate(db: DbArgs) -> anyhow::Result<()> {
    let store = open(&db).await?;
    println!("migrations applied ({})", store.backend());
    Ok(())
}

async fn bootstrap(args: BootstrapArgs) -> anyhow::Result<()> {
    let mut password = String::new();
    tokio::io::stdin()
        .read_to_string(&mut password)
        .await
        .context("cannot read the password from standard input")?;
    let password = password.strip_suffix('\n').unwrap_or(&password);
    let password = password.strip_suffix('\r').unwrap_or(password).to_owned();
    let store = open(&args.db).await?;
    let app = App::new(store, AppConfig::default());
    match app
        .bootstrap_approver(&args.org, &args.email, password)
        .await
    {
        Ok(done) => {
            println!(
                "approver {} created in organisation {} ({})",
                args.email, args.org, done.org_id
            );
            Ok(())
        }
        Err(AppError::ApproverExists) => {
            anyhow::bail!(
                "organisation {:?} already has an approver; nothing was changed",
                args.org
            )
        }
        Err(AppError::Validation(errors)) => {
            let why: Vec<String> = errors
                .iter()
                .map(|e| format!("{}: {}", e.field, e.detail))
                .collect();
            anyhow::bail!("{}; nothing was changed", why.join("; "))
        }
        Err(e) => Err(anyhow::anyhow!("{e}; nothing was changed")),
    }
}

async fn org_set(args: OrgSetArgs) -> anyhow::Result<()> {
    if args.four_eyes.is_none() && args.shared_review.is_none() {
        anyhow::bail!("name a setting to change: --four-eyes on|off and/or --shared-review on|off");
    }
    let store = open(&args.db).await?;
    let app = App::new(store, AppConfig::default());
    let request = tauros_app::OrgSettingsChange {
        four_eyes: args.four_eyes.map(|s| s.is_on()),
        shared_review: args.shared_review.map(|s| s.is_on()),
    };
    match app.set_org_settings(&args.org, request).await {
        Ok(org) => {
            println!(
                "organisation {}: four_eyes {}, shared_review {}",
                org.name,
                if org.four_eyes { "on" } else { "off" },
                if org.shared_review { "on" } else { "off" },
            );
            Ok(())
        }
        Err(AppError::NotFound) => {
            anyhow::bail!(
                "no organisation is named {:?}; nothing was changed",
                args.org
            )
        }
        Err(e) => Err(anyhow::anyhow!("{e}; nothing was changed")),
    }
}

fn print_openapi() -> anyhow::Result<()> {
    println!("{}", tauros_api::openapi::document().to_pretty_json()?);
    Ok(())
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    let stop = process::shutdown_signal()?;
    let config = args.app_config()?;
    let store = open(&args.db).await?;
    warn_unsealed(&config);
    let app = App::new(store, config);
    let listener = tauros_api::listen(&args.bind)
        .await
        .with_context(|| format!("cannot listen on {}", args.bind))?;
    let local = listener.local_addr()?;
    if args.demo {
        let demo = app
            .seed_demo()
            .await
            .map_err(|e| anyhow::anyhow!("demo seed failed: {e}"))?;
        print_demo(&local.to_string(), &demo, args.mcp.is_on());
    }
    let config = HttpConfig {
        cors_origins: args.origins(),
        metrics_on_main: args.metrics_bind.is_none(),
        limits: args.limits(),
        mcp: args.mcp(),
    };
    if let Some(bind) = &args.metrics_bind {
        serve_metrics(bind, app.clone(), config.limits).await?;
    }
    app.spawn_pruning(Duration::from_secs(args.prune_interval_minutes.max(1) * 60));
    let workers = start_workers(&app, &args.jobs)?;
    spawn_claim_maintenance(&app, &args.jobs.issuer)?;
    tracing::info!(
        address = %local,
        backend = app.store().backend(),
        console = %format_args!("http://{local}{}", tauros_api::console::PATH),
        workers = args.jobs.workers,
        "tauros listening"
    );
    let grace = Duration::from_secs(args.shutdown_grace_seconds);
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let mut server = tokio::spawn(tauros_api::serve(
        listener,
        tauros_api::router(app, &config),
        config.limits,
        async move {
            let _ = stop_rx.wait_for(|stop| *stop).await;
        },
    ));
    tokio::select! {
        () = stop => {}
        result = &mut server => {
            return result.context("server task failed")?.context("server failed");
        }
    }
    tracing::info!("shutting down: finishing in-flight requests and running jobs");
    let _ = stop_tx.send(true);
    // In-flight requests and running jobs get the same `grace` to finish; then we stop
    // regardless (a job still running is left to its lease, and runs again elsewhere).
    let http = async {
        match tokio::time::timeout(grace, server).await {
            Ok(result) => result
                .context("server task failed")?
                .context("server failed"),
            Err(_) => {
                tracing::warn!("grace period over; exiting with requests still in flight");
                Ok(())
            }
        }
    };
    let (outcome, ()) = tokio::join!(http, stop_workers(workers, grace));
    outcome
}

async fn worker(args: WorkerCommandArgs) -> anyhow::Result<()> {
    if args.jobs.workers == 0 {
        anyhow::bail!("--workers 0 leaves nothing to run; give at least 1");
    }
    // A worker hashes no passwords: the smallest pool.
    let config = AppConfig {
        password_threads: 1,
        password_queue: 1,
        issuer_configured: args.jobs.issuer.issuer.is_some(),
        claim_retention: chrono::Duration::days(args.jobs.issuer.claim_retention_days.max(1)),
        webhooks: args.webhooks.config()?,
        ..AppConfig::default()
    };
    let stop = process::shutdown_signal()?;
    let store = open(&args.db).await?;
    warn_unsealed(&config);
    let app = App::new(store, config);
    if let Some(bind) = &args.metrics_bind {
        serve_metrics(bind, app.clone(), tauros_api::ConnectionLimits::default()).await?;
    }
    let workers = start_workers(&app, &args.jobs)?;
    spawn_claim_maintenance(&app, &args.jobs.issuer)?;
    tracing::info!(
        backend = app.store().backend(),
        workers = args.jobs.workers,
        "tauros worker running"
    );
    stop.await;
    tracing::info!("shutting down: finishing running jobs");
    stop_workers(workers, Duration::from_secs(args.shutdown_grace_seconds)).await;
    Ok(())
}

/// Says, once at start, that webhook signing secrets are stored unsealed.
fn warn_unsealed(config: &AppConfig) {
    if config.webhooks.secret_key.is_none() {
        tracing::warn!(
            "TAUROS_SECRET_KEY is not set: webhook signing secrets are stored unsealed in the \
             database (see docs/SECURITY.md)"
        );
    }
}

/// Starts this process's job workers, unless there are none to start.
fn start_workers(app: &App, args: &WorkerArgs) -> anyhow::Result<Option<Workers>> {
    if args.workers == 0 {
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
fn spawn_claim_maintenance(app: &App, args: &IssuerArgs) -> anyhow::Result<()> {
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

async fn reap(app: &App, horizon: chrono::Duration) -> Result<(u64, u64), AppError> {
    let cleaned = app.clean_claims(REAP_BATCH).await?;
    let reaped = app.reap_claims(horizon, REAP_BATCH).await?;
    Ok((cleaned, reaped))
}

/// Claims one cleanup or reaper transaction deletes at most.
const REAP_BATCH: i64 = 500;

/// `tauros reap`: one round of claim cleanup and reaping, then exit.
async fn reap_once(args: ReapArgs) -> anyhow::Result<()> {
    let horizon = args.issuer.abandon_horizon()?;
    let store = open(&args.db).await?;
    let config = AppConfig {
        claim_retention: chrono::Duration::days(args.issuer.claim_retention_days.max(1)),
        ..AppConfig::default()
    };
    let app = App::new(store, config);
    let (cleaned, reaped) = reap(&app, horizon)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    println!(
        "effect claims: {cleaned} completed past retention deleted, {reaped} abandoned processing reaped"
    );
    Ok(())
}

async fn stop_workers(workers: Option<Workers>, grace: Duration) {
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
async fn serve_metrics(
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
fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "localhost".to_owned())
}

fn print_demo(address: &str, demo: &tauros_app::DemoCredentials, mcp: bool) {
    let base = format!("http://{address}");
    let mcp = if mcp {
        format!("MCP:       {base}/mcp with the agent key as Bearer (docs/MCP.md)\n")
    } else {
        String::new()
    };
    println!(
        "\nTauros demo is {} at {base}\n\n\
         Console:   {base}/console/   (open it in a browser and sign in as the approver)\n\n\
         Approver:  {}  /  {}\n\
         Operator:  {}  /  {}\n\
         Agent key: {}   (agent \"Billing agent\"; a fresh key on every start)\n\n\
         Try it:\n\
         \x20 curl -s {base}/v1/me -H 'Authorization: Bearer {}'\n\
         \x20 curl -s {base}/v1/sessions -H 'Content-Type: application/json' \\\n\
         \x20      -d '{{\"email\":\"{}\",\"password\":\"{}\"}}'\n\
         API docs:  {base}/docs   OpenAPI: {base}/openapi.json\n{mcp}",
        if demo.created {
            "seeded"
        } else {
            "ready (seeded earlier)"
        },
        demo.approver_email,
        demo.password,
        demo.operator_email,
        demo.password,
        demo.agent_key,
        demo.agent_key,
        demo.approver_email,
        demo.password,
    );
}
