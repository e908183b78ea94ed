//! The peer's own accept loop: `axum::serve` always writes the handler's answer, but some faults
//! must close the socket instead, so every connection carries a [`Hangup`] a handler can pull.

use super::faults::{Faults, Mode};
use axum::Router;
use axum::extract::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::TokioIo;
use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, watch};
use tower::ServiceExt;

/// Closes its connection without a byte of answer; handlers find it in the request extensions.
#[derive(Clone, Default)]
pub struct Hangup(Arc<Notify>);

impl Hangup {
    /// Closes the connection; the caller must never answer (await [`Hangup::now`]).
    pub async fn now(&self) -> Infallible {
        // `notify_one` keeps the permit if the connection task is not waiting yet.
        self.0.notify_one();
        std::future::pending().await
    }

    async fn requested(&self) {
        self.0.notified().await;
    }
}

/// The routes `refuse_connections` spares, so a test can still see and clear faults.
fn is_control(path: &str) -> bool {
    path == "/stats"
        || path == "/faults"
        || path.starts_with("/faults/")
        || path.starts_with("/records/")
}

/// Serves `router` until `shutdown` resolves, then gives open connections up to `grace`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    faults: Arc<Faults>,
    shutdown: impl Future<Output = ()>,
    grace: Duration,
) {
    let (stop_tx, stop_rx) = watch::channel(false);
    // Every connection task holds a sender; when all are gone, `recv` answers None.
    let (open_tx, mut open_rx) = mpsc::channel::<()>(1);
    tokio::pin!(shutdown);
    loop {
        tokio::select! {
            () = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(connection(
                        stream,
                        router.clone(),
                        Arc::clone(&faults),
                        stop_rx.clone(),
                        open_tx.clone(),
                    ));
                }
                Err(e) => {
                    // E.g. out of file descriptors: wait a little rather than spin.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
        }
    }
    drop(listener);
    let _ = stop_tx.send(true);
    drop(open_tx);
    if tokio::time::timeout(grace, open_rx.recv()).await.is_err() {
        tracing::warn!("grace period over; closing connections with requests in flight");
    }
}

async fn connection(
    stream: TcpStream,
    router: Router,
    faults: Arc<Faults>,
    mut stop: watch::Receiver<bool>,
    _open: mpsc::Sender<()>,
) {
    let hangup = Hangup::default();
    let service = {
        let hangup = hangup.clone();
        hyper::service::service_fn(move |mut request: Request<Incoming>| {
            let router = router.clone();
            let faults = Arc::clone(&faults);
            let hangup = hangup.clone();
            async move {
                if !is_control(request.uri().path())
                    && faults.take(Mode::RefuseConnections, None).is_some()
                {
                    tracing::info!("refused a connection (refuse_connections)");
                    match hangup.now().await {}
                }
                request.extensions_mut().insert(hangup);
                router.oneshot(request).await
            }
        })
    };
    let conn = http1::Builder::new().serve_connection(TokioIo::new(stream), service);
    tokio::pin!(conn);
    let stopping = async move {
        let _ = stop.wait_for(|stopped| *stopped).await;
    };
    // Returning drops the connection and with it the socket: a hangup closes it unanswered.
    tokio::select! {
        result = conn.as_mut() => log_end(result),
        () = hangup.requested() => {}
        () = stopping => {
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                result = conn.as_mut() => log_end(result),
                () = hangup.requested() => {}
            }
        }
    }
}

fn log_end(result: hyper::Result<()>) {
    if let Err(e) = result {
        tracing::debug!(error = %e, "connection ended with an error");
    }
}
