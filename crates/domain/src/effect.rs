//! The claim protocol for effects on other systems (docs/contract/effects.md §3): what each
//! answer of a peer permits, for an *effectively once* effect. The rules that must never be wrong:
//!
//! - `Unknown` never authorises an execute or a finalisation;
//! - one attempt performs at most one execute;
//! - after `Absent` (from a real query of the peer), execute under the **same** key;
//! - a completed claim answers its stored response with no peer call;
//! - a different fingerprint under one key is terminal.

use chrono::{DateTime, Datelike, Duration, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// How long a completed claim is kept (its stored response answers replays), from completion.
pub const DEFAULT_RETENTION_DAYS: i64 = 30;
/// Days a claim may stay `processing` before it may be reaped (a peer down so long needs a human).
pub const DEFAULT_ABANDON_DAYS: i64 = 7;
/// No horizon below this: a live recovery point is never reaped by a misconfiguration.
pub const ABANDON_FLOOR_DAYS: i64 = 1;

/// Where a claim stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClaimState {
    /// Admitted; the peer may or may not have the effect. The recovery point.
    Processing,
    /// Finalised with the local change; the response is stored.
    Complete,
    /// Refused definitively, no record at the peer: closed; another try is a new operation version.
    Rejected,
}

impl ClaimState {
    pub const ALL: [ClaimState; 3] = [
        ClaimState::Processing,
        ClaimState::Complete,
        ClaimState::Rejected,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClaimState::Processing => "processing",
            ClaimState::Complete => "complete",
            ClaimState::Rejected => "rejected",
        }
    }

    pub fn parse(s: &str) -> Option<ClaimState> {
        ClaimState::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// The operation key of one effect (a version-8 UUID), derived from what it is about, never
/// random, so a retry after a reaped claim or a restored backup sends the peer the same key.
pub fn operation_key(org_id: Uuid, kind: &str, business_key: &str, version: u32) -> Uuid {
    let mut hasher = Sha256::new();
    hasher.update(b"tauros-effect-key-v1\n");
    hasher.update(org_id.as_bytes());
    for field in [kind, business_key] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    hasher.update(version.to_be_bytes());
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// Lowercase hex SHA-256 of a request's canonical bytes (everything that changes the effect).
pub fn fingerprint(canonical: &[u8]) -> String {
    crate::hex::lower(&Sha256::digest(canonical))
}

/// What admitting a claim found, and so what the attempt does first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admission {
    /// A new claim: execute.
    Execute,
    /// A processing claim for the same request: an earlier attempt may have reached the peer.
    Recover,
    /// A completed claim for the same request: its stored response, no peer call.
    Replay,
    /// The key already stands for another request: terminal, never executes.
    KeyReused,
    /// The claim under the key was closed as rejected: nothing to do under this version.
    Refused,
}

/// Decides admission from the claim found under the key (`None`: this attempt inserted it).
pub fn admit(existing: Option<(ClaimState, &str)>, fingerprint: &str) -> Admission {
    match existing {
        None => Admission::Execute,
        Some((_, theirs)) if !constant_time_eq(theirs.as_bytes(), fingerprint.as_bytes()) => {
            Admission::KeyReused
        }
        Some((ClaimState::Processing, _)) => Admission::Recover,
        Some((ClaimState::Complete, _)) => Admission::Replay,
        Some((ClaimState::Rejected, _)) => Admission::Refused,
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The answer of an issue involving no other system, recorded on the claim like a peer's.
pub fn local_issue_response(op_key: Uuid) -> serde_json::Value {
    serde_json::json!({ "issued_by": "tauros", "op_key": op_key })
}

/// What `execute` answered. Any error, timeout, panic or malformed answer is `Unknown`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Executed<T> {
    Done(T),
    /// A refusal ([`is_refusal_status`]); only a `recover` that finds no record confirms it.
    Rejected(String),
    Unknown,
}

/// The longest reason from a peer Tauros keeps (in characters).
pub const MAX_REASON_CHARS: usize = 500;

/// A peer's reason as stored: trimmed, controls as spaces, ≤ [`MAX_REASON_CHARS`], never empty.
pub fn bounded_reason(reason: &str) -> String {
    let cleaned: String = reason
        .trim()
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if cleaned.is_empty() {
        return "the peer refused the request without a reason".to_owned();
    }
    if cleaned.chars().count() <= MAX_REASON_CHARS {
        return cleaned;
    }
    let mut cut: String = cleaned.chars().take(MAX_REASON_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// Whether an HTTP status from `execute` is a definitive refusal: a 4xx other than 408, 409
/// (in flight), 425 and 429, each of which may mean "try again".
pub fn is_refusal_status(status: u16) -> bool {
    (400..500).contains(&status) && !matches!(status, 408 | 409 | 425 | 429)
}

/// What `recover` answered. `Absent` must come from a real query of the peer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Recovered<T> {
    Done(T),
    Absent,
    Unknown,
}

/// The next step of an attempt.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step<T> {
    Execute,
    Recover,
    /// Apply the local change with the peer's response, and complete the claim.
    Finalise(T),
    /// End the attempt; the claim stays `processing` and a later attempt recovers.
    Fail(EffectFailure),
    /// The peer refused definitively and holds no record: close the claim as rejected.
    Reject(String),
    /// The claim is older than the peer remembers keys, and the peer holds no record: it may
    /// have forgotten an effect it made, so nothing is executed automatically. A human decides.
    NeedsReview,
}

/// Why an attempt ended without finalising. All are retryable except `KeyReused`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EffectFailure {
    /// Neither execute nor recover could say whether the peer has the effect.
    #[error("the peer's outcome is unknown; a later attempt asks it again")]
    OutcomeUnknown,
    /// The peer reports no effect after this attempt executed: a second execute is not allowed.
    #[error(
        "the peer reports no effect after an execute whose answer was lost; a later attempt executes again under the same key"
    )]
    Unavailable,
    /// The operation key stands for another request (terminal).
    #[error("the operation key already stands for a different request")]
    KeyReused,
}

impl EffectFailure {
    /// A stable snake_case code.
    pub fn code(self) -> &'static str {
        match self {
            EffectFailure::OutcomeUnknown => "outcome_unknown",
            EffectFailure::Unavailable => "external_effect_unavailable",
            EffectFailure::KeyReused => "key_reused_with_different_request",
        }
    }

    /// Whether a later attempt may succeed.
    pub fn is_retryable(self) -> bool {
        self != EffectFailure::KeyReused
    }
}

/// One attempt's progress: whether it executed, the refusal it got, whether the claim is stale.
#[derive(Clone, Debug, Default)]
pub struct Attempt {
    executed: bool,
    refused: Option<String>,
    stale: bool,
}

impl Attempt {
    /// An attempt on a claim. `stale` ([`is_stale`], or re-admitted after a reap): an `Absent`
    /// proves nothing, so it stops at [`Step::NeedsReview`] instead of executing.
    pub fn on_claim(stale: bool) -> Attempt {
        Attempt {
            stale,
            ..Attempt::default()
        }
    }

    /// The first step after admission (`Replay`, `KeyReused` and `Refused` never reach the peer).
    pub fn start<T>(admission: Admission) -> Step<T> {
        match admission {
            Admission::Execute => Step::Execute,
            Admission::Recover => Step::Recover,
            Admission::Replay | Admission::KeyReused | Admission::Refused => {
                Step::Fail(EffectFailure::KeyReused)
            }
        }
    }

    /// Records that the attempt executes now; `false` if it already has (a bug: `Unavailable`).
    pub fn begin_execute(&mut self) -> bool {
        !std::mem::replace(&mut self.executed, true)
    }

    /// After `execute`: done finalises; anything else gets exactly one recover.
    pub fn after_execute<T>(&mut self, answer: Executed<T>) -> Step<T> {
        match answer {
            Executed::Done(response) => Step::Finalise(response),
            Executed::Rejected(reason) => {
                self.refused = Some(bounded_reason(&reason));
                Step::Recover
            }
            Executed::Unknown => Step::Recover,
        }
    }

    /// After `recover` (the caller compares a `Done` record with its request). `Absent` executes
    /// under the same key at most once per attempt; `Unknown` never executes nor finalises.
    pub fn after_recover<T>(&mut self, answer: Recovered<T>) -> Step<T> {
        match answer {
            Recovered::Done(response) => Step::Finalise(response),
            Recovered::Absent => match self.refused.take() {
                Some(reason) => Step::Reject(reason),
                None if self.stale => Step::NeedsReview,
                None if !self.executed => Step::Execute,
                None => Step::Fail(EffectFailure::Unavailable),
            },
            Recovered::Unknown => Step::Fail(EffectFailure::OutcomeUnknown),
        }
    }
}

/// Whether a claim is older than the peer remembers keys (`TAUROS_ISSUER_KEY_RETENTION`):
/// then the peer's `Absent` no longer proves it never made the effect.
pub fn is_stale(admitted_at: DateTime<Utc>, key_retention: Duration, now: DateTime<Utc>) -> bool {
    now - admitted_at > key_retention
}

/// The default of `TAUROS_ISSUER_KEY_RETENTION`: how long the peer is assumed to remember a key.
pub const DEFAULT_KEY_RETENTION_HOURS: i64 = 24;

/// Where issuing an approved invoice stands when not simply done (the view's `issuing.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum IssuingStatus {
    /// An issue job will run (or is running, or retrying).
    Pending,
    /// The destination is no longer active (`issue_blocked`).
    Blocked,
    /// The peer refused definitively (`issue_rejected`).
    Rejected,
    /// The peer holds another request under the key (`issue_conflict`).
    Conflict,
    /// A stale claim the peer holds nothing for (`issue_needs_review`).
    NeedsReview,
}

impl IssuingStatus {
    pub const ALL: [IssuingStatus; 5] = [
        IssuingStatus::Pending,
        IssuingStatus::Blocked,
        IssuingStatus::Rejected,
        IssuingStatus::Conflict,
        IssuingStatus::NeedsReview,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            IssuingStatus::Pending => "pending",
            IssuingStatus::Blocked => "blocked",
            IssuingStatus::Rejected => "rejected",
            IssuingStatus::Conflict => "conflict",
            IssuingStatus::NeedsReview => "needs_review",
        }
    }

    pub fn parse(s: &str) -> Option<IssuingStatus> {
        IssuingStatus::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Stopped for a human after numbering: nothing runs until an approver reissues or cancels.
    pub fn awaits_human(self) -> bool {
        matches!(
            self,
            IssuingStatus::Rejected | IssuingStatus::Conflict | IssuingStatus::NeedsReview
        )
    }
}

/// The fields of an issue request the peer's record must agree on.
pub const COMPARED_FIELDS: [&str; 4] = ["invoice_id", "number", "revision_id", "payload_hash"];

/// Each compared field where the peer's record under a key differs from the local request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Conflict {
    pub ours: serde_json::Value,
    pub theirs: serde_json::Value,
}

/// Compares the peer's `request` under a key with ours on [`COMPARED_FIELDS`]. An answer without
/// one cannot be compared and is accepted (the `local` issuer's, or a peer that does not echo).
pub fn compare_held(ours: &serde_json::Value, answer: &serde_json::Value) -> Result<(), Conflict> {
    let Some(held) = answer.get("request").filter(|r| r.is_object()) else {
        return Ok(());
    };
    let mut mine = serde_json::Map::new();
    let mut theirs = serde_json::Map::new();
    for field in COMPARED_FIELDS {
        let a = ours.get(field).unwrap_or(&serde_json::Value::Null);
        let b = held.get(field).unwrap_or(&serde_json::Value::Null);
        if a != b {
            mine.insert(field.to_owned(), a.clone());
            theirs.insert(field.to_owned(), b.clone());
        }
    }
    if mine.is_empty() {
        Ok(())
    } else {
        Err(Conflict {
            ours: mine.into(),
            theirs: theirs.into(),
        })
    }
}

/// When a completed claim completed at `completed_at` may be deleted: strictly after this.
pub fn retain_until(completed_at: DateTime<Utc>, retention: Duration) -> DateTime<Utc> {
    completed_at + retention
}

/// Whether cleanup may delete a completed claim at `now`: strictly past its retention.
pub fn cleanable(retain_until: DateTime<Utc>, now: DateTime<Utc>) -> bool {
    now > retain_until
}

/// The reaper's horizon, or why it is refused: never below the floor.
pub fn abandonment_horizon(days: i64) -> Result<Duration, String> {
    if days < ABANDON_FLOOR_DAYS {
        Err(format!(
            "the abandonment horizon must be at least {ABANDON_FLOOR_DAYS} day(s); {days} would \
             reap claims a retry may still need"
        ))
    } else {
        Ok(Duration::days(days))
    }
}

/// Whether the reaper may delete a `processing` claim: older than the horizon, past retention.
pub fn reapable(
    admitted_at: DateTime<Utc>,
    retain_until: DateTime<Utc>,
    horizon: Duration,
    now: DateTime<Utc>,
) -> bool {
    let horizon = horizon.max(Duration::days(ABANDON_FLOOR_DAYS));
    now - admitted_at > horizon && now > retain_until
}

/// An organisation's invoice number: `INV-{issue year}-{that year's gapless sequence}`.
pub fn invoice_number(issued: DateTime<Utc>, sequence: i64) -> String {
    format!("INV-{}-{sequence:06}", issued.year())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn the_operation_key_is_stable_and_names_everything_it_is_about() {
        let org = Uuid::now_v7();
        let key = operation_key(org, "invoice.issue", "inv-1", 1);
        assert_eq!(key, operation_key(org, "invoice.issue", "inv-1", 1));
        assert_eq!(key.get_version_num(), 8);
        for other in [
            operation_key(Uuid::now_v7(), "invoice.issue", "inv-1", 1),
            operation_key(org, "invoice.pay", "inv-1", 1),
            operation_key(org, "invoice.issue", "inv-2", 1),
            operation_key(org, "invoice.issue", "inv-1", 2),
            // Length-prefixed: moving a character between fields changes the key.
            operation_key(org, "invoice.issu", "einv-1", 1),
        ] {
            assert_ne!(key, other);
        }
    }

    #[test]
    fn admission_follows_the_claim_found() {
        let fp = fingerprint(b"{\"a\":1}");
        assert_eq!(admit(None, &fp), Admission::Execute);
        assert_eq!(
            admit(Some((ClaimState::Processing, &fp)), &fp),
            Admission::Recover
        );
        assert_eq!(
            admit(Some((ClaimState::Complete, &fp)), &fp),
            Admission::Replay
        );
        let other = fingerprint(b"{\"a\":2}");
        for state in ClaimState::ALL {
            assert_eq!(admit(Some((state, &other)), &fp), Admission::KeyReused);
        }
    }

    #[test]
    fn unknown_never_authorises_an_execute_or_a_finalisation() {
        let mut attempt = Attempt::default();
        assert!(attempt.begin_execute());
        assert_eq!(
            attempt.after_execute::<u8>(Executed::Unknown),
            Step::Recover
        );
        assert_eq!(
            attempt.after_recover::<u8>(Recovered::Unknown),
            Step::Fail(EffectFailure::OutcomeUnknown)
        );
        // Recover first (a retry of a processing claim): unknown fails, absent executes.
        let mut retry = Attempt::default();
        assert_eq!(
            retry.after_recover::<u8>(Recovered::Unknown),
            Step::Fail(EffectFailure::OutcomeUnknown)
        );
        assert_eq!(retry.after_recover::<u8>(Recovered::Absent), Step::Execute);
    }

    #[test]
    fn one_attempt_executes_at_most_once() {
        let mut attempt = Attempt::default();
        assert!(attempt.begin_execute());
        assert_eq!(
            attempt.after_execute::<u8>(Executed::Unknown),
            Step::Recover
        );
        assert_eq!(
            attempt.after_recover::<u8>(Recovered::Absent),
            Step::Fail(EffectFailure::Unavailable),
            "absent after this attempt's own execute: no second execute"
        );
        assert!(!attempt.begin_execute());
        assert_eq!(attempt.after_recover(Recovered::Done(7)), Step::Finalise(7));
    }

    #[test]
    fn a_refusal_counts_only_when_recovery_finds_no_record() {
        let mut attempt = Attempt::default();
        assert!(attempt.begin_execute());
        assert_eq!(
            attempt.after_execute::<u8>(Executed::Rejected("tax id missing".into())),
            Step::Recover
        );
        assert_eq!(
            attempt.after_recover::<u8>(Recovered::Absent),
            Step::Reject("tax id missing".into())
        );
        // A record after a refusal is the answer (compared by the caller); unknown fails.
        let mut held = Attempt::default();
        held.begin_execute();
        held.after_execute::<u8>(Executed::Rejected("no".into()));
        assert_eq!(held.after_recover(Recovered::Done(3)), Step::Finalise(3));
        let mut unknown = Attempt::default();
        unknown.begin_execute();
        unknown.after_execute::<u8>(Executed::Rejected("no".into()));
        assert_eq!(
            unknown.after_recover::<u8>(Recovered::Unknown),
            Step::Fail(EffectFailure::OutcomeUnknown)
        );
        for status in [400, 401, 403, 404, 410, 413, 422, 451] {
            assert!(is_refusal_status(status), "{status}");
        }
        for status in [200, 201, 408, 409, 425, 429, 500, 503] {
            assert!(!is_refusal_status(status), "{status}");
        }
        assert_eq!(
            bounded_reason("  "),
            "the peer refused the request without a reason"
        );
        assert_eq!(bounded_reason("a\nb"), "a b");
        assert_eq!(
            bounded_reason(&"x".repeat(900)).chars().count(),
            MAX_REASON_CHARS
        );
    }

    #[test]
    fn a_stale_claim_never_executes_on_a_bare_absence() {
        let mut stale = Attempt::on_claim(true);
        assert_eq!(
            stale.after_recover::<u8>(Recovered::Absent),
            Step::NeedsReview
        );
        assert_eq!(stale.after_recover(Recovered::Done(1)), Step::Finalise(1));
        let t = Utc::now();
        assert!(is_stale(t - Duration::hours(25), Duration::hours(24), t));
        assert!(!is_stale(t - Duration::hours(23), Duration::hours(24), t));
    }

    #[test]
    fn the_record_the_peer_holds_must_agree_with_the_request() {
        let ours = serde_json::json!({
            "invoice_id": "i", "number": "INV-2026-000002", "revision_id": "r",
            "payload_hash": "h", "canonical_payload": "{}"
        });
        let same = serde_json::json!({ "peer_id": "p", "request": ours });
        assert_eq!(compare_held(&ours, &same), Ok(()));
        assert_eq!(
            compare_held(&ours, &serde_json::json!({ "peer_id": "p" })),
            Ok(())
        );
        let mut theirs = ours.clone();
        theirs["number"] = "INV-2026-000001".into();
        let conflict = compare_held(&ours, &serde_json::json!({ "request": theirs })).unwrap_err();
        assert_eq!(
            conflict.ours,
            serde_json::json!({ "number": "INV-2026-000002" })
        );
        assert_eq!(
            conflict.theirs,
            serde_json::json!({ "number": "INV-2026-000001" })
        );
        assert_eq!(
            admit(Some((ClaimState::Rejected, "f")), "f"),
            Admission::Refused
        );
    }

    #[test]
    fn cleanup_is_strictly_after_retention_and_the_reaper_respects_its_floor() {
        let t = Utc::now();
        assert!(!cleanable(t, t));
        assert!(cleanable(t, t + Duration::microseconds(1)));
        assert!(abandonment_horizon(0).is_err());
        assert_eq!(abandonment_horizon(7).unwrap(), Duration::days(7));
        let admitted = t - Duration::days(8);
        assert!(reapable(
            admitted,
            t - Duration::days(1),
            Duration::days(7),
            t
        ));
        assert!(
            !reapable(admitted, t + Duration::days(1), Duration::days(7), t),
            "retention first"
        );
        assert!(!reapable(
            t - Duration::days(6),
            t - Duration::days(1),
            Duration::days(7),
            t
        ));
        // A horizon below the floor is raised to it.
        assert!(!reapable(
            t - Duration::hours(12),
            t - Duration::hours(1),
            Duration::hours(1),
            t
        ));
    }

    #[test]
    fn invoice_numbers_are_per_year_and_zero_padded() {
        let t = DateTime::parse_from_rfc3339("2026-03-01T00:00:00Z")
            .unwrap()
            .to_utc();
        assert_eq!(invoice_number(t, 42), "INV-2026-000042");
        assert_eq!(invoice_number(t, 1_234_567), "INV-2026-1234567");
    }

    proptest! {
        /// Whatever the peer answers, in any order: an attempt executes at most once, and it
        /// finalises only with a response the peer gave.
        #[test]
        fn no_answer_sequence_executes_twice_or_finalises_without_a_response(
            start_with_recover in any::<bool>(),
            answers in proptest::collection::vec(0u8..5, 1..12),
        ) {
            let mut attempt = Attempt::default();
            let mut step = if start_with_recover { Step::Recover } else { Step::<u8>::Execute };
            let mut executes = 0;
            for a in answers {
                step = match step {
                    Step::Execute => {
                        prop_assert!(attempt.begin_execute());
                        executes += 1;
                        attempt.after_execute(if a % 2 == 0 { Executed::Done(a) } else { Executed::Unknown })
                    }
                    Step::Recover => attempt.after_recover(match a % 3 {
                        0 => Recovered::Done(a),
                        1 => Recovered::Absent,
                        _ => Recovered::Unknown,
                    }),
                    done => done,
                };
            }
            prop_assert!(executes <= 1);
            if let Step::Finalise(r) = step {
                prop_assert!(r % 2 == 0 || r % 3 == 0);
            }
        }
    }
}
