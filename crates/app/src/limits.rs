//! Rate limits (docs/contract/api.md Conventions), per process: with several replicas each one
//! counts on its own, so the effective limit is the per-process one times the replicas a client
//! reaches.
//!
//! - Every credential (an agent's key, a human's session) has a token bucket: `per_second`
//!   requests a second, bursts of `burst` (GCRA from the `governor` crate). One credential's
//!   bucket never slows another's. `per_second = 0` turns it off.
//! - Failed sign-ins are counted per (email, client address): after `max` failures within
//!   `window`, further attempts are refused before any password work until the window that
//!   began with the first failure has passed. `max = 0` turns it off.

use crate::error::{AppError, AppResult};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::net::IpAddr;
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// Buckets kept before idle ones are dropped (an idle bucket is full again, so nothing is lost).
const RETAIN_ABOVE: usize = 10_000;

/// The token buckets of every credential.
#[derive(Clone)]
pub(crate) struct CredentialLimits(Option<Arc<DefaultKeyedRateLimiter<Uuid>>>);

impl CredentialLimits {
    pub(crate) fn new(per_second: u32, burst: u32) -> CredentialLimits {
        let Some(rate) = NonZeroU32::new(per_second) else {
            return CredentialLimits(None);
        };
        let burst = NonZeroU32::new(burst).unwrap_or(rate);
        let quota = Quota::per_second(rate).allow_burst(burst);
        CredentialLimits(Some(Arc::new(RateLimiter::keyed(quota))))
    }

    /// One request of `credential`, or `RateLimited` with the whole seconds to wait.
    pub(crate) fn take(&self, credential: Uuid) -> AppResult<()> {
        let Some(limiter) = &self.0 else {
            return Ok(());
        };
        if limiter.len() > RETAIN_ABOVE {
            limiter.retain_recent();
        }
        limiter.check_key(&credential).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            AppError::RateLimited {
                retry_after: whole_seconds(wait),
            }
        })
    }
}

/// Who tries to sign in: the normalized email and the client's address, if known.
type Attempt = (String, Option<IpAddr>);

/// Failed sign-ins per attempt key: how many, since when.
#[derive(Clone)]
pub(crate) struct SignInFailures {
    max: u32,
    window: Duration,
    seen: Arc<Mutex<HashMap<Attempt, (u32, Instant)>>>,
}

impl SignInFailures {
    pub(crate) fn new(max: u32, window: Duration) -> SignInFailures {
        SignInFailures {
            max,
            window,
            seen: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    /// Refuses an attempt once `max` failures of this email and address fall in the window.
    pub(crate) fn check(&self, email: &str, client: Option<IpAddr>) -> AppResult<()> {
        if self.max == 0 {
            return Ok(());
        }
        let Ok(seen) = self.seen.lock() else {
            return Ok(());
        };
        match seen.get(&(email.to_owned(), client)) {
            Some((count, since)) if *count >= self.max && since.elapsed() < self.window => {
                Err(AppError::RateLimited {
                    retry_after: whole_seconds(self.window - since.elapsed()),
                })
            }
            _ => Ok(()),
        }
    }

    /// Entries held now.
    pub(crate) fn entries(&self) -> usize {
        self.seen.lock().map_or(0, |seen| seen.len())
    }

    /// Counts one failure.
    pub(crate) fn failed(&self, email: &str, client: Option<IpAddr>) {
        if self.max == 0 {
            return;
        }
        let Ok(mut seen) = self.seen.lock() else {
            return;
        };
        if seen.len() > RETAIN_ABOVE {
            let window = self.window;
            seen.retain(|_, (_, since)| since.elapsed() < window);
        }
        let entry = seen
            .entry((email.to_owned(), client))
            .or_insert((0, Instant::now()));
        if entry.1.elapsed() >= self.window {
            *entry = (0, Instant::now());
        }
        entry.0 += 1;
    }

    /// A correct password clears the count of this email and address.
    pub(crate) fn succeeded(&self, email: &str, client: Option<IpAddr>) {
        if let Ok(mut seen) = self.seen.lock() {
            seen.remove(&(email.to_owned(), client));
        }
    }
}

fn whole_seconds(wait: Duration) -> u32 {
    u32::try_from(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
        .unwrap_or(u32::MAX)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_credential_gets_its_burst_then_waits_and_others_are_untouched() {
        let limits = CredentialLimits::new(1, 3);
        let (a, b) = (Uuid::from_u128(1), Uuid::from_u128(2));
        for _ in 0..3 {
            assert!(limits.take(a).is_ok());
        }
        match limits.take(a) {
            Err(AppError::RateLimited { retry_after }) => assert_eq!(retry_after, 1),
            other => panic!("expected a limit, got {other:?}"),
        }
        assert!(limits.take(b).is_ok());
        let off = CredentialLimits::new(0, 0);
        for _ in 0..1000 {
            assert!(off.take(a).is_ok());
        }
    }

    #[test]
    fn failed_sign_ins_lock_one_email_and_address_only() {
        let failures = SignInFailures::new(2, Duration::from_secs(900));
        let here = Some(IpAddr::from([127, 0, 0, 1]));
        let there = Some(IpAddr::from([10, 0, 0, 1]));
        failures.failed("a@example.com", here);
        assert!(failures.check("a@example.com", here).is_ok());
        failures.failed("a@example.com", here);
        assert!(matches!(
            failures.check("a@example.com", here),
            Err(AppError::RateLimited { retry_after }) if retry_after > 800
        ));
        assert!(failures.check("a@example.com", there).is_ok());
        assert!(failures.check("b@example.com", here).is_ok());
        failures.succeeded("a@example.com", here);
        assert!(failures.check("a@example.com", here).is_ok());
    }
}
