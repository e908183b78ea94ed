//! Webhook rules (docs/contract/effects.md §2, the Standard Webhooks convention). The outbound
//! address policy is `address`; secrets and signatures are `signing`.

mod address;
mod delivery;
mod events;
mod signing;

pub use address::{
    AddressRefused, AllowList, MAX_URL_CHARS, UrlError, WebhookUrl, address_is_public, check_url,
    check_url_form,
};
pub use delivery::{
    DEFAULT_DISABLE_AFTER, DeliveryStatus, Health, Resend, ResendRefused, SECRET_REPLAY_WINDOW,
    cycle_submission, delivery_id, next_cycle, resend,
};
pub use events::{Event, EventFacts, EventType, Subscription, payload};
pub use signing::{
    SECRET_PREFIX, SealError, SecretKey, SigningSecret, open_secret, seal_secret, signature,
};

use crate::error::FieldError;
use std::time::Duration;
use uuid::Uuid;

/// The job kind of one delivery (one event to one endpoint).
pub const DELIVERY_KIND: &str = "webhook.deliver.v1";
/// The most endpoints an organisation may register: every event is one job per endpoint.
pub const MAX_ENDPOINTS_PER_ORG: i64 = 20;
/// The most entries `events[]` may list (duplicates included).
pub const MAX_EVENTS: usize = 32;
/// The longest description.
pub const MAX_DESCRIPTION_CHARS: usize = 200;
/// An attempt's timeout when the registration names none.
pub const DEFAULT_TIMEOUT_SECONDS: i32 = 10;
/// The shortest and longest timeout an endpoint may ask for.
pub const TIMEOUT_SECONDS: std::ops::RangeInclusive<i32> = 1..=30;
/// How long the attempts of a delivery are kept.
pub const ATTEMPT_RETENTION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The longest error text an attempt keeps.
pub const MAX_ATTEMPT_ERROR_CHARS: usize = 200;

/// A registration whose field rules the wire's `validator` checked; the domain reads only the
/// URL (against the outbound policy) and the event types.
#[derive(Clone, Copy, Debug)]
pub struct EndpointInput<'a> {
    pub url: &'a str,
    pub events: &'a [String],
    pub description: Option<&'a str>,
    /// 10 when omitted.
    pub timeout_seconds: Option<i32>,
}

/// A registration that follows every rule.
#[derive(Clone, Debug)]
pub struct CheckedEndpoint {
    /// The URL in its normal form.
    pub url: String,
    pub subscription: Subscription,
    pub description: Option<String>,
    pub timeout_seconds: i32,
}

/// Checks a registration's `url` (form and outbound policy) and `events[]`, naming each field.
pub fn check_endpoint(
    input: EndpointInput<'_>,
    allow: &AllowList,
) -> Result<CheckedEndpoint, Vec<FieldError>> {
    let mut errors = Vec::new();
    let url = check_url(input.url, allow)
        .map_err(|e| errors.push(FieldError::new("url", &e)))
        .ok();
    let subscription = check_events(input.events, &mut errors);
    match (url, subscription) {
        (Some(url), Some(subscription)) if errors.is_empty() => Ok(CheckedEndpoint {
            url: url.url,
            subscription,
            description: input.description.map(|d| d.trim().to_owned()),
            timeout_seconds: input.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS),
        }),
        _ => Err(errors),
    }
}

/// The errors of [`check_endpoint`] that need no policy (URL form, event types): the wire adds
/// them to an answer it refuses anyway, so a body hears all its own mistakes at once.
pub fn endpoint_form_errors(url: Option<&str>, events: Option<&[String]>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(Err(e)) = url.map(check_url_form) {
        errors.push(FieldError::new("url", &e));
    }
    if let Some(events) = events {
        check_events(events, &mut errors);
    }
    errors
}

/// `events[]`: 1 to 32 known event types (repeats kept once); an unknown one is named by index.
fn check_events(sent: &[String], errors: &mut Vec<FieldError>) -> Option<Subscription> {
    if sent.is_empty() {
        errors.push(FieldError::plain(
            "events",
            "empty_events",
            format!(
                "`events` must name at least one event type: {}",
                EventType::names().join(", ")
            ),
        ));
        return None;
    }
    if sent.len() > MAX_EVENTS {
        errors.push(FieldError::plain(
            "events",
            "too_many_events",
            format!("`events` may list at most {MAX_EVENTS} entries"),
        ));
        return None;
    }
    let mut known = Vec::new();
    let mut ok = true;
    for (i, name) in sent.iter().enumerate() {
        match EventType::parse(name) {
            Some(event_type) => known.push(event_type),
            None => {
                ok = false;
                errors.push(FieldError::plain(
                    format!("events[{i}]"),
                    "unknown_event",
                    format!(
                        "`{}` is not an event type; send one of {}",
                        crate::error::echo(name),
                        EventType::names().join(", ")
                    ),
                ));
            }
        }
    }
    ok.then(|| Subscription::of(known.into_iter()))
}

/// The submission id of the delivery of one event to one endpoint: the endpoint first, so its
/// pending deliveries share a prefix ([`endpoint_submissions`]).
pub fn delivery_submission(endpoint_id: Uuid, event_id: Uuid) -> String {
    format!("{}{event_id}", endpoint_submissions(endpoint_id))
}

/// The prefix every delivery submission id to an endpoint starts with.
pub fn endpoint_submissions(endpoint_id: Uuid) -> String {
    format!("{endpoint_id}/")
}

/// Deliveries of one endpoint in flight at once (Tenancy, "Fair work"); more wait unclaimed.
pub const MAX_IN_FLIGHT_PER_ENDPOINT: i64 = 4;

/// The lane of an endpoint's deliveries, the jobs [`MAX_IN_FLIGHT_PER_ENDPOINT`] caps.
pub fn delivery_lane(endpoint_id: Uuid) -> String {
    format!("webhook:{endpoint_id}")
}

/// How one attempt ended. A failure is recorded as its kind ([`Outcome::error_kind`]) and a
/// fixed sentence ([`Outcome::description`]), never the resolver's or the socket's words: those
/// can tell what an internal name resolves to (Tenancy, "Errors that leak nothing internal").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The receiver answered; 2xx means delivered.
    Answered(u16),
    Timeout,
    DnsFailure,
    /// The host resolved only to addresses the outbound policy refuses.
    AddressNotAllowed,
    /// No connection (refused, reset) or the connection broke before an answer.
    ConnectFailed,
    /// The TLS handshake failed (certificate, protocol).
    Tls,
}

/// Every kind a failed attempt records, as the wire and the job's last error show it.
pub const ERROR_KINDS: [&str; 6] = [
    "dns_failure",
    "address_not_allowed",
    "timeout",
    "connect_failed",
    "tls",
    "http_status",
];

impl Outcome {
    /// Whether the receiver took the event.
    pub fn delivered(self) -> bool {
        matches!(self, Outcome::Answered(status) if (200..300).contains(&status))
    }

    /// The attempt's `error_kind`: none when delivered, `http_status` for another answer.
    pub fn error_kind(self) -> Option<&'static str> {
        match self {
            _ if self.delivered() => None,
            Outcome::Answered(_) => Some("http_status"),
            Outcome::Timeout => Some("timeout"),
            Outcome::DnsFailure => Some("dns_failure"),
            Outcome::AddressNotAllowed => Some("address_not_allowed"),
            Outcome::ConnectFailed => Some("connect_failed"),
            Outcome::Tls => Some("tls"),
        }
    }

    /// The attempt's `error`: one fixed sentence per kind, nothing from the resolver or socket.
    pub fn description(self, timeout_seconds: u64) -> Option<String> {
        Some(match self {
            _ if self.delivered() => return None,
            Outcome::Answered(status) => format!("the endpoint answered {status}"),
            Outcome::Timeout => {
                format!("no answer within the endpoint's timeout of {timeout_seconds} s")
            }
            Outcome::DnsFailure => "the endpoint's host name did not resolve".to_owned(),
            Outcome::AddressNotAllowed => "the endpoint's host is not allowed by this server's \
                 outbound policy (an internal address, or not on TAUROS_WEBHOOK_ALLOW_HOSTS)"
                .to_owned(),
            Outcome::ConnectFailed => {
                "no connection to the endpoint, or it closed before an answer".to_owned()
            }
            Outcome::Tls => "the TLS handshake with the endpoint failed".to_owned(),
        })
    }

    /// The label of `tauros_webhook_deliveries_total{outcome}`.
    pub fn metric(self) -> &'static str {
        match self {
            _ if self.delivered() => "delivered",
            Outcome::Answered(_) => "http_error",
            other => other.error_kind().unwrap_or("connect_failed"),
        }
    }

    /// The job's error code for a failed attempt: `http_503` for an answer (no secret, and
    /// operators filter on it), else the error kind.
    pub fn job_error_code(self) -> String {
        match self {
            Outcome::Answered(status) => format!("http_{status}"),
            other => other.error_kind().unwrap_or("connect_failed").to_owned(),
        }
    }
}

/// An attempt's error text as stored: control characters dropped, at most 200 characters.
pub fn bounded_error(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control())
        .take(MAX_ATTEMPT_ERROR_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::invoice::Action;

    fn strings(names: &[&str]) -> Vec<String> {
        names.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn subscriptions_are_deduplicated_ordered_and_round_trip() {
        let allow = AllowList::default();
        let sent = strings(&["invoice.approved", "invoice.created", "invoice.approved"]);
        let checked = check_endpoint(
            EndpointInput {
                url: "https://hooks.example.com/tauros",
                events: &sent,
                description: None,
                timeout_seconds: None,
            },
            &allow,
        )
        .unwrap();
        assert_eq!(
            checked.subscription.names(),
            ["invoice.created", "invoice.approved"]
        );
        assert_eq!(checked.timeout_seconds, DEFAULT_TIMEOUT_SECONDS);
        let stored = checked.subscription.to_stored();
        assert_eq!(stored, "invoice.created,invoice.approved");
        assert_eq!(Subscription::from_stored(&stored), checked.subscription);
        assert!(
            checked
                .subscription
                .includes(EventType::Invoice(Action::Approve))
        );
        assert!(
            !checked
                .subscription
                .includes(EventType::Invoice(Action::Reject))
        );
    }

    #[test]
    fn every_problem_names_its_field() {
        let allow = AllowList::default();
        let sent = strings(&["invoice.approved", "invoice.paid!", "nope"]);
        let errors = check_endpoint(
            EndpointInput {
                url: "ftp://example.com/",
                events: &sent,
                description: None,
                timeout_seconds: None,
            },
            &allow,
        )
        .unwrap_err();
        let fields: Vec<(&str, &str)> = errors.iter().map(|e| (e.field.as_str(), e.code)).collect();
        let expected = [
            ("url", "unsupported_scheme"),
            ("events[1]", "unknown_event"),
            ("events[2]", "unknown_event"),
        ];
        assert_eq!(fields, expected);
        assert!(errors[1].detail.contains("invoice.changes_requested"));
        // The same without a policy, for an answer the wire refuses anyway.
        let form = endpoint_form_errors(Some("ftp://example.com/"), Some(&sent));
        let fields: Vec<(&str, &str)> = form.iter().map(|e| (e.field.as_str(), e.code)).collect();
        assert_eq!(fields, expected);
        let errors = endpoint_form_errors(None, Some(&[]));
        assert_eq!(errors[0].code, "empty_events");
        // An internal address is the policy's to refuse, at registration.
        assert!(endpoint_form_errors(Some("http://127.0.0.1/"), None).is_empty());
        let many = vec!["invoice.created".to_owned(); MAX_EVENTS + 1];
        let errors = check_endpoint(
            EndpointInput {
                url: "http://127.0.0.1/",
                events: &many,
                description: None,
                timeout_seconds: None,
            },
            &allow,
        )
        .unwrap_err();
        assert_eq!(errors[0].code, "internal_address");
        assert_eq!(errors[1].code, "too_many_events");
    }

    #[test]
    fn outcomes_name_their_kind() {
        assert!(Outcome::Answered(204).delivered());
        assert!(!Outcome::Answered(302).delivered());
        assert_eq!(Outcome::Answered(200).metric(), "delivered");
        assert_eq!(Outcome::Answered(500).metric(), "http_error");
        assert_eq!(Outcome::Answered(500).job_error_code(), "http_500");
        assert_eq!(Outcome::Answered(500).error_kind(), Some("http_status"));
        assert_eq!(Outcome::Answered(204).error_kind(), None);
        assert_eq!(Outcome::Timeout.error_kind(), Some("timeout"));
        assert_eq!(Outcome::AddressNotAllowed.metric(), "address_not_allowed");
        for outcome in [
            Outcome::Answered(500),
            Outcome::Timeout,
            Outcome::DnsFailure,
            Outcome::AddressNotAllowed,
            Outcome::ConnectFailed,
            Outcome::Tls,
        ] {
            assert!(ERROR_KINDS.contains(&outcome.error_kind().unwrap()));
            assert!(outcome.description(5).is_some());
        }
        assert_eq!(bounded_error(&"x\n".repeat(300)).len(), 200);
    }

    #[test]
    fn deliveries_of_one_endpoint_share_a_prefix() {
        let endpoint = Uuid::from_u128(7);
        let event = Uuid::from_u128(9);
        let id = delivery_submission(endpoint, event);
        assert!(id.starts_with(&endpoint_submissions(endpoint)));
        assert!(id.ends_with(&event.to_string()));
        assert!(crate::fingerprint::key_is_valid(&id));
    }
}
