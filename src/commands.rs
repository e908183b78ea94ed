//! One function per command of the command line.

use crate::config::{
    BootstrapArgs, DbArgs, OrgSetArgs, ReapArgs, ServeArgs, UserUnlockArgs, WorkerCommandArgs,
};
use crate::wiring::{
    open, reap, serve_metrics, spawn_claim_maintenance, start_workers, stop_workers, warn_unsealed,
};
use crate::{process, telemetry};
use anyhow::Context;
use std::time::Duration;
use tauros_api::HttpConfig;
use tauros_app::{App, AppConfig, AppError};
use tokio::io::AsyncReadExt;

/// Approved invoices one page of the issuing redrive looks at.
const REDRIVE_BATCH: i64 = 200;

/// The reference peer, with the same logging and signals as every long-running command.
pub(crate) async fn peer(args: tauros_peer::PeerArgs) -> anyhow::Result<()> {
    telemetry::init_logging(&args.log);
    let stop = process::shutdown_signal()?;
    tauros_peer::run(args, stop).await
}

pub(crate) async fn migrate(db: DbArgs) -> anyhow::Result<()> {
    let store = open(&db).await?;
    println!("migrations applied ({})", store.backend());
    Ok(())
}

pub(crate) async fn bootstrap(args: BootstrapArgs) -> anyhow::Result<()> {
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

pub(crate) async fn org_set(args: OrgSetArgs) -> anyhow::Result<()> {
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

pub(crate) async fn user_unlock(args: UserUnlockArgs) -> anyhow::Result<()> {
    let store = open(&args.db).await?;
    let app = App::new(store, AppConfig::default());
    match app.unlock_sign_ins(&args.email).await {
        Ok(accounts) => {
            println!(
                "failed sign-ins for {} cleared ({accounts} account{}); a running server forgets \
                 its count at the next sign-in attempt",
                args.email.trim(),
                if accounts == 1 { "" } else { "s" },
            );
            Ok(())
        }
        Err(AppError::NotFound) => {
            anyhow::bail!(
                "no account has the email {:?}; nothing was changed",
                args.email
            )
        }
        Err(e) => Err(anyhow::anyhow!("{e}; nothing was changed")),
    }
}

pub(crate) fn print_openapi() -> anyhow::Result<()> {
    println!("{}", tauros_api::http::document().to_pretty_json()?);
    Ok(())
}

pub(crate) async fn serve(args: ServeArgs) -> anyhow::Result<()> {
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
        metrics_on_main: args.metrics_on_main(local),
        limits: args.limits(),
        mcp: args.mcp(),
    };
    if let Some(bind) = &args.metrics_bind {
        serve_metrics(bind, app.clone(), config.limits).await?;
    } else if !config.metrics_on_main {
        tracing::info!(
            address = %local,
            "/metrics is not served on a non-loopback address; set TAUROS_METRICS_BIND to give \
             it a listener of its own, or TAUROS_METRICS_PUBLIC=true to serve it here"
        );
    }
    app.spawn_pruning(Duration::from_secs(args.prune_interval_minutes.max(1) * 60));
    let workers = start_workers(&app, &args.jobs)?;
    spawn_claim_maintenance(&app, &args.jobs.issuer)?;
    app.spawn_issuing_redrive(
        (args.issue_redrive_seconds > 0).then(|| Duration::from_secs(args.issue_redrive_seconds)),
        REDRIVE_BATCH,
    );
    tracing::info!(
        address = %local,
        backend = app.store().backend(),
        console = %format_args!("http://{local}{}", tauros_api::console::PATH),
        workers = args.jobs.workers,
        webhook_workers = args.jobs.webhook_workers,
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

pub(crate) async fn worker(args: WorkerCommandArgs) -> anyhow::Result<()> {
    if args.jobs.workers == 0 && args.jobs.webhook_workers == 0 {
        anyhow::bail!("--workers 0 and --webhook-workers 0 leave nothing to run; give at least 1");
    }
    // A worker hashes no passwords: the smallest pool.
    let config = AppConfig {
        password_threads: 1,
        password_queue: 1,
        issuer_configured: args.jobs.issuer.issuer.is_some(),
        claim_retention: chrono::Duration::days(args.jobs.issuer.claim_retention_days.max(1)),
        issuer_key_retention: args.jobs.issuer.key_retention(),
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
        webhook_workers = args.jobs.webhook_workers,
        "tauros worker running"
    );
    stop.await;
    tracing::info!("shutting down: finishing running jobs");
    stop_workers(workers, Duration::from_secs(args.shutdown_grace_seconds)).await;
    Ok(())
}

/// `tauros reap`: one round of claim cleanup and reaping, then exit.
pub(crate) async fn reap_once(args: ReapArgs) -> anyhow::Result<()> {
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

pub(crate) fn print_demo(address: &str, demo: &tauros_app::DemoCredentials, mcp: bool) {
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
