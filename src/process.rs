//! Process-level plumbing shared by every long-running command (`serve`, `worker`, `peer`).
//! A leaf: it imports nothing else from the crate.

use anyhow::Context;

/// Resolves on SIGTERM or SIGINT. The handlers are installed when this is called, not when the
/// future is first polled: call it before the process says it is ready, so a signal sent the
/// moment the address is printed drains the process instead of killing it outright.
#[cfg(unix)]
pub fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut terminate = signal(SignalKind::terminate()).context("cannot handle SIGTERM")?;
    let mut interrupt = signal(SignalKind::interrupt()).context("cannot handle SIGINT")?;
    Ok(async move {
        tokio::select! {
            _ = terminate.recv() => {},
            _ = interrupt.recv() => {},
        }
    })
}

/// Resolves on Ctrl-C (the only signal there is off Unix).
#[cfg(not(unix))]
pub fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    Ok(async {
        let _ = tokio::signal::ctrl_c().await;
    })
}
