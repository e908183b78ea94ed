//! Slow and silent clients cannot hold the server (docs/SECURITY.md, the connection limits;
//! docs/contract/api.md Conventions, resource bounds): a request head must arrive within the header
//! timeout, a body must keep moving, an idle keep-alive connection closes, a client must keep
//! reading its answer, and connections over the cap wait until one closes, while
//! a slow body that keeps moving and a long-running request are served. Raw sockets against
//! a real server, with short limits so that the tests are quick. Upper bounds are generous
//! (three times the limit); a failing test waits at most [`BOUND`], never forever.

use crate::helpers::{Backend, PASSWORD, both_backends, serve_router, spawn_app_with};
use serde_json::Value;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tauros_api::{ConnectionLimits, HttpConfig, router};
use tauros_app::AppConfig;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

both_backends!(backend:
    headers_must_arrive_within_the_header_timeout,
    a_stalled_body_is_answered_408_and_closed,
    a_slow_body_that_keeps_moving_is_read_to_its_end,
    an_idle_keep_alive_connection_closes_after_the_idle_timeout,
    a_keep_alive_connection_may_idle_longer_than_the_header_timeout,
    connections_over_the_cap_wait_until_one_closes,
    over_the_cap_a_head_still_arriving_makes_room_for_a_new_connection,
    a_long_running_request_is_not_cut_by_the_idle_timeout,
    a_client_that_stops_reading_is_cut_after_the_body_timeout,
    connections_over_the_per_address_cap_are_closed_and_other_addresses_served,
    a_body_slower_than_the_progress_rule_is_answered_408_and_closed,
    a_body_that_keeps_the_progress_rate_is_read_to_its_end,
);

const SECOND: Duration = Duration::from_secs(1);

/// Ample time for whatever must happen; a test that waits this long has failed.
const BOUND: Duration = Duration::from_secs(15);

const GET_HEALTHZ: &[u8] = b"GET /healthz HTTP/1.1\r\nHost: tauros\r\n\r\n";

/// A server over a fresh database with the default limits but for what `change` sets.
async fn server(
    backend: Backend,
    change: impl FnOnce(&mut ConnectionLimits),
) -> crate::helpers::TestApp {
    let mut limits = ConnectionLimits::default();
    change(&mut limits);
    let http = HttpConfig {
        limits,
        ..HttpConfig::default()
    };
    spawn_app_with(backend, AppConfig::default(), http).await
}

async fn connect(app: &crate::helpers::TestApp) -> TcpStream {
    TcpStream::connect(app.base.trim_start_matches("http://"))
        .await
        .expect("connect")
}

/// One answer read from a raw connection.
#[derive(Debug)]
struct Answer {
    status: u16,
    /// Lower-case names.
    headers: Vec<(String, String)>,
    body: String,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn json(&self) -> Value {
        serde_json::from_str(&self.body).expect("JSON body")
    }
}

/// Reads one answer (head, then a `Content-Length` body) and leaves the connection open.
async fn read_answer(stream: &mut TcpStream) -> Answer {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        let head_end = loop {
            if let Some(at) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
            let n = stream.read(&mut buf).await.expect("read");
            assert!(
                n > 0,
                "closed before an answer: {}",
                String::from_utf8_lossy(&got)
            );
            got.extend_from_slice(&buf[..n]);
        };
        let head = String::from_utf8_lossy(&got[..head_end]).into_owned();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .expect("status line");
        let headers: Vec<(String, String)> = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        let length: usize = headers
            .iter()
            .find(|(n, _)| n == "content-length")
            .and_then(|(_, v)| v.parse().ok())
            .expect("content-length");
        while got.len() < head_end + length {
            let n = stream.read(&mut buf).await.expect("read");
            assert!(n > 0, "closed in the middle of an answer");
            got.extend_from_slice(&buf[..n]);
        }
        Answer {
            status,
            headers,
            body: String::from_utf8_lossy(&got[head_end..head_end + length]).into_owned(),
        }
    };
    tokio::time::timeout(BOUND, read)
        .await
        .expect("an answer in time")
}

/// Waits until the server closes `stream` (end of stream, or a reset when the client had
/// written more) and returns what it sent first; fails if it is still open after [`BOUND`].
async fn until_closed(stream: &mut TcpStream) -> Vec<u8> {
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
                Err(e) => panic!("read: {e}"),
            }
        }
        got
    };
    tokio::time::timeout(BOUND, read)
        .await
        .expect("the server closes the connection")
}

/// Asserts that something a limit of `limit` did happened after `elapsed`: not long before
/// the limit (the server's clock may start a little before the test's), and within three
/// times it.
fn after_the_limit(what: &str, elapsed: Duration, limit: Duration) {
    assert!(
        elapsed >= limit / 2,
        "{what} after {elapsed:?}, before the limit of {limit:?}"
    );
    assert!(
        elapsed <= limit * 3,
        "{what} after {elapsed:?}, long after the limit of {limit:?}"
    );
}

/// A silent connection, one whose head stops halfway, and one that trickles its head a byte
/// at a time (always moving, never finishing) are each closed, unanswered, after the header
/// timeout; a complete request on a fresh connection is answered.
async fn headers_must_arrive_within_the_header_timeout(backend: Backend) {
    let app = server(backend, |l| l.header_read_timeout = SECOND).await;
    let silent = async {
        let start = Instant::now();
        let mut stream = connect(&app).await;
        let sent = until_closed(&mut stream).await;
        (start.elapsed(), sent)
    };
    let half = async {
        let start = Instant::now();
        let mut stream = connect(&app).await;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: tauros\r\n")
            .await
            .unwrap();
        let sent = until_closed(&mut stream).await;
        (start.elapsed(), sent)
    };
    let trickle = async {
        let start = Instant::now();
        let stream = connect(&app).await;
        let (mut reader, mut writer) = stream.into_split();
        let writing = tokio::spawn(async move {
            let head = format!(
                "GET /healthz HTTP/1.1\r\nHost: tauros\r\nX-Padding: {}\r\n\r\n",
                "a".repeat(200)
            );
            for byte in head.bytes() {
                if writer.write_all(&[byte]).await.is_err() {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        let read = async {
            let mut got = Vec::new();
            let mut buf = [0u8; 1024];
            loop {
                match reader.read(&mut buf).await {
                    Ok(0) | Err(_) => break got,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
        };
        let sent = tokio::time::timeout(BOUND, read)
            .await
            .expect("the trickle is closed");
        writing.abort();
        (start.elapsed(), sent)
    };
    let (silent, half, trickle) = tokio::join!(silent, half, trickle);
    for (what, (elapsed, sent)) in [
        ("a silent connection", silent),
        ("half a head", half),
        ("a trickled head", trickle),
    ] {
        after_the_limit(what, elapsed, SECOND);
        assert!(
            sent.is_empty(),
            "{what} closed without an answer: {}",
            String::from_utf8_lossy(&sent)
        );
    }
    let mut stream = connect(&app).await;
    stream.write_all(GET_HEALTHZ).await.unwrap();
    assert_eq!(read_answer(&mut stream).await.status, 200);
}

/// Content-Length 100, ten bytes, then silence: 408 `timeout` problem+json with the request id
/// after the body timeout, and the connection closes (the rest of the body cannot be told
/// apart from a next request).
async fn a_stalled_body_is_answered_408_and_closed(backend: Backend) {
    let app = server(backend, |l| l.body_timeout = SECOND).await;
    let mut stream = connect(&app).await;
    stream
        .write_all(
            b"POST /v1/sessions HTTP/1.1\r\nHost: tauros\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n{\"email\":",
        )
        .await
        .unwrap();
    let start = Instant::now();
    let answer = read_answer(&mut stream).await;
    after_the_limit("the stalled body's answer", start.elapsed(), SECOND);
    assert_eq!(answer.status, 408, "{answer:?}");
    assert_eq!(
        answer.header("content-type"),
        Some("application/problem+json")
    );
    assert_eq!(answer.header("connection"), Some("close"));
    let problem = answer.json();
    assert_eq!(problem["code"], "timeout", "{problem}");
    assert_eq!(problem["status"], 408);
    assert_eq!(
        problem["request_id"].as_str(),
        answer.header("x-request-id"),
        "{problem}"
    );
    // Closed at once, not after the (default, one minute) idle timeout.
    let rest = until_closed(&mut stream).await;
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

/// A sign-in whose body arrives in pieces every half second, for three seconds in all, with
/// every limit at one second: a body that keeps moving is read to its end and answered.
async fn a_slow_body_that_keeps_moving_is_read_to_its_end(backend: Backend) {
    let app = server(backend, |l| {
        l.header_read_timeout = SECOND;
        l.body_timeout = SECOND;
        l.idle_timeout = SECOND;
    })
    .await;
    let email = format!("slow-{}@example.com", uuid::Uuid::new_v4().simple());
    app.app
        .bootstrap_approver("Slow Ltd", &email, PASSWORD.into())
        .await
        .expect("bootstrap");
    let body = format!(r#"{{"email":"{email}","password":"{PASSWORD}"}}"#);
    let mut stream = connect(&app).await;
    stream
        .write_all(
            format!(
                "POST /v1/sessions HTTP/1.1\r\nHost: tauros\r\nContent-Type: application/json\r\n\
                 Content-Length: {}\r\n\r\n",
                body.len()
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let pieces = 6;
    let size = body.len().div_ceil(pieces);
    for piece in body.as_bytes().chunks(size) {
        tokio::time::sleep(Duration::from_millis(500)).await;
        stream.write_all(piece).await.unwrap();
    }
    let answer = read_answer(&mut stream).await;
    assert_eq!(answer.status, 201, "{answer:?}");
    assert!(answer.json()["token"].is_string());
}

/// After one complete request, a connection that sends nothing more is closed after the idle
/// timeout (and well before the default header timeout of ten seconds).
async fn an_idle_keep_alive_connection_closes_after_the_idle_timeout(backend: Backend) {
    let app = server(backend, |l| l.idle_timeout = SECOND).await;
    let mut stream = connect(&app).await;
    stream.write_all(GET_HEALTHZ).await.unwrap();
    let answer = read_answer(&mut stream).await;
    assert_eq!(answer.status, 200);
    assert_ne!(answer.header("connection"), Some("close"));
    let start = Instant::now();
    let rest = until_closed(&mut stream).await;
    after_the_limit("the idle connection closed", start.elapsed(), SECOND);
    assert!(rest.is_empty(), "{}", String::from_utf8_lossy(&rest));
}

/// hyper's own header timeout also runs between requests, which would close a keep-alive
/// connection after the header timeout; ours does not: a connection idle for longer than the
/// header timeout (but within the idle timeout) still carries the next request.
async fn a_keep_alive_connection_may_idle_longer_than_the_header_timeout(backend: Backend) {
    let app = server(backend, |l| {
        l.header_read_timeout = SECOND;
        l.idle_timeout = SECOND * 8;
    })
    .await;
    let mut stream = connect(&app).await;
    stream.write_all(GET_HEALTHZ).await.unwrap();
    assert_eq!(read_answer(&mut stream).await.status, 200);
    tokio::time::sleep(SECOND * 5 / 2).await;
    stream.write_all(GET_HEALTHZ).await.unwrap();
    assert_eq!(read_answer(&mut stream).await.status, 200);
}

/// With a cap of two, two idle keep-alive connections hold both places: a third connection's
/// request is not answered while they are open, and is answered once one of them closes.
async fn connections_over_the_cap_wait_until_one_closes(backend: Backend) {
    let app = server(backend, |l| l.max_connections = 2).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        // A complete request proves the connection was accepted and holds a place.
        let mut stream = connect(&app).await;
        stream.write_all(GET_HEALTHZ).await.unwrap();
        assert_eq!(read_answer(&mut stream).await.status, 200);
        held.push(stream);
    }
    let mut third = connect(&app).await;
    third.write_all(GET_HEALTHZ).await.unwrap();
    let mut buf = [0u8; 1];
    let early = tokio::time::timeout(Duration::from_millis(500), third.read(&mut buf)).await;
    assert!(
        early.is_err(),
        "the third connection was served over the cap: {early:?}"
    );
    drop(held.remove(0));
    assert_eq!(read_answer(&mut third).await.status, 200);
    // The one still held was not disturbed.
    held[0].write_all(GET_HEALTHZ).await.unwrap();
    assert_eq!(read_answer(&mut held[0]).await.status, 200);
}

/// Two slow clients (half a head each) take both places of a cap of two, with a header
/// timeout of a minute: an ordinary client arriving after them is served at once, in the place
/// of the older slow head, which is closed unanswered; the newer one is left alone and may
/// still finish its request.
async fn over_the_cap_a_head_still_arriving_makes_room_for_a_new_connection(backend: Backend) {
    let app = server(backend, |l| {
        l.max_connections = 2;
        l.header_read_timeout = Duration::from_secs(60);
        l.shed_after = Duration::from_millis(200);
    })
    .await;
    let mut slow = Vec::new();
    for _ in 0..2 {
        let mut stream = connect(&app).await;
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: tauros\r\n")
            .await
            .unwrap();
        slow.push(stream);
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let res = tokio::time::timeout(BOUND, app.client.get(app.url("/healthz")).send())
        .await
        .expect("the ordinary client is served")
        .expect("request");
    assert_eq!(res.status(), 200);
    let sent = until_closed(&mut slow[0]).await;
    assert!(sent.is_empty(), "{}", String::from_utf8_lossy(&sent));
    let newer = &mut slow[1];
    newer.write_all(b"\r\n").await.unwrap();
    assert_eq!(
        read_answer(newer).await.status,
        200,
        "the newer head was kept"
    );
}

/// A request whose handler works for three seconds, with every limit at one second and not a
/// byte moving meanwhile, is answered: the idle and header clocks do not run while a request
/// is in flight. Afterwards the connection is idle and closes.
async fn a_long_running_request_is_not_cut_by_the_idle_timeout(backend: Backend) {
    let http = HttpConfig {
        limits: ConnectionLimits {
            header_read_timeout: SECOND,
            body_timeout: SECOND,
            idle_timeout: SECOND,
            ..ConnectionLimits::default()
        },
        ..HttpConfig::default()
    };
    let app = spawn_app_with(backend, AppConfig::default(), http.clone()).await;
    let (started_tx, mut started) = tokio::sync::mpsc::channel::<()>(1);
    let release = Arc::new(tokio::sync::Notify::new());
    let gate = Arc::clone(&release);
    let slow = axum::routing::get(move || {
        let started_tx = started_tx.clone();
        let gate = Arc::clone(&gate);
        async move {
            let _ = started_tx.send(()).await;
            gate.notified().await;
            "done"
        }
    });
    let addr = serve_router(
        router(app.app.clone(), &http).route("/slow", slow),
        http.limits,
    )
    .await;
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream
        .write_all(b"GET /slow HTTP/1.1\r\nHost: tauros\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(BOUND, started.recv())
        .await
        .expect("the handler starts");
    tokio::time::sleep(SECOND * 3).await;
    release.notify_one();
    let answer = read_answer(&mut stream).await;
    assert_eq!(answer.status, 200);
    assert_eq!(answer.body, "done");
    let start = Instant::now();
    until_closed(&mut stream).await;
    after_the_limit("the connection closed once idle", start.elapsed(), SECOND);
}

/// Eight pipelined requests for the largest asset (the Swagger UI bundle, over a megabyte
/// each) on a socket with a small receive buffer, and then nothing read: once the client's
/// buffers are full, the server's writes stall, and after the body timeout the connection is
/// closed, with far less sent than was asked for.
async fn a_client_that_stops_reading_is_cut_after_the_body_timeout(backend: Backend) {
    let app = server(backend, |l| l.body_timeout = SECOND).await;
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let addr = app.base.trim_start_matches("http://").parse().unwrap();
    let mut stream = socket.connect(addr).await.unwrap();
    let request = "GET /docs/swagger-ui-bundle.js HTTP/1.1\r\nHost: tauros\r\n\r\n";
    stream
        .write_all(request.repeat(8).as_bytes())
        .await
        .unwrap();
    tokio::time::sleep(SECOND * 3).await;
    let sent = until_closed(&mut stream).await;
    let head_end = sent
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("the first answer's head");
    let head = String::from_utf8_lossy(&sent[..head_end]).to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 200"), "{head}");
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("content-length");
    assert!(length > 1_000_000, "a large asset: {length} bytes");
    assert!(
        sent.len() < 8 * length,
        "cut before the end: {} of {} bytes",
        sent.len(),
        8 * length
    );
}

/// A connection to `app` from `127.0.0.{n}` (Linux routes all of 127/8 to loopback).
async fn connect_from(app: &crate::helpers::TestApp, n: u8) -> TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket
        .bind(std::net::SocketAddr::from(([127, 0, 0, n], 0)))
        .unwrap();
    let addr = app.base.trim_start_matches("http://").parse().unwrap();
    socket.connect(addr).await.expect("connect")
}

/// With two connections a client address, two held keep-alive connections from 127.0.0.2 use
/// up its share: a third from that address is closed at once, unanswered (well before any
/// timeout), while 127.0.0.3 is served; once one of the two closes, 127.0.0.2 is served again.
async fn connections_over_the_per_address_cap_are_closed_and_other_addresses_served(
    backend: Backend,
) {
    let app = server(backend, |l| l.max_connections_per_address = 2).await;
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut stream = connect_from(&app, 2).await;
        stream.write_all(GET_HEALTHZ).await.unwrap();
        assert_eq!(read_answer(&mut stream).await.status, 200);
        held.push(stream);
    }
    let start = Instant::now();
    let mut third = connect_from(&app, 2).await;
    let _ = third.write_all(GET_HEALTHZ).await;
    let sent = until_closed(&mut third).await;
    assert!(
        sent.is_empty(),
        "the connection over the cap was answered: {}",
        String::from_utf8_lossy(&sent)
    );
    assert!(
        start.elapsed() < SECOND * 5,
        "closed only after {:?}",
        start.elapsed()
    );
    let mut other = connect_from(&app, 3).await;
    other.write_all(GET_HEALTHZ).await.unwrap();
    assert_eq!(read_answer(&mut other).await.status, 200);
    // The held ones were not disturbed.
    held[1].write_all(GET_HEALTHZ).await.unwrap();
    assert_eq!(read_answer(&mut held[1]).await.status, 200);
    drop(held.remove(0));
    // The server notices the close on its own time: poll, with a bound.
    let deadline = Instant::now() + BOUND;
    loop {
        let mut again = connect_from(&app, 2).await;
        let _ = again.write_all(GET_HEALTHZ).await;
        let mut buf = [0u8; 12];
        if let Ok(Ok(n)) = tokio::time::timeout(BOUND, again.read(&mut buf)).await
            && n > 0
        {
            assert!(buf.starts_with(b"HTTP/1.1 200"), "{buf:?}");
            break;
        }
        assert!(Instant::now() < deadline, "127.0.0.2 is never served again");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The head of a sign-in whose body is `length` bytes long.
fn sign_in_head(length: usize) -> String {
    format!(
        "POST /v1/sessions HTTP/1.1\r\nHost: tauros\r\nContent-Type: application/json\r\n\
         Content-Length: {length}\r\n\r\n"
    )
}

/// A progress rule of 1 KiB a second (the body timeout at its default of 30 s): a body that
/// trickles 100 bytes every 100 ms never stalls, but brings less than 1 KiB a second, and is
/// answered 408 `timeout` after about a second, and the connection closes.
async fn a_body_slower_than_the_progress_rule_is_answered_408_and_closed(backend: Backend) {
    let app = server(backend, |l| {
        l.body_progress_min_bytes = 1024;
        l.body_progress_window = SECOND;
    })
    .await;
    let stream = connect(&app).await;
    let (mut reader, mut writer) = stream.into_split();
    writer
        .write_all(sign_in_head(100_000).as_bytes())
        .await
        .unwrap();
    let start = Instant::now();
    let trickle = tokio::spawn(async move {
        let piece = [b' '; 100];
        loop {
            if writer.write_all(&piece).await.is_err() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    });
    let read = async {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break got,
                Ok(n) => got.extend_from_slice(&buf[..n]),
            }
        }
    };
    let sent = tokio::time::timeout(BOUND, read)
        .await
        .expect("the slow body is cut");
    let elapsed = start.elapsed();
    trickle.abort();
    let text = String::from_utf8_lossy(&sent);
    assert!(text.starts_with("HTTP/1.1 408"), "{text}");
    assert!(text.contains("\"code\":\"timeout\""), "{text}");
    assert!(
        text.to_ascii_lowercase().contains("connection: close"),
        "{text}"
    );
    after_the_limit("the slow body's answer", elapsed, SECOND);
}

/// The same rule, and a sign-in body of 6 KiB (padded with JSON whitespace) sent 1 KiB every
/// half second, three seconds in all: it keeps the rate, is read to its end and answered.
async fn a_body_that_keeps_the_progress_rate_is_read_to_its_end(backend: Backend) {
    let app = server(backend, |l| {
        l.body_progress_min_bytes = 1024;
        l.body_progress_window = SECOND;
    })
    .await;
    let email = format!("steady-{}@example.com", uuid::Uuid::new_v4().simple());
    app.app
        .bootstrap_approver("Steady Ltd", &email, PASSWORD.into())
        .await
        .expect("bootstrap");
    let json = format!(r#"{{"email":"{email}","password":"{PASSWORD}"}}"#);
    let body = format!("{}{json}", " ".repeat(6 * 1024 - json.len()));
    let mut stream = connect(&app).await;
    stream
        .write_all(sign_in_head(body.len()).as_bytes())
        .await
        .unwrap();
    for piece in body.as_bytes().chunks(1024) {
        stream.write_all(piece).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let answer = read_answer(&mut stream).await;
    assert_eq!(answer.status, 201, "{answer:?}");
}
