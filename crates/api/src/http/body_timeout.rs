//! The body progress limit: a request body that makes no progress for the body timeout is
//! abandoned, and the request is answered 408 `timeout` with `Connection: close`.
//!
//! The clock runs only while a handler waits for the next piece of the body, and starts again
//! at every piece that arrives: a slow body that keeps moving is read to its end (the 1 MiB
//! limit bounds its size), a stalled one is not waited on, and a handler busy with other work
//! is never cut. (tower-http's `RequestBodyTimeoutLayer` bounds the whole body instead, which
//! would cut a large body on a slow but honest link; docs/DECISIONS.md.)

use super::problem::ApiError;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// Wraps the request body in the progress clock; answers 408 if it ran out, whatever the
/// handler made of the failed read.
pub async fn body_progress(
    State(limit): State<Duration>,
    request: Request,
    next: Next,
) -> Response {
    if http_body::Body::is_end_stream(request.body()) {
        // No body (most GETs): nothing to wait for.
        return next.run(request).await;
    }
    let stalled = Arc::new(AtomicBool::new(false));
    let request = request.map(|body| {
        Body::new(Progress {
            inner: body,
            limit,
            timer: None,
            armed: false,
            stalled: Arc::clone(&stalled),
        })
    });
    let response = next.run(request).await;
    if !stalled.load(Ordering::Acquire) {
        return response;
    }
    tracing::info!(seconds = limit.as_secs_f64(), "request body stalled");
    metrics::counter!("http_timeouts_total", "limit" => "body").increment(1);
    let mut response = ApiError::new(
        StatusCode::REQUEST_TIMEOUT,
        "timeout",
        format!(
            "the request body stopped arriving for {} s; send the whole body again without pausing",
            limit.as_secs_f64()
        ),
    )
    .into_response();
    // The rest of the body may still be on its way; this connection cannot carry another
    // request after it.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// A request body whose reads fail once none has made progress for `limit`.
struct Progress {
    inner: Body,
    limit: Duration,
    /// Kept across waits and reset, not reallocated, for each piece of the body.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether the timer counts the current wait (false again once a piece arrives).
    armed: bool,
    stalled: Arc<AtomicBool>,
}

impl http_body::Body for Progress {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.stalled.load(Ordering::Relaxed) {
            return Poll::Ready(Some(Err(stalled_error())));
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            self.armed = false;
            return Poll::Ready(frame);
        }
        let this = &mut *self;
        if !this.armed {
            let deadline = Instant::now() + this.limit;
            match &mut this.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            this.armed = true;
        }
        if let Some(timer) = &mut this.timer
            && timer.as_mut().poll(cx).is_ready()
        {
            this.stalled.store(true, Ordering::Release);
            return Poll::Ready(Some(Err(stalled_error())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

fn stalled_error() -> axum::Error {
    axum::Error::new(std::io::Error::new(
        std::io::ErrorKind::TimedOut,
        "the request body made no progress",
    ))
}
