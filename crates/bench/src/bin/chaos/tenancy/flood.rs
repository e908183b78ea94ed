//! A's flood in `noisy`: black-hole webhook endpoints and slow request bodies.

use crate::counters::Counters;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;

/// One black-hole webhook endpoint: accepts, reads whatever comes, never answers.
#[derive(Default)]
pub(super) struct Hole {
    pub(super) open: AtomicUsize,
    pub(super) max_open: AtomicUsize,
    pub(super) accepted: AtomicU64,
}

pub(super) async fn black_hole() -> (String, Arc<Hole>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hole", l.local_addr().unwrap());
    let hole = Arc::new(Hole::default());
    let h = hole.clone();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = l.accept().await {
            h.accepted.fetch_add(1, Ordering::Relaxed);
            let now = h.open.fetch_add(1, Ordering::Relaxed) + 1;
            h.max_open.fetch_max(now, Ordering::Relaxed);
            let h = h.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                while let Ok(n) = s.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                }
                h.open.fetch_sub(1, Ordering::Relaxed);
            });
        }
    });
    (url, hole)
}

/// One slow body from `from`: the headers of a `POST /v1/sessions` announcing 64 KiB, then a
/// byte every 2 s; reconnects (with backoff) when the server closes it, until `stop`.
pub(super) async fn slow_body(
    to: std::net::SocketAddr,
    from: [u8; 4],
    stop: Arc<AtomicBool>,
    c: Arc<Counters>,
) {
    let mut backoff = Duration::from_millis(250);
    while !stop.load(Ordering::Relaxed) {
        let Ok(sock) = TcpSocket::new_v4() else {
            return;
        };
        if sock.bind(std::net::SocketAddr::from((from, 0))).is_err() {
            c.add("bind failed", 1);
            return;
        }
        let conn = tokio::time::timeout(Duration::from_secs(2), sock.connect(to)).await;
        let Ok(Ok(mut s)) = conn else {
            c.add("connect failed", 1);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(4));
            continue;
        };
        let head = format!(
            "POST /v1/sessions HTTP/1.1\r\nHost: {to}\r\nContent-Type: application/json\r\nContent-Length: 65536\r\n\r\n{{"
        );
        if s.write_all(head.as_bytes()).await.is_err() {
            c.add("closed by the server", 1);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(Duration::from_secs(4));
            continue;
        }
        c.add("connections opened", 1);
        let opened = Instant::now();
        let mut closed = false;
        while !stop.load(Ordering::Relaxed) {
            tokio::time::sleep(Duration::from_secs(2)).await;
            if s.write_all(b" ").await.is_err() {
                closed = true;
                break;
            }
            // An answer (a 4xx before the body is complete) also ends it.
            let mut buf = [0u8; 512];
            if let Ok(Ok(_)) =
                tokio::time::timeout(Duration::from_millis(1), s.read(&mut buf)).await
            {
                closed = true;
                break;
            }
        }
        if closed {
            c.add("closed by the server", 1);
            c.add("held ms total", opened.elapsed().as_millis() as u64);
            if opened.elapsed() < Duration::from_secs(3) {
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(Duration::from_secs(4));
            } else {
                backoff = Duration::from_millis(250);
            }
        }
    }
}
