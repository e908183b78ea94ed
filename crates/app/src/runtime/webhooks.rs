//! Webhook delivery (`webhook.deliver.v1`; docs/WEBHOOKS.md, "Where deliveries may go"). Each
//! attempt vets the URL and every resolved address and connects only to those (`Pinned`: DNS
//! rebinding cannot reach an internal address), without proxy or redirects. Recorded errors
//! are fixed sentences, never the resolver's or socket's words, which could reveal internals.

use super::{JobContext, JobError, JobResult, KindPolicy, Registry};
use crate::webhooks::{AttemptRecorded, Delivery, DeliveryArgs, DeliveryRefused};
use serde_json::Value;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tauros_domain::webhook::{self as rules, Outcome, SealError, check_url, signature};

/// The kind of a delivery.
pub const KIND: &str = rules::DELIVERY_KIND;

/// One execution's limit: the longest endpoint timeout (30 s) and room to record the attempt.
const EXECUTION_TIMEOUT: Duration = Duration::from_secs(45);

/// How deliveries are retried.
#[derive(Clone, Copy, Debug)]
pub struct DeliveryPolicy {
    /// Where the backoff (1 s doubling, up to 25 % jitter on top) stops growing.
    pub backoff_cap: Duration,
}

impl Default for DeliveryPolicy {
    /// An hour: the 25 attempts of a delivery then span 13 to 16 hours.
    fn default() -> Self {
        DeliveryPolicy {
            backoff_cap: Duration::from_secs(3600),
        }
    }
}

/// Registers the delivery kind.
pub fn register(registry: &mut Registry, policy: DeliveryPolicy) {
    let kind = KindPolicy {
        backoff_cap: Some(policy.backoff_cap),
        timeout: Some(EXECUTION_TIMEOUT),
    };
    registry.register(KIND, kind, deliver);
}

async fn deliver(ctx: JobContext, args: Value) -> JobResult {
    let args: DeliveryArgs = serde_json::from_value(args)
        .map_err(|e| JobError::permanent("invalid_args", format!("{KIND} args: {e}")))?;
    let delivery = match ctx.app.webhook_delivery(&ctx.job, &args).await {
        Ok(Ok(delivery)) => delivery,
        Ok(Err(refused)) => return Err(refused_error(refused)),
        Err(e) => return Err(JobError::retryable("storage", e.to_string())),
    };
    let attempted_at = crate::clock::now();
    let started = Instant::now();
    let outcome = tokio::time::timeout(delivery.timeout, send(&delivery))
        .await
        .unwrap_or(Outcome::Timeout);
    let error = outcome.description(delivery.timeout.as_secs());
    let duration = started.elapsed();
    metrics::counter!("tauros_webhook_deliveries_total", "outcome" => outcome.metric())
        .increment(1);
    let recorded = ctx
        .app
        .record_webhook_attempt(
            &ctx.job,
            &delivery,
            outcome,
            error.as_deref(),
            duration,
            attempted_at,
        )
        .await;
    let recorded = match recorded {
        Ok(recorded) => recorded,
        Err(e) => {
            tracing::warn!(error = %e, job = %ctx.job.id, "recording a webhook attempt failed");
            AttemptRecorded::Recorded
        }
    };
    if outcome.delivered() {
        return Ok(());
    }
    match recorded {
        AttemptRecorded::EndpointGone => return Err(refused_error(DeliveryRefused::EndpointGone)),
        AttemptRecorded::Held => return Err(refused_error(DeliveryRefused::EndpointDisabled)),
        AttemptRecorded::Recorded => {}
    }
    let message = error.unwrap_or_else(|| "the attempt failed".to_owned());
    // A cycle ends at the operator's budget even if enqueued with more; then `failed`.
    let budget = ctx.app.webhook_max_attempts();
    if ctx.job.attempt >= budget && ctx.job.attempt < ctx.job.max_attempts {
        return Err(JobError::permanent(
            "attempts_exhausted",
            format!(
                "{message}; that was attempt {budget} of {budget} (TAUROS_WEBHOOK_MAX_ATTEMPTS)"
            ),
        ));
    }
    Err(JobError::retryable(&outcome.job_error_code(), message))
}

/// A delivery that cannot be made: for good unless the operator can fix it by configuration.
fn refused_error(refused: DeliveryRefused) -> JobError {
    let message = refused.to_string();
    match refused {
        DeliveryRefused::EndpointGone => JobError::permanent("endpoint_deleted", message),
        DeliveryRefused::EventGone => JobError::permanent("event_missing", message),
        DeliveryRefused::EndpointDisabled => JobError::permanent("endpoint_disabled", message),
        DeliveryRefused::Superseded => JobError::permanent("superseded", message),
        DeliveryRefused::Secret(SealError::Malformed) => {
            JobError::permanent("secret_malformed", message)
        }
        // Restoring the key that sealed it (TAUROS_SECRET_KEY) lets a retry succeed.
        DeliveryRefused::Secret(_) => JobError::retryable("secret_unavailable", message),
    }
}

/// One attempt, without its time limit (the caller's): vet, connect, POST, read the status.
async fn send(delivery: &Delivery) -> Outcome {
    let Ok(target) = check_url(&delivery.url, &delivery.allow_hosts) else {
        return Outcome::AddressNotAllowed;
    };
    let Ok(url) = reqwest::Url::parse(&target.url) else {
        return Outcome::AddressNotAllowed;
    };
    let port = url.port_or_known_default().unwrap_or(443);
    let resolved: Vec<IpAddr> = match target.address {
        Some(ip) => vec![ip],
        None => match tokio::net::lookup_host((target.host.as_str(), port)).await {
            Ok(addrs) => addrs.map(|a| a.ip()).collect(),
            Err(e) => {
                tracing::debug!(kind = ?e.kind(), "webhook host name did not resolve");
                return Outcome::DnsFailure;
            }
        },
    };
    let Ok(vetted) = delivery.allow_hosts.vet(&target.host, &resolved) else {
        return Outcome::AddressNotAllowed;
    };
    let pinned: Vec<SocketAddr> = vetted.iter().map(|ip| SocketAddr::new(*ip, port)).collect();
    let client = match reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .no_proxy()
        .dns_resolver(Arc::new(Pinned(pinned)))
        .connect_timeout(delivery.timeout)
        .timeout(delivery.timeout)
        .pool_max_idle_per_host(0)
        .user_agent(concat!("Tauros-Webhooks/", env!("CARGO_PKG_VERSION")))
        .build()
    {
        Ok(client) => client,
        Err(e) => return failed(&e),
    };
    let id = delivery.event_id.to_string();
    let timestamp = chrono::Utc::now().timestamp();
    let signed = signature(&delivery.secret, &id, timestamp, delivery.body.as_bytes());
    let sent = client
        .post(url)
        .header("content-type", "application/json")
        .header("webhook-id", &id)
        .header("webhook-timestamp", timestamp.to_string())
        .header("webhook-signature", signed)
        .body(delivery.body.clone())
        .send()
        .await;
    match sent {
        // The body of the answer is not read: only the status counts.
        Ok(response) => Outcome::Answered(response.status().as_u16()),
        Err(e) => failed(&e),
    }
}

/// The kind of a failed request. reqwest has no TLS predicate: an `InvalidData` I/O cause (how
/// rustls fails a handshake) or words naming TLS make it `tls`; the words are dropped here.
fn failed(e: &reqwest::Error) -> Outcome {
    if e.is_timeout() {
        return Outcome::Timeout;
    }
    let mut tls = false;
    let mut io_kind = None;
    let mut source = std::error::Error::source(e);
    while let Some(cause) = source {
        let text = cause.to_string().to_ascii_lowercase();
        tls |= text.contains("tls") || text.contains("certificate") || text.contains("handshake");
        // rustls reports a failed handshake as invalid data on the stream (wrapped in another
        // I/O error, whose `source` skips it); a plain TCP connection never does.
        let mut wrapped = Some(cause);
        while let Some(io) = wrapped.and_then(|e| e.downcast_ref::<std::io::Error>()) {
            io_kind = Some(io.kind());
            tls |= io.kind() == std::io::ErrorKind::InvalidData;
            wrapped = io
                .get_ref()
                .map(|inner| inner as &(dyn std::error::Error + 'static));
        }
        source = cause.source();
    }
    let outcome = if tls {
        Outcome::Tls
    } else {
        Outcome::ConnectFailed
    };
    tracing::debug!(kind = ?outcome, io = ?io_kind, "webhook attempt failed");
    outcome
}

/// A resolver answering the vetted addresses for any name (its client asks about one URL).
struct Pinned(Vec<SocketAddr>);

impl reqwest::dns::Resolve for Pinned {
    fn resolve(&self, _name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let addrs: reqwest::dns::Addrs = Box::new(self.0.clone().into_iter());
        Box::pin(std::future::ready(Ok(addrs)))
    }
}
