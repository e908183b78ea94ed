//! The `http` issuer adapter (docs/EFFECTS.md; wire format docs/PEER.md): `POST {url}` with the
//! operation key in [`OP_KEY_HEADER`]; recovery `GET {url}/{op key}` (200 answer, 404 absent).
//! A `POST` 4xx other than 408, 409, 425 and 429 is a refusal, confirmed by one recovery.

use super::IssuerAdapter;
use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;
use tauros_domain::effect::{self, Executed, Recovered};
use uuid::Uuid;

/// The header that carries the operation key to the peer: the peer's wire format, not ours.
const OP_KEY_HEADER: &str = "Idempotency-Key";

/// Issues to a peer over HTTP. No redirects are followed.
pub struct HttpIssuer {
    url: String,
    client: reqwest::Client,
}

impl HttpIssuer {
    /// `url` is where invoices are POSTed (e.g. `http://peer:9000/invoices`).
    pub fn new(url: &str, timeout: Duration) -> Result<HttpIssuer, reqwest::Error> {
        let client = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()?;
        Ok(HttpIssuer {
            url: url.trim_end_matches('/').to_owned(),
            client,
        })
    }
}

/// The most of a peer's answer that is read (docs/PEER.md): the largest request, which it
/// echoes (1 MiB), plus 64 KiB; a longer answer is an unknown outcome, never a success.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024 + 64 * 1024;

/// A JSON object of at most [`MAX_ANSWER_BYTES`], read in chunks whatever `Content-Length` said.
async fn object(mut response: reqwest::Response) -> Option<Value> {
    if response
        .content_length()
        .is_some_and(|n| n > MAX_ANSWER_BYTES as u64)
    {
        return None;
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice::<Value>(&body)
        .ok()
        .filter(Value::is_object)
}

#[async_trait]
impl IssuerAdapter for HttpIssuer {
    async fn execute(&self, op_key: Uuid, invoice: &Value) -> Executed<Value> {
        let sent = self
            .client
            .post(&self.url)
            .header(OP_KEY_HEADER, op_key.to_string())
            .json(invoice)
            .send()
            .await;
        match sent {
            Ok(r) if r.status().is_success() => match object(r).await {
                Some(answer) => Executed::Done(answer),
                None => Executed::Unknown,
            },
            Ok(r) if effect::is_refusal_status(r.status().as_u16()) => {
                let status = r.status();
                let body = object(r).await;
                let said = |field: &str| {
                    body.as_ref()
                        .and_then(|b| b.get(field))
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                };
                let reason = said("reason")
                    .or_else(|| said("error"))
                    .unwrap_or_else(|| format!("the issuer answered {status}"));
                Executed::Rejected(effect::bounded_reason(&reason))
            }
            _ => Executed::Unknown,
        }
    }

    async fn recover(&self, op_key: Uuid) -> Recovered<Value> {
        let sent = self
            .client
            .get(format!("{}/{op_key}", self.url))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == reqwest::StatusCode::OK => match object(r).await {
                Some(answer) => Recovered::Done(answer),
                None => Recovered::Unknown,
            },
            // Only the peer's own "absent" proves absence; a 404 from a wrong URL does not.
            Ok(r) if r.status() == reqwest::StatusCode::NOT_FOUND => match object(r).await {
                Some(answer) if answer.get("error") == Some(&Value::from("absent")) => {
                    Recovered::Absent
                }
                _ => Recovered::Unknown,
            },
            _ => Recovered::Unknown,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// A peer answering every request `status` with a JSON object of exactly `size` bytes.
    async fn peer(status: u16, size: usize) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let filler = "x".repeat(size.saturating_sub(r#"{"number":"N-1","x":""}"#.len()));
        let body = format!(r#"{{"number":"N-1","x":"{filler}"}}"#);
        tokio::spawn(async move {
            loop {
                let Ok((mut socket, _)) = listener.accept().await else {
                    return;
                };
                let body = body.clone();
                tokio::spawn(async move {
                    // Read the request head (and whatever body came with it).
                    let mut buf = vec![0u8; 64 * 1024];
                    let _ = socket.read(&mut buf).await;
                    let head = format!(
                        "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\n\
                         content-length: {}\r\nconnection: close\r\n\r\n",
                        body.len()
                    );
                    let _ = socket.write_all(head.as_bytes()).await;
                    let _ = socket.write_all(body.as_bytes()).await;
                    let _ = socket.shutdown().await;
                });
            }
        });
        format!("http://{addr}/invoices")
    }

    fn issuer(url: &str) -> HttpIssuer {
        HttpIssuer::new(url, Duration::from_secs(10)).unwrap()
    }

    #[tokio::test]
    async fn an_answer_over_the_bound_is_an_unknown_outcome_never_a_success() {
        let url = peer(200, MAX_ANSWER_BYTES + 1).await;
        let executed = issuer(&url)
            .execute(Uuid::nil(), &serde_json::json!({}))
            .await;
        assert!(matches!(executed, Executed::Unknown), "{executed:?}");
        let recovered = issuer(&url).recover(Uuid::nil()).await;
        assert!(matches!(recovered, Recovered::Unknown), "{recovered:?}");
    }

    #[tokio::test]
    async fn an_answer_within_the_bound_is_read() {
        // The echo of the largest request the wire format allows, and the peer's own members.
        let url = peer(200, MAX_ANSWER_BYTES).await;
        let executed = issuer(&url)
            .execute(Uuid::nil(), &serde_json::json!({}))
            .await;
        assert!(matches!(executed, Executed::Done(_)), "{executed:?}");
    }
}
