//! Rate limits (docs/contract/api.md Conventions), per process, so replicas multiply them: a
//! token bucket per credential (GCRA, `governor`), failed sign-ins per email and address.

use crate::error::{AppError, AppResult};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::num::NonZeroU32;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};
use tauros_domain::identity;
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

/// A failed-sign-in key: an email's 32-byte digest, or a client address (IPv6 by its /64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    Email([u8; 32]),
    Address(IpAddr),
}

impl Key {
    fn address(ip: IpAddr) -> Key {
        Key::Address(match ip.to_canonical() {
            IpAddr::V6(v6) => {
                let bits = u128::from(v6) & !((1u128 << 64) - 1);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
            v4 => v4,
        })
    }
}

/// One key's window: failures counted in it, attempts in flight, and when it began.
#[derive(Clone, Copy, Debug)]
struct Count {
    failures: u32,
    pending: u32,
    since: Instant,
}

/// Failed sign-ins per email and per client address in a window from the first failure (0: off).
/// An attempt reserves a place under both before its password is checked, so concurrent
/// guesses cannot pass the limit; at most `cap` keys and `in_flight` attempts per address.
#[derive(Clone)]
pub(crate) struct SignInFailures {
    per_email: u32,
    per_address: u32,
    in_flight: u32,
    window: Duration,
    cap: usize,
    seen: Arc<Mutex<HashMap<Key, Count>>>,
}

/// A reserved sign-in place: failed counts, succeeded clears the email, dropped counts nothing.
pub(crate) struct Attempt {
    record: SignInFailures,
    keys: Vec<Key>,
}

impl SignInFailures {
    pub(crate) fn new(
        per_email: u32,
        per_address: u32,
        window: Duration,
        cap: usize,
        in_flight: u32,
    ) -> SignInFailures {
        SignInFailures {
            per_email,
            per_address,
            in_flight: in_flight.max(1),
            window,
            cap: cap.max(2),
            seen: Arc::new(Mutex::new(HashMap::new())),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Key, Count>> {
        // Plain counters, valid after any panic: keep counting.
        self.seen.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Entries held now.
    pub(crate) fn entries(&self) -> usize {
        self.lock().len()
    }

    /// Reserves a place for one attempt, or `RateLimited` (seconds until the fullest window ends).
    pub(crate) fn reserve(&self, email: &str, client: Option<IpAddr>) -> AppResult<Attempt> {
        let mut keys = Vec::with_capacity(2);
        if self.per_email > 0 {
            keys.push((Key::Email(identity::email_digest(email)), self.per_email));
        }
        if let (Some(ip), true) = (client, self.per_address > 0) {
            keys.push((Key::address(ip), self.per_address));
        }
        let mut seen = self.lock();
        let mut wait = None;
        for (key, limit) in &keys {
            if let Some(count) = seen.get_mut(key) {
                self.expire(count);
                if count.failures + count.pending >= *limit {
                    let left = self.window.saturating_sub(count.since.elapsed());
                    wait = wait.max(Some(left));
                } else if matches!(key, Key::Address(_)) && count.pending >= self.in_flight {
                    // Its other attempts are still being checked: try again in a moment.
                    wait = wait.max(Some(Duration::from_secs(1)));
                }
            }
        }
        if let Some(left) = wait {
            return Err(AppError::RateLimited {
                retry_after: whole_seconds(left),
            });
        }
        for (key, _) in &keys {
            self.entry(&mut seen, *key)?.pending += 1;
        }
        Ok(Attempt {
            record: self.clone(),
            keys: keys.into_iter().map(|(key, _)| key).collect(),
        })
    }

    /// A window that is over starts again (its attempts in flight stay counted).
    fn expire(&self, count: &mut Count) {
        if count.since.elapsed() >= self.window {
            count.failures = 0;
            count.since = Instant::now();
        }
    }

    /// The count of `key`, made room for if new: windows over are dropped, then the oldest eighth
    /// of those with nothing in flight; `Busy` when only attempts in flight fill it.
    fn entry<'a>(&self, seen: &'a mut HashMap<Key, Count>, key: Key) -> AppResult<&'a mut Count> {
        if !seen.contains_key(&key) && seen.len() >= self.cap {
            let window = self.window;
            seen.retain(|_, c| c.pending > 0 || c.since.elapsed() < window);
            if seen.len() >= self.cap {
                let mut idle: Vec<(Instant, Key)> = seen
                    .iter()
                    .filter(|(_, c)| c.pending == 0)
                    .map(|(k, c)| (c.since, *k))
                    .collect();
                let evict = (seen.len() + 1 - self.cap)
                    .max(self.cap / 8)
                    .min(idle.len());
                if evict == 0 {
                    return Err(AppError::Busy);
                }
                idle.select_nth_unstable_by_key(evict - 1, |(since, _)| *since);
                for (_, old) in &idle[..evict] {
                    seen.remove(old);
                }
            }
        }
        Ok(seen.entry(key).or_insert(Count {
            failures: 0,
            pending: 0,
            since: Instant::now(),
        }))
    }

    fn settle(&self, keys: &[Key], outcome: Option<bool>) {
        let mut seen = self.lock();
        for key in keys {
            let count = match outcome {
                // A failure is counted even if its entry was forgotten meanwhile.
                Some(false) => match self.entry(&mut seen, *key) {
                    Ok(count) => count,
                    Err(_) => continue,
                },
                _ => match seen.get_mut(key) {
                    Some(count) => count,
                    None => continue,
                },
            };
            count.pending = count.pending.saturating_sub(1);
            match outcome {
                Some(false) => {
                    self.expire(count);
                    if count.failures == 0 {
                        count.since = Instant::now();
                    }
                    count.failures += 1;
                }
                // The right password clears its email's count, never the address's: one
                // account of one's own must not reset a guessing address.
                Some(true) if matches!(key, Key::Email(_)) => count.failures = 0,
                _ => {}
            }
            if count.failures == 0 && count.pending == 0 {
                seen.remove(key);
            }
        }
    }
}

impl Attempt {
    /// The password was wrong: one failure for the email and the address.
    pub(crate) fn failed(mut self) {
        let keys = std::mem::take(&mut self.keys);
        self.record.settle(&keys, Some(false));
    }

    /// The password was right: the email's count is cleared.
    pub(crate) fn succeeded(mut self) {
        let keys = std::mem::take(&mut self.keys);
        self.record.settle(&keys, Some(true));
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.keys.is_empty() {
            let keys = std::mem::take(&mut self.keys);
            self.record.settle(&keys, None);
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

    fn limited(r: &AppResult<Attempt>) -> bool {
        matches!(r, Err(AppError::RateLimited { retry_after }) if *retry_after > 800)
    }

    #[test]
    fn failures_count_per_email_across_addresses_and_per_address_across_emails() {
        let record = SignInFailures::new(2, 3, Duration::from_secs(900), 100, 100);
        let ip = |n: u8| Some(IpAddr::from([10, 0, 0, n]));
        record.reserve("a@example.com", ip(1)).unwrap().failed();
        record.reserve("a@example.com", ip(2)).unwrap().failed();
        assert!(limited(&record.reserve("a@example.com", ip(3))));
        // 10.0.0.1 failed once; two more emails use up its three.
        assert!(record.reserve("b@example.com", ip(9)).is_ok());
        record.reserve("c@example.com", ip(1)).unwrap().failed();
        record.reserve("d@example.com", ip(1)).unwrap().failed();
        assert!(limited(&record.reserve("e@example.com", ip(1))));
        assert!(record.reserve("e@example.com", ip(4)).is_ok());
        // The right password clears the email's count, not the address's.
        record.reserve("c@example.com", ip(5)).unwrap().succeeded();
        assert!(record.reserve("c@example.com", ip(6)).is_ok());
        assert!(limited(&record.reserve("c@example.com", ip(1))));
    }

    #[test]
    fn places_in_flight_count_until_they_are_settled() {
        let record = SignInFailures::new(2, 0, Duration::from_secs(900), 100, 100);
        let first = record.reserve("a@example.com", None).unwrap();
        let second = record.reserve("a@example.com", None).unwrap();
        assert!(limited(&record.reserve("a@example.com", None)));
        // Released without an answer (a busy pool): the place is free again, nothing counted.
        drop(second);
        first.failed();
        record.reserve("a@example.com", None).unwrap().failed();
        assert!(limited(&record.reserve("a@example.com", None)));
    }

    #[test]
    fn one_address_has_at_most_its_share_of_attempts_in_flight() {
        let record = SignInFailures::new(10, 100, Duration::from_secs(900), 100, 2);
        let guesser: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let first = record.reserve("a@example.com", Some(guesser)).unwrap();
        let second = record.reserve("b@example.com", Some(guesser)).unwrap();
        let busy = record.reserve("c@example.com", Some(guesser));
        assert!(matches!(
            busy,
            Err(AppError::RateLimited { retry_after: 1 })
        ));
        assert!(record.reserve("c@example.com", Some(other)).is_ok());
        first.failed();
        let third = record.reserve("c@example.com", Some(guesser)).unwrap();
        drop((second, third));
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64_bit_prefix() {
        let record = SignInFailures::new(0, 1, Duration::from_secs(900), 100, 100);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_net: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other_net: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        record.reserve("a@example.com", Some(one)).unwrap().failed();
        assert!(limited(&record.reserve("b@example.com", Some(same_net))));
        assert!(record.reserve("b@example.com", Some(other_net)).is_ok());
    }

    #[test]
    fn the_record_never_holds_more_than_its_cap_and_forgets_the_oldest_first() {
        let record = SignInFailures::new(3, 0, Duration::from_secs(900), 64, 100);
        for n in 0..1000 {
            record
                .reserve(&format!("user{n}@example.com"), None)
                .unwrap()
                .failed();
            assert!(record.entries() <= 64, "{} entries", record.entries());
        }
        // The newest windows are kept.
        for _ in 0..2 {
            record
                .reserve("user999@example.com", None)
                .unwrap()
                .failed();
        }
        assert!(limited(&record.reserve("user999@example.com", None)));
        // What one entry costs, for docs/SECURITY.md.
        let entry = std::mem::size_of::<(Key, Count)>();
        assert!(entry <= 64, "{entry} bytes an entry");
    }
}
