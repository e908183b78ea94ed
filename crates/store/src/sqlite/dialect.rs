//! What SQLite says its own way: its clock as stored text, its errors as the store's.

use crate::error::{Constraint, StoreError};
use crate::sql::classify_other;

/// The database's clock in the text a bound `DateTime<Utc>` is stored as (sqlx: RFC 3339,
/// `+00:00`, fraction digits as needed). SQLite's has milliseconds, `.000` dropped: the text
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

/// A SQLite error as the store's: unique keys by constraint, busy or failing disks unavailable.
pub(super) fn map_err(err: sqlx::Error) -> StoreError {
    if let Some(db) = err.as_database_error() {
        if let Some(constraint) = constraint_from_message(db.message()) {
            return StoreError::Conflict(constraint);
        }
        // SQLITE_CONSTRAINT_FOREIGNKEY
        if db.code().as_deref() == Some("787") {
            return StoreError::ReferenceGone(err);
        }
        // Retryable by primary result code (the extended code's low byte): SQLITE_BUSY (5), LOCKED
        // (6), IOERR (10), FULL (13). Nothing was committed; the client may try again.
        let primary = db
            .code()
            .and_then(|c| c.parse::<i32>().ok())
            .map(|c| c & 0xff);
        if matches!(primary, Some(5 | 6 | 10 | 13)) {
            return StoreError::Unavailable(err);
        }
        // By the full code too (IOERR: 10 + 256·n): a full or failing disk is 503, not 500.
        if let Some(code) = db.code().and_then(|c| c.parse::<i64>().ok())
            && (code == 13 || code & 0xff == 10)
        {
            return StoreError::Unavailable(err);
        }
    }
    classify_other(err)
}
