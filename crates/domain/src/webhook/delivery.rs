//! Deliveries without dead ends (docs/contract/effects.md §6): where a delivery stands, which
//! job cycle carries it, and when a failing endpoint is disabled. A resend or a re-enable starts
//! a new cycle: a new job with a fresh attempt budget, the same `webhook-id`.

use super::{DELIVERY_KIND, delivery_submission};
use crate::job::{JobState, job_id_for_submission};
use chrono::{DateTime, Utc};
use std::time::Duration;
use uuid::Uuid;

/// Default of `TAUROS_WEBHOOK_DISABLE_AFTER`: how long an endpoint may fail before it is disabled.
pub const DEFAULT_DISABLE_AFTER: Duration = Duration::from_secs(3 * 24 * 3600);
/// How long a replayed keyed create still shows the signing secret (unless rotated since).
pub const SECRET_REPLAY_WINDOW: Duration = Duration::from_secs(24 * 3600);

/// The id of a delivery: its first job's, so that job's attempts name it already.
pub fn delivery_id(org_id: Uuid, endpoint_id: Uuid, event_id: Uuid) -> Uuid {
    job_id_for_submission(
        org_id,
        DELIVERY_KIND,
        &delivery_submission(endpoint_id, event_id),
    )
}

/// The submission id of a delivery's job cycle `cycle` (from 1), under the endpoint's prefix
/// (`endpoint_submissions`) so deleting or disabling the endpoint reaches every cycle.
pub fn cycle_submission(endpoint_id: Uuid, event_id: Uuid, cycle: i32) -> String {
    let first = delivery_submission(endpoint_id, event_id);
    if cycle <= 1 {
        first
    } else {
        format!("{first}/{cycle}")
    }
}

/// The next job's cycle: the same when it never had a job (held from the start), else the next.
pub fn next_cycle(cycle: i32, had_job: bool) -> i32 {
    if had_job { cycle + 1 } else { cycle.max(1) }
}

/// Where a delivery stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeliveryStatus {
    /// Its job waits or runs: it will be attempted.
    Pending,
    /// Its endpoint is disabled: kept, not attempted, sent when an approver re-enables it.
    Held,
    /// The endpoint answered 2xx.
    Delivered,
    /// Its job ran out, was cancelled or pruned: nothing sends it unless an approver resends it.
    Failed,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 4] = [
        DeliveryStatus::Pending,
        DeliveryStatus::Held,
        DeliveryStatus::Delivered,
        DeliveryStatus::Failed,
    ];

    /// The status of a delivery from what is stored (`job`: `None` once pruned, or never had).
    pub fn of(delivered: bool, held: bool, job: Option<JobState>) -> DeliveryStatus {
        match job {
            _ if delivered => DeliveryStatus::Delivered,
            _ if held => DeliveryStatus::Held,
            Some(state) if state.is_claimable() || state == JobState::Running => {
                DeliveryStatus::Pending
            }
            _ => DeliveryStatus::Failed,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Pending => "pending",
            DeliveryStatus::Held => "held",
            DeliveryStatus::Delivered => "delivered",
            DeliveryStatus::Failed => "failed",
        }
    }
}

/// What a resend of a delivery does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resend {
    /// A new job cycle, with a fresh attempt budget.
    NewCycle,
    /// It is already pending: nothing to do (a replay).
    AlreadyPending,
}

/// Why a resend is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResendRefused {
    #[error(
        "the endpoint is disabled: its deliveries are held, not sent. Re-enable it \
         (POST /v1/webhook-endpoints/{{id}}/enable), which sends the held ones, then resend this one"
    )]
    EndpointDisabled,
}

impl ResendRefused {
    /// The problem's `code`.
    pub fn code(self) -> &'static str {
        match self {
            ResendRefused::EndpointDisabled => "endpoint_disabled",
        }
    }
}

/// Whether a delivery of `status` to an endpoint (disabled or not) may be sent again. A
/// delivered one may (effects.md §6): a receiver restored from a backup lost both the event
/// and its record of `webhook-id`, and only an approver's explicit resend tells Tauros so.
pub fn resend(status: DeliveryStatus, endpoint_disabled: bool) -> Result<Resend, ResendRefused> {
    match status {
        _ if endpoint_disabled => Err(ResendRefused::EndpointDisabled),
        DeliveryStatus::Pending => Ok(Resend::AlreadyPending),
        DeliveryStatus::Held | DeliveryStatus::Failed | DeliveryStatus::Delivered => {
            Ok(Resend::NewCycle)
        }
    }
}

/// An endpoint's record of success and failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Health {
    /// The first failed attempt since the last success.
    pub failing_since: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    pub disabled_at: Option<DateTime<Utc>>,
}

impl Health {
    /// The record after one attempt, and whether it disables the endpoint. A success in flight
    /// on a disabled endpoint is recorded, but only an approver re-enables it.
    pub fn after_attempt(
        self,
        delivered: bool,
        at: DateTime<Utc>,
        disable_after: Duration,
    ) -> (Health, bool) {
        if delivered {
            let last = self.last_success_at.map_or(at, |l| l.max(at));
            return (
                Health {
                    failing_since: None,
                    last_success_at: Some(last),
                    disabled_at: self.disabled_at,
                },
                false,
            );
        }
        let since = self.failing_since.map_or(at, |s| s.min(at));
        let window = chrono::Duration::from_std(disable_after).unwrap_or(chrono::Duration::MAX);
        let disable = self.disabled_at.is_none() && at - since >= window;
        (
            Health {
                failing_since: Some(since),
                last_success_at: self.last_success_at,
                disabled_at: if disable { Some(at) } else { self.disabled_at },
            },
            disable,
        )
    }

    /// The record after an approver re-enables the endpoint: a fresh window.
    pub fn enabled(self) -> Health {
        Health {
            failing_since: None,
            last_success_at: self.last_success_at,
            disabled_at: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap()
    }

    #[test]
    fn an_endpoint_is_disabled_after_failing_for_the_whole_window() {
        let window = Duration::from_secs(100);
        let (h, off) = Health::default().after_attempt(false, t(0), window);
        assert!(!off);
        assert_eq!(h.failing_since, Some(t(0)));
        let (h, off) = h.after_attempt(false, t(99), window);
        assert!(!off);
        let (ok, off) = h.after_attempt(true, t(99), window);
        assert!(!off);
        assert_eq!(ok.failing_since, None);
        assert_eq!(ok.last_success_at, Some(t(99)));
        // A success starts the window again.
        let (h2, off) = ok.after_attempt(false, t(150), window);
        assert!(!off);
        assert_eq!(h2.failing_since, Some(t(150)));
        let (h, off) = h.after_attempt(false, t(100), window);
        assert!(off);
        assert_eq!(h.disabled_at, Some(t(100)));
        // Disabled once: later failures do not disable it again.
        let (h, off) = h.after_attempt(false, t(200), window);
        assert!(!off);
        assert_eq!(h.disabled_at, Some(t(100)));
        // A success in flight is recorded; the endpoint stays disabled.
        let (h, _) = h.after_attempt(true, t(201), window);
        assert_eq!(h.disabled_at, Some(t(100)));
        let h = h.enabled();
        assert_eq!((h.disabled_at, h.failing_since), (None, None));
    }

    #[test]
    fn status_and_resend() {
        use DeliveryStatus::*;
        assert_eq!(DeliveryStatus::of(true, true, None), Delivered);
        assert_eq!(DeliveryStatus::of(false, true, None), Held);
        assert_eq!(
            DeliveryStatus::of(false, false, Some(JobState::Running)),
            Pending
        );
        assert_eq!(
            DeliveryStatus::of(false, false, Some(JobState::Retryable)),
            Pending
        );
        assert_eq!(
            DeliveryStatus::of(false, false, Some(JobState::Discarded)),
            Failed
        );
        assert_eq!(
            DeliveryStatus::of(false, false, Some(JobState::Cancelled)),
            Failed
        );
        assert_eq!(DeliveryStatus::of(false, false, None), Failed);
        assert_eq!(resend(Failed, false), Ok(Resend::NewCycle));
        assert_eq!(resend(Pending, false), Ok(Resend::AlreadyPending));
        assert_eq!(resend(Delivered, false), Ok(Resend::NewCycle));
        assert_eq!(
            resend(Delivered, true),
            Err(ResendRefused::EndpointDisabled)
        );
        assert_eq!(resend(Failed, true), Err(ResendRefused::EndpointDisabled));
    }

    #[test]
    fn cycles_share_the_endpoints_prefix() {
        let (e, v) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(cycle_submission(e, v, 1), delivery_submission(e, v));
        let second = cycle_submission(e, v, 2);
        assert!(second.starts_with(&super::super::endpoint_submissions(e)));
        assert!(second.ends_with("/2"));
        assert_eq!(next_cycle(1, false), 1);
        assert_eq!(next_cycle(1, true), 2);
        assert_eq!(
            delivery_id(Uuid::from_u128(3), e, v),
            job_id_for_submission(
                Uuid::from_u128(3),
                DELIVERY_KIND,
                &delivery_submission(e, v)
            )
        );
    }
}
