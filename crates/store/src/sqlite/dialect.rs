//! What SQLite says its own way: the database's clock as stored text, and its errors as the
//! store's.

use crate::error::{Constraint, StoreError};
use crate::sql::classify_other;

/// The database's clock in the text a bound `DateTime<Utc>` is stored as (sqlx writes RFC 3339
/// with `+00:00` and as many fraction digits as needed: none, 3, 6 or 9). SQLite's clock has
/// milliseconds, so its time is `YYYY-MM-DDTHH:MM:SS.sss+00:00`, without `.000`: the same text
/// sqlx writes for that instant, so text comparisons with stored times order correctly.
pub(super) const NOW: &str = "replace(strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now'), '.000+', '+')";

/// [`NOW`] plus the milliseconds bound at `param` (a modifier such as `1.5 seconds`).
pub(super) fn now_plus_ms(param: &str) -> String {
    format!(
        "replace(strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', ({param} / 1000.0) || ' seconds'), \
         '.000+', '+')"
    )
}

/// SQLite names the columns, not the constraint: map them back to the constraint.
fn constraint_from_message(message: &str) -> Option<Constraint> {
    let columns = message.strip_prefix("UNIQUE constraint failed: ")?;
    Constraint::ALL
        .into_iter()
        .find(|c| c.sqlite_columns() == columns)
}

/// A SQLite error as the store's: a unique key by its constraint, a busy or failing disk as
/// unavailable (retryable).
pub(super) fn map_err(err: sqlx::Error) -> StoreError {
    if let Some(db) = err.as_database_error() {
        if let Some(constraint) = constraint_from_message(db.message()) {
            return StoreError::Conflict(constraint);
        }
        // SQLITE_CONSTRAINT_FOREIGNKEY
        if db.code().as_deref() == Some("787") {
            return StoreError::ReferenceGone(err);
        }
        // Retryable, by primary result code (the low byte of the extended code): SQLITE_BUSY
        // (5) and SQLITE_LOCKED (6) after the busy timeout, SQLITE_IOERR (10) and SQLITE_FULL
        // (13, a full disk). Nothing was committed; the client may try again later.
        let primary = db
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .map(|c| c & 0xff);
        if matches!(primary, Some(5 | 6 | 10 | 13)) {
            return StoreError::Unavailable(err);
        }
        // SQLITE_FULL (13) and the SQLITE_IOERR family (10, extended codes 10 + 256·n): the
        // disk is full or failing; nothing was written, the same request may be retried
        // once it has space again (503, not 500).
        if let Some(code) = db.code().and_then(|c| c.parse::<i64>().ok())
            && (code == 13 || code & 0xff == 10)
        {
            return StoreError::Unavailable(err);
        }
    }
    classify_other(err)
}
