//! The body progress limits: a request body that makes no progress for the body timeout, or
//! brings less than `min_bytes` in a progress window (1 KiB in 10 s by default), is abandoned,
//! and the request is answered 408 `timeout` with `Connection: close`.
//!
//! The stall clock runs only while a handler waits for the body and restarts at every piece,
//! so a handler busy with other work is never cut. The rate rule, whose windows start at the
//! handler's first read, stops a body that trickles a byte before each stall deadline from
//! holding its connection as long as the 1 MiB limit allows. tower-http's
//! `RequestBodyTimeoutLayer` bounds the whole body instead, which would cut a large body on a
//! slow but honest link (docs/DECISIONS.md).

use super::problem::ApiError;
use super::serve::ConnectionLimits;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The two body clocks of [`ConnectionLimits`].
#[derive(Clone, Copy, Debug)]
pub struct BodyClock {
    /// No progress at all for this long: abandoned.
    pub stall: Duration,
    /// Less than `min_bytes` in a window of `window`: abandoned.
    pub min_bytes: u64,
    pub window: Duration,
}

impl From<&ConnectionLimits> for BodyClock {
    fn from(limits: &ConnectionLimits) -> BodyClock {
        BodyClock {
            stall: limits.body_timeout,
            min_bytes: limits.body_progress_min_bytes,
            window: limits.body_progress_window,
        }
    }
}

/// Why a body was abandoned (0: it was not).
const STALLED: u8 = 1;
const TOO_SLOW: u8 = 2;

/// Runs the rest of the request (`run`) with its body under the progress clocks; answers 408
/// if one ran out, whatever the handler made of the failed read.
pub(crate) async fn with_body_clock<F, Fut>(clock: BodyClock, request: Request, run: F) -> Response
where
    F: FnOnce(Request) -> Fut,
    Fut: std::future::Future<Output = Response>,
{
    if http_body::Body::is_end_stream(request.body()) {
        return run(request).await;
    }
    let abandoned = Arc::new(AtomicU8::new(0));
    let request = request.map(|body| {
        Body::new(Progress {
            inner: body,
            clock,
            timer: None,
            armed: false,
            window: None,
            abandoned: Arc::clone(&abandoned),
        })
    });
    let response = run(request).await;
    let detail = match abandoned.load(Ordering::Acquire) {
        STALLED => {
            tracing::info!(seconds = clock.stall.as_secs_f64(), "request body stalled");
            format!(
                "the request body stopped arriving for {} s; send the whole body again without \
                 pausing",
                clock.stall.as_secs_f64()
            )
        }
        TOO_SLOW => {
            tracing::info!(
                min_bytes = clock.min_bytes,
                seconds = clock.window.as_secs_f64(),
                "request body too slow"
            );
            format!(
                "the request body arrived slower than {} bytes in {} s; send the whole body \
                 again, at least that fast",
                clock.min_bytes,
                clock.window.as_secs_f64()
            )
        }
        _ => return response,
    };
    metrics::counter!("http_timeouts_total", "limit" => "body").increment(1);
    let mut response =
        ApiError::new(StatusCode::REQUEST_TIMEOUT, "timeout", detail).into_response();
    // The rest of the body may still be on its way; this connection cannot carry another
    // request after it.
    response
        .headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    response
}

/// The current progress window: the timer of its end, and the bytes it brought so far.
struct Window {
    timer: Pin<Box<Sleep>>,
    bytes: u64,
}

/// A request body whose reads fail once either clock of `clock` runs out.
struct Progress {
    inner: Body,
    clock: BodyClock,
    /// Kept across waits and reset, not reallocated, for each piece of the body.
    timer: Option<Pin<Box<Sleep>>>,
    /// Whether the timer counts the current wait (false again once a piece arrives).
    armed: bool,
    /// Started at the first read.
    window: Option<Window>,
    abandoned: Arc<AtomicU8>,
}

impl Progress {
    fn abandon(&self, why: u8) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        self.abandoned.store(why, Ordering::Release);
        Poll::Ready(Some(Err(stalled_error())))
    }

    /// Whether the current window is over without its bytes; a window that brought them is
    /// followed by the next. Registers the window's timer with `cx`.
    fn too_slow(&mut self, cx: &mut Context<'_>) -> bool {
        let (min_bytes, length) = (self.clock.min_bytes, self.clock.window);
        let Some(window) = &mut self.window else {
            return false;
        };
        while window.timer.as_mut().poll(cx).is_ready() {
            if window.bytes < min_bytes {
                return true;
            }
            window.bytes = 0;
            let next = Instant::now() + length;
            window.timer.as_mut().reset(next);
        }
        false
    }
}

impl http_body::Body for Progress {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::Error>>> {
        if self.abandoned.load(Ordering::Relaxed) != 0 {
            return Poll::Ready(Some(Err(stalled_error())));
        }
        if self.window.is_none() {
            self.window = Some(Window {
                timer: Box::pin(tokio::time::sleep(self.clock.window)),
                bytes: 0,
            });
        }
        if let Poll::Ready(frame) = Pin::new(&mut self.inner).poll_frame(cx) {
            self.armed = false;
            if let Some(Ok(data)) = frame.as_ref().map(|f| f.as_ref().map(Frame::data_ref))
                && let Some(data) = data
                && let Some(window) = &mut self.window
            {
                window.bytes = window.bytes.saturating_add(data.len() as u64);
            }
            if frame.is_some() && self.too_slow(cx) {
                return self.abandon(TOO_SLOW);
            }
            return Poll::Ready(frame);
        }
        if self.too_slow(cx) {
            return self.abandon(TOO_SLOW);
        }
        let this = &mut *self;
        if !this.armed {
            let deadline = Instant::now() + this.clock.stall;
            match &mut this.timer {
                Some(timer) => timer.as_mut().reset(deadline),
                None => this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
            }
            this.armed = true;
        }
        if let Some(timer) = &mut this.timer
            && timer.as_mut().poll(cx).is_ready()
        {
            return this.abandon(STALLED);
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
