//! The accept loop, serving hyper's HTTP/1 under [`ConnectionLimits`] so that slow or silent
//! clients cannot hold the server. On shutdown, in-flight requests finish first.
//!
//! hyper's own `header_read_timeout` is not used: in hyper 1.x its timer also runs while a
//! keep-alive connection waits for the next request, leaving no room for a longer idle timeout
//! (docs/DECISIONS.md). One watchdog per connection enforces both instead, from what the
//! connection's socket and its requests report.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, watch};
use tokio::time::Instant;
use tower::ServiceExt;

/// Default: seconds a request's head (request line and headers) may take to arrive.
pub const DEFAULT_HEADER_READ_TIMEOUT_SECONDS: u64 = 10;
/// Default: seconds a request body may make no progress before the request is abandoned.
pub const DEFAULT_BODY_TIMEOUT_SECONDS: u64 = 30;
/// Default: seconds a keep-alive connection may wait for its next request.
pub const DEFAULT_IDLE_TIMEOUT_SECONDS: u64 = 60;
/// Default: connections served at once.
pub const DEFAULT_MAX_CONNECTIONS: usize = 1024;
/// Default: milliseconds a request head must have been arriving before a new connection may
/// take its place over the cap (an honest head takes a round trip or two).
pub const DEFAULT_SHED_AFTER_MS: u64 = 1000;
/// How often a connection waiting for a place over the cap looks again for a head to shed.
const SHED_RETRY: Duration = Duration::from_millis(100);
/// Default: connections served at once from one client address.
pub const DEFAULT_MAX_CONNECTIONS_PER_ADDRESS: usize = 64;
/// Default: bytes a request body must bring in every progress window.
pub const DEFAULT_BODY_PROGRESS_MIN_BYTES: u64 = 1024;
/// Default: seconds of the body progress window.
pub const DEFAULT_BODY_PROGRESS_WINDOW_SECONDS: u64 = 10;

/// What one client connection may hold, and for how long.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Time for a request's head, from the accept or the request's first byte.
    pub header_read_timeout: Duration,
    /// Time a request body may make no progress (408, [`super::body_timeout`]), or the client
    /// take no byte of its answer; then the connection closes.
    pub body_timeout: Duration,
    /// Time a connection may wait with no request in flight and no byte of a next one.
    pub idle_timeout: Duration,
    /// Connections served at once. Over it, a new connection is accepted only in place of one
    /// still sending its head for at least `shed_after` (the oldest such head is closed);
    /// when there is none, new connections wait in the listen backlog.
    pub max_connections: usize,
    /// How long a head must have been arriving before it may be shed over the cap.
    pub shed_after: Duration,
    /// Connections served at once from one peer address; a further one is closed unanswered.
    pub max_connections_per_address: usize,
    /// Bytes a request body must bring in every `body_progress_window` (or end within it).
    pub body_progress_min_bytes: u64,
    pub body_progress_window: Duration,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        ConnectionLimits {
            header_read_timeout: Duration::from_secs(DEFAULT_HEADER_READ_TIMEOUT_SECONDS),
            body_timeout: Duration::from_secs(DEFAULT_BODY_TIMEOUT_SECONDS),
            idle_timeout: Duration::from_secs(DEFAULT_IDLE_TIMEOUT_SECONDS),
            max_connections: DEFAULT_MAX_CONNECTIONS,
            shed_after: Duration::from_millis(DEFAULT_SHED_AFTER_MS),
            max_connections_per_address: DEFAULT_MAX_CONNECTIONS_PER_ADDRESS,
            body_progress_min_bytes: DEFAULT_BODY_PROGRESS_MIN_BYTES,
            body_progress_window: Duration::from_secs(DEFAULT_BODY_PROGRESS_WINDOW_SECONDS),
        }
    }
}

/// Connections the kernel keeps for us, unaccepted, over the cap (it caps this at
/// `net.core.somaxconn`). Rust's and tokio's `bind` ask for 128.
const LISTEN_BACKLOG: u32 = 1024;

/// Listens on `address` (`HOST:PORT`), on the first of its addresses that can be bound.
pub async fn listen(address: &str) -> std::io::Result<TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(address).await? {
        let socket = if addr.is_ipv4() {
            tokio::net::TcpSocket::new_v4()?
        } else {
            tokio::net::TcpSocket::new_v6()?
        };
        // As `TcpListener::bind` does: a restart can bind while old connections linger.
        #[cfg(unix)]
        socket.set_reuseaddr(true)?;
        match socket
            .bind(addr)
            .and_then(|()| socket.listen(LISTEN_BACKLOG))
        {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "the address resolved to nothing",
        )
    }))
}

/// Serves `router` on `listener` under `limits` until `shutdown`, then stops accepting and
/// returns once in-flight requests finish. Requests carry `ConnectInfo<SocketAddr>`.
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let addresses = PerAddress::new(limits.max_connections_per_address);
    let open = Open::default();
    // `true` once shutdown began; each connection task holds a receiver, so the sender sees
    // every receiver gone when the last connection has ended.
    let (stopping, connections) = watch::channel(false);
    let mut shutdown = pin!(shutdown);
    let mut saturated = false;
    loop {
        // Under the cap, a slot is taken before accepting. Over it, the next connection is
        // accepted only to take the place of a head still arriving (shed); with none to shed,
        // it waits for a slot and the ones after it wait in the kernel's listen backlog,
        // unaccepted, with no timer running: complete requests are never cut for it.
        let early = match Arc::clone(&slots).try_acquire_owned() {
            Ok(slot) => {
                saturated = false;
                Some(slot)
            }
            Err(_) => {
                if !saturated {
                    tracing::warn!(
                        max_connections = limits.max_connections,
                        "connection cap reached; a connection still sending its head makes \
                         room for a new one, else new connections wait until one closes"
                    );
                    saturated = true;
                }
                None
            }
        };
        let (stream, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    if !is_connection_error(&e) {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::error!(error = %e, "accept failed");
                        tokio::select! {
                            () = tokio::time::sleep(Duration::from_secs(1)) => {}
                            () = &mut shutdown => break,
                        }
                    }
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(share) = addresses.admit(remote.ip()) else {
            // Over its address's share: closed at once, unanswered, and its place in the
            // global cap is free again at once (docs/DECISIONS.md).
            tracing::debug!(client = %remote, "closing a connection: too many from its address");
            metrics::counter!("http_connections_refused_total", "limit" => "per_address")
                .increment(1);
            drop(stream);
            continue;
        };
        let slot = match early {
            Some(slot) => slot,
            None => {
                let slot = tokio::select! {
                    slot = open.make_room(&slots, limits.shed_after) => slot,
                    () = &mut shutdown => break,
                };
                match slot {
                    Some(slot) => slot,
                    None => break,
                }
            }
        };
        let activity = Arc::new(Activity::new());
        let registered = open.register(Arc::clone(&activity));
        tokio::spawn(connection(
            stream,
            remote,
            router.clone(),
            limits,
            connections.clone(),
            activity,
            (slot, share, registered),
        ));
    }
    drop(listener);
    stopping.send_replace(true);
    drop(connections);
    stopping.closed().await;
    Ok(())
}

/// The activity of every connection being served, for shedding over the cap.
#[derive(Clone, Default)]
struct Open {
    next: Arc<std::sync::atomic::AtomicU64>,
    all: Arc<Mutex<HashMap<u64, Arc<Activity>>>>,
}

/// One connection's entry in [`Open`]; dropped when the connection ends.
struct Registered {
    open: Open,
    id: u64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.open.lock().remove(&self.id);
    }
}

impl Open {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<Activity>>> {
        self.all.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn register(&self, activity: Arc<Activity>) -> Registered {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.lock().insert(id, activity);
        Registered {
            open: self.clone(),
            id,
        }
    }

    /// A slot for an accepted connection over the cap: the oldest head arriving for at least
    /// `shed_after` is closed to make room, looked for again every [`SHED_RETRY`] while none
    /// frees; `None` if the slots are closed.
    async fn make_room(
        &self,
        slots: &Arc<Semaphore>,
        shed_after: Duration,
    ) -> Option<OwnedSemaphorePermit> {
        loop {
            self.shed_oldest_head(shed_after);
            tokio::select! {
                slot = Arc::clone(slots).acquire_owned() => return slot.ok(),
                () = tokio::time::sleep(SHED_RETRY) => {}
            }
        }
    }

    /// Marks the oldest connection still sending its head (for at least `shed_after`) to be
    /// closed by its watchdog; whether there was one.
    fn shed_oldest_head(&self, shed_after: Duration) -> bool {
        let mut heads: Vec<(Instant, Arc<Activity>)> = self
            .lock()
            .values()
            .filter_map(|a| a.head_since(shed_after).map(|since| (since, Arc::clone(a))))
            .collect();
        heads.sort_by_key(|(since, _)| *since);
        // A head may complete meanwhile: the next one then.
        heads.into_iter().any(|(_, activity)| activity.shed())
    }
}

/// A failed accept that concerns one connection only (the client went away first).
fn is_connection_error(e: &std::io::Error) -> bool {
    use std::io::ErrorKind;
    matches!(
        e.kind(),
        ErrorKind::ConnectionRefused | ErrorKind::ConnectionAborted | ErrorKind::ConnectionReset
    )
}

/// Connections open per client address, each counted until its [`Share`] is dropped; only
/// addresses with one open have an entry, so this never outgrows the global cap.
#[derive(Clone)]
struct PerAddress {
    max: usize,
    open: Arc<Mutex<HashMap<IpAddr, usize>>>,
}

impl PerAddress {
    fn new(max: usize) -> PerAddress {
        PerAddress {
            max: max.max(1),
            open: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<IpAddr, usize>> {
        self.open.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn admit(&self, ip: IpAddr) -> Option<Share> {
        let ip = ip.to_canonical();
        let mut open = self.lock();
        let count = open.entry(ip).or_insert(0);
        if *count >= self.max {
            return None;
        }
        *count += 1;
        Some(Share {
            addresses: self.clone(),
            ip,
        })
    }
}

/// One open connection of an address; dropped when the connection ends.
struct Share {
    addresses: PerAddress,
    ip: IpAddr,
}

impl Drop for Share {
    fn drop(&mut self) {
        let mut open = self.addresses.lock();
        if let Some(count) = open.get_mut(&self.ip) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                open.remove(&self.ip);
            }
        }
    }
}

/// Serves one connection until the client or a limit closes it, or shutdown lets its
/// in-flight request finish. `_held` counts it against both caps.
async fn connection(
    stream: TcpStream,
    remote: SocketAddr,
    router: Router,
    limits: ConnectionLimits,
    mut stopping: watch::Receiver<bool>,
    activity: Arc<Activity>,
    _held: (OwnedSemaphorePermit, Share, Registered),
) {
    let io = TokioIo::new(Watched {
        inner: stream,
        activity: Arc::clone(&activity),
    });
    let service = hyper::service::service_fn({
        let activity = Arc::clone(&activity);
        move |request: hyper::Request<Incoming>| {
            let in_flight = activity.request_started();
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(remote));
            let router = router.clone();
            async move {
                let response = match router.oneshot(request).await {
                    Ok(response) => response,
                    Err(never) => match never {},
                };
                Ok::<_, Infallible>(response.map(|body| InFlightBody {
                    body,
                    _in_flight: in_flight,
                }))
            }
        }
    });
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1.header_read_timeout(None);
    let mut conn = pin!(http1.serve_connection(io, service));
    let mut draining = false;
    loop {
        let deadline = activity.deadline(&limits);
        tokio::select! {
            result = conn.as_mut() => {
                if let Err(e) = result {
                    tracing::debug!(error = %e, "connection ended with an error");
                }
                break;
            }
            () = sleep_until(deadline.map(|(at, _)| at)) => {
                // The deadline may have moved on (a byte arrived, a request started): check.
                if let Some((at, limit)) = activity.deadline(&limits)
                    && at <= Instant::now()
                {
                    if limit == "shed" {
                        tracing::debug!(client = %remote, "closing a connection: shed over the cap");
                        metrics::counter!("http_connections_shed_total").increment(1);
                    } else {
                        tracing::debug!(client = %remote, limit, "closing a connection: timeout");
                        metrics::counter!("http_timeouts_total", "limit" => limit).increment(1);
                    }
                    // Nothing is in flight, or the client stopped taking its answer: dropping
                    // the connection loses nothing that anyone is reading.
                    break;
                }
            }
            () = activity.changed.notified() => {}
            changed = stopping.wait_for(|stop| *stop), if !draining => {
                // At once when idle, else after the answer in flight; the limits still apply.
                draining = true;
                if changed.is_ok() {
                    conn.as_mut().graceful_shutdown();
                }
            }
        }
    }
}

async fn sleep_until(deadline: Option<Instant>) {
    match deadline {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// What a connection is doing, as far as its limits are concerned.
struct Activity {
    state: Mutex<State>,
    /// Woken when a deadline appears or comes closer; one waiter, the connection's watchdog.
    changed: Notify,
}

#[derive(Clone, Copy)]
struct State {
    /// Requests whose answer is not fully written yet (HTTP/1 serves one at a time).
    in_flight: usize,
    /// With none in flight, what the connection waits for and since when.
    waiting: Waiting,
    /// Since when the client has taken no byte of what we write (its socket buffer is full).
    write_blocked: Option<Instant>,
    /// To be closed now, its head not complete, to make room over the cap.
    shed: bool,
}

#[derive(Clone, Copy)]
enum Waiting {
    /// The rest of a request head, since the accept or the request's first byte.
    Head(Instant),
    /// The first byte of the next request, since the last answer or the last byte written.
    Next(Instant),
}

impl Activity {
    fn new() -> Activity {
        Activity {
            state: Mutex::new(State {
                in_flight: 0,
                waiting: Waiting::Head(Instant::now()),
                write_blocked: None,
                shed: false,
            }),
            changed: Notify::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // The state is plain data, valid after any panic; keep serving.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// When this connection must be closed and which limit says so, if any.
    fn deadline(&self, limits: &ConnectionLimits) -> Option<(Instant, &'static str)> {
        let state = *self.state();
        if state.shed && state.in_flight == 0 {
            return Some((Instant::now(), "shed"));
        }
        // A request in flight stops the request clocks: the handler may take its time, and
        // its body has a clock of its own.
        let waiting = (state.in_flight == 0).then(|| match state.waiting {
            Waiting::Head(since) => (since + limits.header_read_timeout, "header"),
            Waiting::Next(since) => (since + limits.idle_timeout, "idle"),
        });
        // A client that stops reading is cut whatever is in flight.
        let send = state
            .write_blocked
            .map(|since| (since + limits.body_timeout, "send"));
        [waiting, send]
            .into_iter()
            .flatten()
            .min_by_key(|(at, _)| *at)
    }

    /// A request head was parsed and handed to the router (a head that completes first is
    /// not shed).
    fn request_started(self: &Arc<Self>) -> InFlight {
        let mut state = self.state();
        state.in_flight += 1;
        state.shed = false;
        InFlight(Arc::clone(self))
    }

    /// Since when its head has been arriving, if it is still sending one that began at least
    /// `age` ago and nothing is in flight.
    fn head_since(&self, age: Duration) -> Option<Instant> {
        let state = self.state();
        match state.waiting {
            Waiting::Head(since)
                if state.in_flight == 0 && !state.shed && since.elapsed() >= age =>
            {
                Some(since)
            }
            _ => None,
        }
    }

    /// Marks it to be closed if it is still sending its head; whether it was.
    fn shed(&self) -> bool {
        let mut state = self.state();
        if state.in_flight > 0 || state.shed || !matches!(state.waiting, Waiting::Head(_)) {
            return false;
        }
        state.shed = true;
        drop(state);
        self.changed.notify_one();
        true
    }

    fn read(&self) {
        let mut state = self.state();
        if state.in_flight == 0 && matches!(state.waiting, Waiting::Next(_)) {
            // The first byte of the next request: its head is now owed within the header
            // timeout, which may be sooner than the idle deadline.
            state.waiting = Waiting::Head(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }

    fn wrote(&self) {
        let mut state = self.state();
        state.write_blocked = None;
        if state.in_flight == 0 && matches!(state.waiting, Waiting::Next(_)) {
            // The end of an answer still reaching the client: idle counts from the last byte.
            // A later deadline needs no wake-up; the watchdog checks again when it fires.
            state.waiting = Waiting::Next(Instant::now());
        }
    }

    /// The client's socket took nothing: the send clock starts, unless it already runs.
    fn write_blocked(&self) {
        let mut state = self.state();
        if state.write_blocked.is_none() {
            state.write_blocked = Some(Instant::now());
            drop(state);
            self.changed.notify_one();
        }
    }
}

/// A request in flight; dropped when its answer has been written (or abandoned).
struct InFlight(Arc<Activity>);

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut state = self.0.state();
        state.in_flight = state.in_flight.saturating_sub(1);
        if state.in_flight == 0 {
            state.waiting = Waiting::Next(Instant::now());
            drop(state);
            self.0.changed.notify_one();
        }
    }
}

/// An answer's body that keeps its request in flight until hyper has taken all of it.
struct InFlightBody {
    body: Body,
    _in_flight: InFlight,
}

impl http_body::Body for InFlightBody {
    type Data = Bytes;
    type Error = axum::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, axum::Error>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// The client socket, reporting each read and write that moved bytes.
struct Watched {
    inner: TcpStream,
    activity: Arc<Activity>,
}

impl AsyncRead for Watched {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            self.activity.read();
        }
        polled
    }
}

impl Watched {
    fn report(&self, polled: &Poll<std::io::Result<usize>>) {
        match polled {
            Poll::Ready(Ok(n)) if *n > 0 => self.activity.wrote(),
            Poll::Pending => self.activity.write_blocked(),
            Poll::Ready(_) => {}
        }
    }
}

impl AsyncWrite for Watched {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.report(&polled);
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.report(&polled);
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
