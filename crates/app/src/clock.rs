//! The time every use case stamps its rows with.

use chrono::{DateTime, Duration, DurationRound, Utc};

/// The current time at the database's precision (microseconds), so both backends round-trip it.
pub(crate) fn now() -> DateTime<Utc> {
    let t = Utc::now();
    t.duration_trunc(Duration::microseconds(1)).unwrap_or(t)
}
