//! The job queue's rules (docs/contract/effects.md §1), which the store applies fenced by the
//! lease token.

use std::fmt;
use std::time::Duration;

use chrono::{DateTime, SecondsFormat, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// Where a job is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    /// Waiting to run now.
    Available,
    /// Waiting for the time it was enqueued for.
    Scheduled,
    /// Claimed by a worker under a lease.
    Running,
    /// An execution failed or was interrupted; waiting for its retry time.
    Retryable,
    /// Done; final.
    Completed,
    /// Failed for good (budget spent, or a permanent error); final unless an operator retries it.
    Discarded,
    /// Stopped by an operator before it ran; final unless an operator retries it.
    Cancelled,
}

impl JobState {
    /// Every state.
    pub const ALL: [JobState; 7] = [
        JobState::Available,
        JobState::Scheduled,
        JobState::Running,
        JobState::Retryable,
        JobState::Completed,
        JobState::Discarded,
        JobState::Cancelled,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            JobState::Available => "available",
            JobState::Scheduled => "scheduled",
            JobState::Running => "running",
            JobState::Retryable => "retryable",
            JobState::Completed => "completed",
            JobState::Discarded => "discarded",
            JobState::Cancelled => "cancelled",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<JobState> {
        JobState::ALL.into_iter().find(|state| state.as_str() == s)
    }

    /// Whether no worker will run the job again by itself (retention prunes these).
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            JobState::Completed | JobState::Discarded | JobState::Cancelled
        )
    }

    /// Whether a worker may claim the job once its `run_at` has come. The claim statements of
    /// both adapters list exactly these states.
    pub fn is_claimable(self) -> bool {
        matches!(
            self,
            JobState::Available | JobState::Scheduled | JobState::Retryable
        )
    }
}

impl fmt::Display for JobState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The first retry waits this long; each later one twice the one before.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Where the doubling stops unless a kind says otherwise.
pub const DEFAULT_BACKOFF_CAP: Duration = Duration::from_secs(60);
/// Counted attempts of a job unless its enqueuer says otherwise.
pub const DEFAULT_MAX_ATTEMPTS: i32 = 25;
/// The most attempts a job may be given.
pub const MAX_MAX_ATTEMPTS: i32 = 1000;
/// Interrupted executions (expired leases) after which a job is discarded, by default.
pub const DEFAULT_MAX_INTERRUPTIONS: i32 = 10;
/// The largest `args` a job may carry, as canonical JSON.
pub const MAX_ARGS_BYTES: usize = 64 * 1024;
/// The longest code a job's last error keeps.
pub const MAX_ERROR_CODE_CHARS: usize = 64;
/// The longest message a job's last error keeps.
pub const MAX_ERROR_MESSAGE_CHARS: usize = 500;

/// The delay after attempt `attempt` (1-based), before jitter: 1 s, 2 s, 4 s, … up to `cap`.
pub fn backoff(attempt: i32, cap: Duration) -> Duration {
    let cap_ms = millis(cap);
    // Branch before shifting: 2^40 ms is far beyond any cap, so larger exponents saturate.
    let exponent = attempt.saturating_sub(1).clamp(0, 40) as u32;
    let delay_ms = millis(BACKOFF_BASE).saturating_mul(1u64 << exponent);
    Duration::from_millis(delay_ms.min(cap_ms))
}

/// The most jitter added to `delay`, a quarter, so retries that failed together spread out.
pub fn jitter_bound(delay: Duration) -> Duration {
    Duration::from_millis(millis(delay) / 4)
}

/// The delay waited after attempt `attempt`: the backoff plus a jitter drawn from `random`.
pub fn retry_delay(attempt: i32, cap: Duration, random: u64) -> Duration {
    let delay = backoff(attempt, cap);
    let bound = millis(jitter_bound(delay));
    // The bound is at most a few hours in milliseconds, so the modulo's bias is negligible.
    delay + Duration::from_millis(random % (bound + 1))
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Adds a delay to a time, saturating far in the future instead of overflowing.
pub fn due_after(now: DateTime<Utc>, delay: Duration) -> DateTime<Utc> {
    chrono::Duration::from_std(delay)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// A job's budget as it stands when one of its executions ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// The counted attempt that just ran (1-based).
    pub attempt: i32,
    pub max_attempts: i32,
    /// Executions that ended by an expired lease so far.
    pub interruptions: i32,
}

/// What an ended execution leaves behind.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Next {
    /// `retryable` or `discarded`.
    pub state: JobState,
    /// The attempt the next execution counts as.
    pub attempt: i32,
    pub interruptions: i32,
    /// When a retry is due (the stored, jittered time); the settle time when discarded.
    pub run_at: DateTime<Utc>,
    pub error_code: String,
}

impl Next {
    /// Whether the job was discarded (final).
    pub fn discarded(&self) -> bool {
        self.state == JobState::Discarded
    }
}

/// How an execution failed, as its handler (or the runtime) reported it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// Worth another attempt while attempts remain (a timeout is one).
    Retryable,
    /// No attempt can succeed: discard now, whatever the budget.
    Permanent,
}

/// A counted failure: the next attempt after the backoff, or `discarded` when none remain.
pub fn after_failure(
    p: Progress,
    kind: FailureKind,
    code: &str,
    now: DateTime<Utc>,
    cap: Duration,
    random: u64,
) -> Next {
    if kind == FailureKind::Permanent || p.attempt >= p.max_attempts {
        return Next {
            state: JobState::Discarded,
            attempt: p.attempt,
            interruptions: p.interruptions,
            run_at: now,
            error_code: bounded_code(code),
        };
    }
    Next {
        state: JobState::Retryable,
        attempt: p.attempt + 1,
        interruptions: p.interruptions,
        run_at: due_after(now, retry_delay(p.attempt, cap, random)),
        error_code: bounded_code(code),
    }
}

/// Code of the last error an interrupted execution leaves.
pub const INTERRUPTED: &str = "interrupted";
/// Code of the last error when interruptions ran out.
pub const INTERRUPTED_LIMIT: &str = "interrupted_limit";

/// An execution whose lease expired: the same attempt again after its backoff, using none up,
/// until `max_interruptions` end a crash loop in `discarded`.
pub fn after_interruption(
    p: Progress,
    max_interruptions: i32,
    now: DateTime<Utc>,
    cap: Duration,
    random: u64,
) -> Next {
    let interruptions = p.interruptions.saturating_add(1);
    if interruptions >= max_interruptions.max(1) {
        return Next {
            state: JobState::Discarded,
            attempt: p.attempt,
            interruptions,
            run_at: now,
            error_code: INTERRUPTED_LIMIT.to_owned(),
        };
    }
    Next {
        state: JobState::Retryable,
        attempt: p.attempt,
        interruptions,
        run_at: due_after(now, retry_delay(p.attempt, cap, random)),
        error_code: INTERRUPTED.to_owned(),
    }
}

/// An operator's request a job's state does not allow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum JobMoveError {
    #[error(
        "the job is running; wait until it finishes (or its lease expires and it becomes \
         retryable), then try again"
    )]
    Running,
    #[error("the job already finished as {0}; it will not run again")]
    Finished(JobState),
}

impl crate::error::Coded for JobMoveError {
    fn code(&self) -> &'static str {
        match self {
            JobMoveError::Running => "job_running",
            JobMoveError::Finished(_) => "job_finished",
        }
    }
}

/// What an operator's retry does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Retry {
    /// Already available: nothing to write.
    Unchanged,
    /// Waiting for its time (scheduled, or retryable after a backoff): due now, same attempt.
    Expedite,
    /// Discarded or cancelled: a new cycle from attempt 1, interruptions forgotten.
    NewCycle,
}

/// An operator's retry of a job in `state`; a completed job never runs again (enqueue anew).
pub fn retry(state: JobState) -> Result<Retry, JobMoveError> {
    match state {
        JobState::Available => Ok(Retry::Unchanged),
        JobState::Scheduled | JobState::Retryable => Ok(Retry::Expedite),
        JobState::Discarded | JobState::Cancelled => Ok(Retry::NewCycle),
        JobState::Running => Err(JobMoveError::Running),
        JobState::Completed => Err(JobMoveError::Finished(state)),
    }
}

/// What an operator's cancel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cancel {
    /// Already cancelled: nothing to write.
    Unchanged,
    /// Waiting to run: it never will.
    Apply,
}

/// An operator's cancel of a job in `state`. A running job is not interrupted (its effect may
/// already have happened); a finished one has nothing left to cancel.
pub fn cancel(state: JobState) -> Result<Cancel, JobMoveError> {
    match state {
        JobState::Cancelled => Ok(Cancel::Unchanged),
        JobState::Available | JobState::Scheduled | JobState::Retryable => Ok(Cancel::Apply),
        JobState::Running => Err(JobMoveError::Running),
        JobState::Completed | JobState::Discarded => Err(JobMoveError::Finished(state)),
    }
}

/// The longest job kind, in bytes.
pub const MAX_KIND_CHARS: usize = 100;

/// Whether `kind` is a versioned job kind: dot-separated `[a-z0-9_]` segments ending in a
/// version (`invoice.issue.v1`), at most [`MAX_KIND_CHARS`] bytes.
pub fn kind_is_valid(kind: &str) -> bool {
    let segments: Vec<&str> = kind.split('.').collect();
    let Some((version, names)) = segments.split_last() else {
        return false;
    };
    let name_ok = |s: &&str| {
        s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
    };
    let version_ok = version
        .strip_prefix('v')
        .is_some_and(|n| !n.is_empty() && n.len() <= 6 && n.chars().all(|c| c.is_ascii_digit()));
    kind.len() <= MAX_KIND_CHARS && !names.is_empty() && names.iter().all(name_ok) && version_ok
}

/// Why `args` cannot be a job's arguments.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArgsError {
    #[error("args must be a JSON object")]
    NotAnObject,
    #[error("args must be at most 65536 bytes as JSON")]
    TooLarge,
}

impl crate::error::Coded for ArgsError {
    fn code(&self) -> &'static str {
        match self {
            ArgsError::NotAnObject => "invalid_type",
            ArgsError::TooLarge => "too_large",
        }
    }
}

/// The canonical JSON of `args` (what is stored and hashed), if they are a bounded object.
pub fn canonical_args(args: &Value) -> Result<String, ArgsError> {
    if !args.is_object() {
        return Err(ArgsError::NotAnObject);
    }
    let text = canonical_json(args);
    if text.len() > MAX_ARGS_BYTES {
        return Err(ArgsError::TooLarge);
    }
    Ok(text)
}

/// JSON with keys sorted at every level and no whitespace, so equal values have equal text.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(&mut out, value);
    out
}

fn write_canonical(out: &mut String, value: &Value) {
    match value {
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_by(|a, b| a.0.cmp(b.0));
            out.push('{');
            for (i, (key, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(key.clone()).to_string());
                out.push(':');
                write_canonical(out, item);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(out, item);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// What makes two submissions one job: under one submission id, equal replays, different conflicts.
#[derive(Clone, Copy, Debug)]
pub struct Definition<'a> {
    pub kind: &'a str,
    /// Canonical JSON (see [`canonical_args`]).
    pub args: &'a str,
    pub max_attempts: i32,
    /// The time it was enqueued for, when the enqueuer chose one.
    pub scheduled_at: Option<DateTime<Utc>>,
}

/// Lowercase hex SHA-256 of a definition, each field length-prefixed behind a versioned tag.
pub fn definition_hash(d: &Definition<'_>) -> String {
    let scheduled = d
        .scheduled_at
        .map(|t| t.to_rfc3339_opts(SecondsFormat::Micros, true))
        .unwrap_or_default();
    let max_attempts = d.max_attempts.to_string();
    let mut hasher = Sha256::new();
    hasher.update(b"tauros-job-definition-v1\n");
    for field in [d.kind, d.args, &max_attempts, &scheduled] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    crate::hex::lower(&hasher.finalize())
}

/// The job id a submission id stands for within an org and kind (a version-8 UUID of a tagged
/// SHA-256): the same submission always names the same job, so the unique key decides duplicates.
pub fn job_id_for_submission(org_id: Uuid, kind: &str, submission_id: &str) -> Uuid {
    let mut hasher = Sha256::new();
    hasher.update(b"tauros-job-id-v1\n");
    hasher.update(org_id.as_bytes());
    for field in [kind, submission_id] {
        hasher.update((field.len() as u64).to_be_bytes());
        hasher.update(field.as_bytes());
    }
    let digest = hasher.finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    uuid::Builder::from_custom_bytes(bytes).into_uuid()
}

/// A last error's code as stored: `[a-z0-9_]`, at most 64 characters, `error` if none remain.
pub fn bounded_code(code: &str) -> String {
    let kept: String = code
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
        .take(MAX_ERROR_CODE_CHARS)
        .collect();
    if kept.is_empty() {
        "error".to_owned()
    } else {
        kept
    }
}

/// A last error's message as stored: control characters dropped, at most 500 characters.
pub fn bounded_message(message: &str) -> String {
    message
        .chars()
        .filter(|c| !c.is_control())
        .take(MAX_ERROR_MESSAGE_CHARS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    const SECOND: u64 = 1000;

    fn ms(d: Duration) -> u64 {
        millis(d)
    }

    #[test]
    fn states_round_trip_and_partition() {
        for state in JobState::ALL {
            assert_eq!(JobState::parse(state.as_str()), Some(state));
            assert!(!(state.is_terminal() && state.is_claimable()), "{state}");
        }
        assert_eq!(JobState::parse("done"), None);
    }

    #[test]
    fn the_schedule_doubles_from_one_second_to_the_cap() {
        let cap = DEFAULT_BACKOFF_CAP;
        let delays: Vec<u64> = (1..=8).map(|n| ms(backoff(n, cap)) / SECOND).collect();
        assert_eq!(delays, [1, 2, 4, 8, 16, 32, 60, 60]);
        assert_eq!(ms(backoff(i32::MAX, cap)), 60 * SECOND);
        assert_eq!(ms(backoff(0, cap)), SECOND, "attempts start at 1");
        assert_eq!(ms(backoff(5, Duration::from_secs(3))), 3 * SECOND);
    }

    #[test]
    fn jitter_adds_at_most_a_quarter() {
        let cap = DEFAULT_BACKOFF_CAP;
        // The samples docs/JOBS.md (Retries) gives; at the cap, jitter still spreads.
        for (attempt, low, high) in [
            (1, 1000, 1250),
            (6, 32_000, 40_000),
            (7, 60_000, 75_000),
            (20, 60_000, 75_000),
        ] {
            assert_eq!(ms(retry_delay(attempt, cap, 0)), low);
            let bound = ms(jitter_bound(backoff(attempt, cap)));
            assert_eq!(ms(retry_delay(attempt, cap, bound)), high);
            assert_eq!(
                ms(retry_delay(attempt, cap, bound + 1)),
                low,
                "wraps around"
            );
        }
    }

    proptest! {
        #[test]
        fn every_delay_lies_within_its_bounds(
            attempt in -5i32..200,
            cap_ms in 0u64..3_600_000,
            random: u64,
        ) {
            let cap = Duration::from_millis(cap_ms);
            let base = backoff(attempt, cap);
            let delay = retry_delay(attempt, cap, random);
            prop_assert!(base <= cap);
            prop_assert!(base <= delay);
            prop_assert!(ms(delay) <= ms(base) + ms(base) / 4);
            prop_assert!(ms(delay) <= ms(cap) + ms(cap) / 4);
            prop_assert!(backoff(attempt, cap) <= backoff(attempt.saturating_add(1), cap));
        }

        /// Whatever the mix of failures and interruptions, attempts never exceed `max_attempts`,
        /// interruptions use none, and discarding happens exactly when it should.
        #[test]
        fn budgets_hold_for_any_sequence_of_outcomes(
            max_attempts in 1i32..8,
            max_interruptions in 1i32..8,
            outcomes in proptest::collection::vec(0u8..3, 1..40),
            random: u64,
        ) {
            let now = Utc::now();
            let mut p = Progress { attempt: 1, max_attempts, interruptions: 0 };
            let mut failures = 0;
            for outcome in outcomes {
                let next = match outcome {
                    0 => after_failure(p, FailureKind::Retryable, "boom", now, DEFAULT_BACKOFF_CAP, random),
                    1 => after_interruption(p, max_interruptions, now, DEFAULT_BACKOFF_CAP, random),
                    _ => after_failure(p, FailureKind::Permanent, "bad_args", now, DEFAULT_BACKOFF_CAP, random),
                };
                match outcome {
                    0 => {
                        failures += 1;
                        prop_assert_eq!(next.discarded(), failures == max_attempts);
                    }
                    1 => {
                        prop_assert_eq!(next.attempt, p.attempt, "an interruption keeps the attempt");
                        prop_assert_eq!(next.discarded(), next.interruptions == max_interruptions);
                    }
                    _ => prop_assert!(next.discarded()),
                }
                prop_assert!(next.attempt <= max_attempts);
                prop_assert!(next.interruptions <= max_interruptions);
                if next.discarded() {
                    prop_assert_eq!(next.run_at, now);
                    break;
                }
                prop_assert_eq!(next.state, JobState::Retryable);
                prop_assert!(next.run_at > now);
                p = Progress { attempt: next.attempt, max_attempts, interruptions: next.interruptions };
            }
        }

        #[test]
        fn canonical_json_ignores_key_order(keys in proptest::collection::btree_set("[a-z]{1,6}", 0..8)) {
            let forward: serde_json::Map<String, Value> =
                keys.iter().map(|k| (k.clone(), json!([k, {"z": 1, "a": k}]))).collect();
            let text = canonical_json(&Value::Object(forward.clone()));
            let reparsed: Value = serde_json::from_str(&text).unwrap();
            prop_assert_eq!(&reparsed, &Value::Object(forward));
            prop_assert_eq!(canonical_json(&reparsed), text);
        }
    }

    #[test]
    fn failures_use_the_budget_and_interruptions_do_not() {
        let now = Utc::now();
        let p = Progress {
            attempt: 2,
            max_attempts: 3,
            interruptions: 0,
        };
        let next = after_failure(
            p,
            FailureKind::Retryable,
            "http_500",
            now,
            DEFAULT_BACKOFF_CAP,
            0,
        );
        assert_eq!((next.state, next.attempt), (JobState::Retryable, 3));
        assert_eq!(next.run_at, now + chrono::Duration::seconds(2));
        let last = Progress { attempt: 3, ..p };
        let next = after_failure(
            last,
            FailureKind::Retryable,
            "http_500",
            now,
            DEFAULT_BACKOFF_CAP,
            0,
        );
        assert_eq!((next.state, next.attempt), (JobState::Discarded, 3));
        let next = after_interruption(last, 10, now, DEFAULT_BACKOFF_CAP, 0);
        assert_eq!(
            (next.state, next.attempt, next.interruptions),
            (JobState::Retryable, 3, 1)
        );
        assert_eq!(next.error_code, INTERRUPTED);
        let looping = Progress {
            interruptions: 9,
            ..last
        };
        let next = after_interruption(looping, 10, now, DEFAULT_BACKOFF_CAP, 0);
        assert_eq!((next.state, next.interruptions), (JobState::Discarded, 10));
        assert_eq!(next.error_code, INTERRUPTED_LIMIT);
    }

    #[test]
    fn operators_retry_and_cancel_by_state() {
        use JobState::*;
        let retries: Vec<_> = JobState::ALL.into_iter().map(retry).collect();
        assert_eq!(
            retries,
            [
                Ok(Retry::Unchanged),
                Ok(Retry::Expedite),
                Err(JobMoveError::Running),
                Ok(Retry::Expedite),
                Err(JobMoveError::Finished(Completed)),
                Ok(Retry::NewCycle),
                Ok(Retry::NewCycle),
            ]
        );
        let cancels: Vec<_> = JobState::ALL.into_iter().map(cancel).collect();
        assert_eq!(
            cancels,
            [
                Ok(Cancel::Apply),
                Ok(Cancel::Apply),
                Err(JobMoveError::Running),
                Ok(Cancel::Apply),
                Err(JobMoveError::Finished(Completed)),
                Err(JobMoveError::Finished(Discarded)),
                Ok(Cancel::Unchanged),
            ]
        );
    }

    #[test]
    fn kinds_are_versioned_names() {
        for good in [
            "invoice.issue.v1",
            "webhook.deliver.v12",
            "test.echo.v1",
            "a.v0",
        ] {
            assert!(kind_is_valid(good), "{good}");
        }
        for bad in [
            "",
            "v1",
            "invoice",
            "invoice.issue",
            "Invoice.issue.v1",
            "invoice..v1",
            "invoice.issue.v",
            "invoice.issue.v1x",
            "9lives.v1",
            "a b.v1",
        ] {
            assert!(!kind_is_valid(bad), "{bad}");
        }
        assert!(!kind_is_valid(&format!("{}.v1", "a".repeat(100))));
    }

    #[test]
    fn args_are_bounded_objects() {
        assert_eq!(canonical_args(&json!([1])), Err(ArgsError::NotAnObject));
        assert_eq!(
            canonical_args(&json!({"b": 1, "a": [true, null]})).unwrap(),
            r#"{"a":[true,null],"b":1}"#
        );
        let big = json!({"x": "y".repeat(MAX_ARGS_BYTES)});
        assert_eq!(canonical_args(&big), Err(ArgsError::TooLarge));
    }

    #[test]
    fn identity_is_deterministic_and_separated() {
        let org = Uuid::now_v7();
        let id = job_id_for_submission(org, "test.echo.v1", "event-1");
        assert_eq!(id, job_id_for_submission(org, "test.echo.v1", "event-1"));
        assert_eq!(id.get_version_num(), 8);
        assert_ne!(id, job_id_for_submission(org, "test.echo.v2", "event-1"));
        assert_ne!(
            id,
            job_id_for_submission(Uuid::now_v7(), "test.echo.v1", "event-1")
        );
        assert_ne!(
            job_id_for_submission(org, "a.v1", "bc"),
            job_id_for_submission(org, "a.v1b", "c")
        );
        let d = Definition {
            kind: "test.echo.v1",
            args: "{}",
            max_attempts: 3,
            scheduled_at: None,
        };
        assert_eq!(definition_hash(&d), definition_hash(&d));
        assert_ne!(
            definition_hash(&d),
            definition_hash(&Definition {
                max_attempts: 4,
                ..d
            })
        );
        assert_ne!(
            definition_hash(&d),
            definition_hash(&Definition {
                args: "{\"a\":1}",
                ..d
            })
        );
    }

    #[test]
    fn errors_are_bounded() {
        assert_eq!(bounded_code("HTTP 500!"), "500");
        assert_eq!(bounded_code("!!"), "error");
        assert_eq!(bounded_code(&"a".repeat(100)).len(), MAX_ERROR_CODE_CHARS);
        assert_eq!(bounded_message("a\nb"), "ab");
        assert_eq!(bounded_message(&"é".repeat(600)).chars().count(), 500);
    }
}
