//! The `http` issuer adapter (docs/EFFECTS.md, the wire format of docs/PEER.md): `POST {url}`
//! with the operation key in the [`OP_KEY_HEADER`]; recovery is `GET {url}/{op key}`: 200 → the
//! stored answer, 404 `{"error": "absent"}` → absent, anything else → unknown. A 4xx from
//! `POST` other than 408, 409, 425 and 429 is a refusal (`Executed::Rejected` with the peer's
//! reason), which the attempt confirms with one recovery before it counts.

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

/// A peer's answer is a JSON object; anything else is not an answer.
async fn object(response: reqwest::Response) -> Option<Value> {
    response.json::<Value>().await.ok().filter(Value::is_object)
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
