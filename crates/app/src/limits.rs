//! Rate limits (docs/contract/api.md Conventions), per process, so replicas multiply them: a
//! token bucket per credential (GCRA, `governor`), failed sign-ins per email, device and
//! address.

use crate::error::{AppError, AppResult, Limit};
use chrono::{DateTime, Utc};
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
                limit: Limit::Credential,
            }
        })
    }
}

/// A failed-sign-in key: emails by their 32-byte digest, client addresses (IPv6 by its /64).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// An email, from every address.
    Email([u8; 32]),
    /// One device: a device token's id, or the session of a password change.
    Device(Uuid),
    /// An email from one client address.
    AddressAndEmail(IpAddr, [u8; 32]),
    /// A client address: only its attempts in flight are counted.
    Address(IpAddr),
}

fn canonical(ip: IpAddr) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V6(v6) => {
            let bits = u128::from(v6) & !((1u128 << 64) - 1);
            IpAddr::V6(Ipv6Addr::from(bits))
        }
        v4 => v4,
    }
}

/// One key's window: failures counted in it, attempts in flight, and when it began.
#[derive(Clone, Copy, Debug)]
struct Count {
    failures: u32,
    pending: u32,
    since: Instant,
}

/// What one attempt does with one key: counts a failure, and is refused at `limit` failures
/// (0: counted only, never refused).
#[derive(Clone, Copy, Debug)]
struct Rule {
    key: Key,
    refuses_at: u32,
}

/// Failed sign-ins in a window from each key's first failure (docs/SECURITY.md, "Nobody can
/// lock a human out"): per email (refusing only attempts without a device), per device, per
/// email from one address; an address's attempts in flight are capped. An attempt reserves
/// its place under every key that may refuse it before its password is checked, so
/// concurrent guesses cannot pass a limit; the record holds at most `cap` keys.
#[derive(Clone)]
pub(crate) struct SignInFailures {
    per_email: u32,
    per_address_and_email: u32,
    in_flight: u32,
    window: Duration,
    cap: usize,
    seen: Arc<Mutex<HashMap<Key, Count>>>,
}

/// A reserved sign-in: failed counts under each key, succeeded clears its device's count,
/// dropped counts nothing.
pub(crate) struct Attempt {
    record: SignInFailures,
    rules: Vec<Rule>,
}

impl SignInFailures {
    pub(crate) fn new(
        per_email: u32,
        per_address_and_email: u32,
        window: Duration,
        cap: usize,
        in_flight: u32,
    ) -> SignInFailures {
        SignInFailures {
            per_email,
            per_address_and_email,
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

    /// The keys one attempt is counted under, and where each refuses it.
    fn rules(&self, email: &str, client: Option<IpAddr>, device: Option<Uuid>) -> Vec<Rule> {
        let digest = identity::email_digest(email);
        let mut rules = Vec::with_capacity(4);
        if self.per_email > 0 {
            // With a device, the email's count does not stop the attempt; a failure still
            // counts for every sign-in without one.
            let refuses_at = if device.is_some() { 0 } else { self.per_email };
            rules.push(Rule {
                key: Key::Email(digest),
                refuses_at,
            });
            if let Some(device) = device {
                rules.push(Rule {
                    key: Key::Device(device),
                    refuses_at: self.per_email,
                });
            }
        }
        if let Some(ip) = client.map(canonical) {
            if self.per_address_and_email > 0 {
                rules.push(Rule {
                    key: Key::AddressAndEmail(ip, digest),
                    refuses_at: self.per_address_and_email,
                });
            }
            rules.push(Rule {
                key: Key::Address(ip),
                refuses_at: 0,
            });
        }
        rules
    }

    /// Reserves a place for one attempt, or `RateLimited` naming the limit that refused (the
    /// one whose window ends last, if several do).
    pub(crate) fn reserve(
        &self,
        email: &str,
        client: Option<IpAddr>,
        device: Option<Uuid>,
    ) -> AppResult<Attempt> {
        let rules = self.rules(email, client, device);
        let mut seen = self.lock();
        let mut refused: Option<(Duration, Limit)> = None;
        for rule in &rules {
            let Some(count) = seen.get_mut(&rule.key) else {
                continue;
            };
            self.expire(count);
            let wait = match rule.key {
                // Its other attempts are still being checked: try again in a moment.
                Key::Address(_) if count.pending >= self.in_flight => Duration::from_secs(1),
                _ if rule.refuses_at > 0 && count.failures + count.pending >= rule.refuses_at => {
                    self.window.saturating_sub(count.since.elapsed())
                }
                _ => continue,
            };
            if refused.is_none_or(|(longest, _)| wait > longest) {
                refused = Some((wait, limit_of(rule.key)));
            }
        }
        if let Some((wait, limit)) = refused {
            return Err(AppError::RateLimited {
                retry_after: whole_seconds(wait),
                limit,
            });
        }
        for rule in rules.iter().filter(|r| reserves(r)) {
            self.entry(&mut seen, rule.key)?.pending += 1;
        }
        Ok(Attempt {
            record: self.clone(),
            rules,
        })
    }

    /// Forgets the email's failures if its window began at or before `unlocked_at` (an
    /// operator's `tauros user unlock`); whether it did.
    pub(crate) fn clear_email(&self, email: &str, unlocked_at: DateTime<Utc>) -> bool {
        let mut seen = self.lock();
        let Some(count) = seen.get_mut(&Key::Email(identity::email_digest(email))) else {
            return false;
        };
        let began = chrono::Duration::from_std(count.since.elapsed())
            .map_or(DateTime::<Utc>::MIN_UTC, |age| Utc::now() - age);
        if began > unlocked_at || count.failures == 0 {
            return false;
        }
        count.failures = 0;
        count.since = Instant::now();
        true
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

    fn settle(&self, rules: &[Rule], outcome: Option<bool>) {
        let mut seen = self.lock();
        for rule in rules {
            let key = rule.key;
            let failed = outcome == Some(false) && !matches!(key, Key::Address(_));
            let count = if failed {
                // A failure is counted even if its entry was forgotten meanwhile.
                match self.entry(&mut seen, key) {
                    Ok(count) => count,
                    Err(_) => continue,
                }
            } else {
                match seen.get_mut(&key) {
                    Some(count) => count,
                    None => continue,
                }
            };
            if reserves(rule) {
                count.pending = count.pending.saturating_sub(1);
            }
            if failed {
                self.expire(count);
                if count.failures == 0 {
                    count.since = Instant::now();
                }
                count.failures += 1;
            } else if outcome == Some(true) && matches!(key, Key::Device(_)) {
                // The right password from a device clears that device's count, and only it:
                // the email's and the address's stay, so a guesser's budget never grows.
                count.failures = 0;
            }
            if count.failures == 0 && count.pending == 0 {
                seen.remove(&key);
            }
        }
    }
}

/// Whether an attempt holds a place under the rule's key while it is checked.
fn reserves(rule: &Rule) -> bool {
    rule.refuses_at > 0 || matches!(rule.key, Key::Address(_))
}

fn limit_of(key: Key) -> Limit {
    match key {
        Key::Email(_) => Limit::Email,
        Key::Device(_) => Limit::Device,
        Key::AddressAndEmail(..) => Limit::AddressAndEmail,
        Key::Address(_) => Limit::AddressInFlight,
    }
}

impl Attempt {
    /// The password was wrong: one failure under each key.
    pub(crate) fn failed(mut self) {
        let rules = std::mem::take(&mut self.rules);
        self.record.settle(&rules, Some(false));
    }

    /// The password was right: the device's count is cleared.
    pub(crate) fn succeeded(mut self) {
        let rules = std::mem::take(&mut self.rules);
        self.record.settle(&rules, Some(true));
    }
}

impl Drop for Attempt {
    fn drop(&mut self) {
        if !self.rules.is_empty() {
            let rules = std::mem::take(&mut self.rules);
            self.record.settle(&rules, None);
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
            Err(AppError::RateLimited { retry_after, limit }) => {
                assert_eq!((retry_after, limit), (1, Limit::Credential));
            }
            other => panic!("expected a limit, got {other:?}"),
        }
        assert!(limits.take(b).is_ok());
        let off = CredentialLimits::new(0, 0);
        for _ in 0..1000 {
            assert!(off.take(a).is_ok());
        }
    }

    /// Refused by `limit` until (nearly) the end of a 15-minute window.
    fn refused(r: &AppResult<Attempt>, limit: Limit) -> bool {
        matches!(r, Err(AppError::RateLimited { retry_after, limit: l })
            if *retry_after > 800 && *l == limit)
    }

    fn ip(n: u8) -> Option<IpAddr> {
        Some(IpAddr::from([10, 0, 0, n]))
    }

    #[test]
    fn an_emails_failures_stop_only_attempts_without_a_device() {
        let record = SignInFailures::new(2, 10, Duration::from_secs(900), 100, 100);
        record
            .reserve("a@example.com", ip(1), None)
            .unwrap()
            .failed();
        record
            .reserve("a@example.com", ip(2), None)
            .unwrap()
            .failed();
        assert!(refused(
            &record.reserve("a@example.com", ip(3), None),
            Limit::Email
        ));
        // A device is checked normally; the right password from it clears nothing else.
        let device = Uuid::from_u128(7);
        record
            .reserve("a@example.com", ip(3), Some(device))
            .unwrap()
            .succeeded();
        assert!(refused(
            &record.reserve("a@example.com", ip(4), None),
            Limit::Email
        ));
        assert!(record.reserve("b@example.com", ip(1), None).is_ok());
    }

    #[test]
    fn a_device_is_stopped_by_its_own_failures_only() {
        let record = SignInFailures::new(2, 10, Duration::from_secs(900), 100, 100);
        let (mine, theirs) = (Some(Uuid::from_u128(1)), Some(Uuid::from_u128(2)));
        record
            .reserve("a@example.com", ip(1), theirs)
            .unwrap()
            .failed();
        record
            .reserve("a@example.com", ip(2), theirs)
            .unwrap()
            .failed();
        assert!(refused(
            &record.reserve("a@example.com", ip(3), theirs),
            Limit::Device
        ));
        // Its failures counted for the email too: sign-ins without a device are stopped.
        assert!(refused(
            &record.reserve("a@example.com", ip(3), None),
            Limit::Email
        ));
        // Another device of the same human is not.
        record
            .reserve("a@example.com", ip(3), mine)
            .unwrap()
            .failed();
        record
            .reserve("a@example.com", ip(3), mine)
            .unwrap()
            .succeeded();
        record
            .reserve("a@example.com", ip(3), mine)
            .unwrap()
            .failed();
        assert!(record.reserve("a@example.com", ip(3), mine).is_ok());
    }

    #[test]
    fn an_address_is_stopped_only_for_the_emails_it_guessed() {
        let record = SignInFailures::new(100, 3, Duration::from_secs(900), 100, 100);
        let device = Some(Uuid::from_u128(1));
        for _ in 0..3 {
            record
                .reserve("a@example.com", ip(1), None)
                .unwrap()
                .failed();
        }
        assert!(refused(
            &record.reserve("a@example.com", ip(1), None),
            Limit::AddressAndEmail
        ));
        assert!(refused(
            &record.reserve("a@example.com", ip(1), device),
            Limit::AddressAndEmail
        ));
        assert!(record.reserve("b@example.com", ip(1), None).is_ok());
        assert!(record.reserve("a@example.com", ip(2), None).is_ok());
    }

    #[test]
    fn an_unlock_clears_the_failures_counted_before_it() {
        let record = SignInFailures::new(2, 10, Duration::from_secs(900), 100, 100);
        let before = Utc::now() - chrono::Duration::seconds(5);
        for n in 1..3 {
            record
                .reserve("a@example.com", ip(n), None)
                .unwrap()
                .failed();
        }
        assert!(
            !record.clear_email("a@example.com", before),
            "an older unlock"
        );
        assert!(record.clear_email("a@example.com", Utc::now()));
        assert!(record.reserve("a@example.com", ip(3), None).is_ok());
        assert!(
            !record.clear_email("b@example.com", Utc::now()),
            "nothing counted"
        );
    }

    #[test]
    fn places_in_flight_count_until_they_are_settled() {
        let record = SignInFailures::new(2, 0, Duration::from_secs(900), 100, 100);
        let first = record.reserve("a@example.com", None, None).unwrap();
        let second = record.reserve("a@example.com", None, None).unwrap();
        assert!(refused(
            &record.reserve("a@example.com", None, None),
            Limit::Email
        ));
        // Released without an answer (a busy pool): the place is free again, nothing counted.
        drop(second);
        first.failed();
        record
            .reserve("a@example.com", None, None)
            .unwrap()
            .failed();
        assert!(refused(
            &record.reserve("a@example.com", None, None),
            Limit::Email
        ));
    }

    #[test]
    fn one_address_has_at_most_its_share_of_attempts_in_flight() {
        let record = SignInFailures::new(10, 100, Duration::from_secs(900), 100, 2);
        let guesser: IpAddr = "192.0.2.1".parse().unwrap();
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        let first = record
            .reserve("a@example.com", Some(guesser), None)
            .unwrap();
        let second = record
            .reserve("b@example.com", Some(guesser), None)
            .unwrap();
        let busy = record.reserve("c@example.com", Some(guesser), None);
        assert!(matches!(
            busy,
            Err(AppError::RateLimited {
                retry_after: 1,
                limit: Limit::AddressInFlight
            })
        ));
        assert!(record.reserve("c@example.com", Some(other), None).is_ok());
        first.failed();
        let third = record
            .reserve("c@example.com", Some(guesser), None)
            .unwrap();
        drop((second, third));
    }

    #[test]
    fn an_ipv6_client_is_counted_by_its_64_bit_prefix() {
        let record = SignInFailures::new(0, 1, Duration::from_secs(900), 100, 100);
        let one: IpAddr = "2001:db8:1:2::1".parse().unwrap();
        let same_net: IpAddr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let other_net: IpAddr = "2001:db8:1:3::1".parse().unwrap();
        record
            .reserve("a@example.com", Some(one), None)
            .unwrap()
            .failed();
        assert!(refused(
            &record.reserve("a@example.com", Some(same_net), None),
            Limit::AddressAndEmail
        ));
        assert!(
            record
                .reserve("a@example.com", Some(other_net), None)
                .is_ok()
        );
    }

    #[test]
    fn the_record_never_holds_more_than_its_cap_and_forgets_the_oldest_first() {
        let record = SignInFailures::new(3, 0, Duration::from_secs(900), 64, 100);
        for n in 0..1000 {
            record
                .reserve(&format!("user{n}@example.com"), None, None)
                .unwrap()
                .failed();
            assert!(record.entries() <= 64, "{} entries", record.entries());
        }
        // The newest windows are kept.
        for _ in 0..2 {
            record
                .reserve("user999@example.com", None, None)
                .unwrap()
                .failed();
        }
        assert!(refused(
            &record.reserve("user999@example.com", None, None),
            Limit::Email
        ));
        // What one entry costs, for docs/SECURITY.md.
        let entry = std::mem::size_of::<(Key, Count)>();
        assert!(entry <= 80, "{entry} bytes an entry");
    }
}
