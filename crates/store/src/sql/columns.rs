//! The widest rows, read by position: [`InvoiceJoined`] (38 columns), [`PresentedKey`] and
//! [`PresentedSession`]. sqlx's derived `FromRow` looks every column up by name, a twentieth
//! of a GET's cost (docs/PERFORMANCE.md "Design choices"); these are read in statement order,
//! each name still compared, so a statement and reader that disagree fail on the first row.
//! Types are checked in debug builds only: a release decodes the migrations compiled into it,
//! which readiness requires applied (`migrations_current`).

use super::{Stored, StoredOpt};
use crate::invoices::{InvoiceJoined, RevisionRow};
use crate::presented::{PresentedKey, PresentedSession};
use sqlx::postgres::PgRow;
use sqlx::sqlite::SqliteRow;
use sqlx::{Column, ColumnIndex, Decode, FromRow, Row, Type};
use tauros_domain::effect::IssuingStatus;
use tauros_domain::invoice::{Action, DecisionKind, InvoiceState, OrgSettings};
use tauros_domain::job::JobState;

/// A row's columns from a position on, one after another.
pub(crate) struct Columns<'r, R> {
    row: &'r R,
    at: usize,
}

impl<'r, R: Row> Columns<'r, R>
where
    usize: ColumnIndex<R>,
{
    pub(crate) fn new(row: &'r R) -> Self {
        Columns { row, at: 0 }
    }

    /// The column at the position, which must be named `name`, and the position after it.
    pub(crate) fn next<T>(&mut self, name: &str) -> Result<T, sqlx::Error>
    where
        T: Decode<'r, R::Database> + Type<R::Database>,
    {
        let at = self.named(self.at, name)?;
        self.at += 1;
        if cfg!(debug_assertions) {
            self.row.try_get(at)
        } else {
            self.row.try_get_unchecked(at)
        }
    }

    /// Whether the column at the position (named `name`) is null; the position stays.
    pub(crate) fn is_null_next(&self, name: &str) -> Result<bool, sqlx::Error> {
        let at = self.named(self.at, name)?;
        Ok(sqlx::ValueRef::is_null(&self.row.try_get_raw(at)?))
    }

    /// Every column was read: a statement with more columns than its reader knows is an error.
    pub(crate) fn end(&self) -> Result<(), sqlx::Error> {
        match self.row.columns().get(self.at) {
            None => Ok(()),
            Some(c) => Err(sqlx::Error::Decode(
                format!("column {} (`{}`) is not read", self.at, c.name()).into(),
            )),
        }
    }

    fn named(&self, at: usize, name: &str) -> Result<usize, sqlx::Error> {
        match self.row.columns().get(at) {
            Some(c) if c.name() == name => Ok(at),
            Some(c) => Err(sqlx::Error::ColumnNotFound(format!(
                "{name} (column {at} is `{}`)",
                c.name()
            ))),
            None => Err(sqlx::Error::ColumnNotFound(format!(
                "{name} (column {at}: the row has {})",
                self.row.len()
            ))),
        }
    }
}

/// A struct read by position from each backend's row (the readers below).
pub(crate) trait InOrder<'r, R>: Sized {
    fn read(c: &mut Columns<'r, R>) -> Result<Self, sqlx::Error>;
}

/// [`InOrder`] for `$ty` on both backends' rows by `$read`, expanded per row type (no bounds).
macro_rules! in_order {
    ($ty:ty, |$c:ident| $read:expr) => {
        in_order!(@rows $ty, $c, $read, PgRow, SqliteRow);
    };
    (@rows $ty:ty, $c:ident, $read:expr, $($row:ty),*) => {$(
        impl<'r> InOrder<'r, $row> for $ty {
            fn read($c: &mut Columns<'r, $row>) -> Result<Self, sqlx::Error> {
                Ok($read)
            }
        }
    )*};
}

// In `READ_COLUMNS`'s order: the read model's (migrations: `invoice_reads_source`), then the
// issue job's and the org's.
in_order!(InvoiceJoined, |c| InvoiceJoined {
    revision: RevisionRow {
        id: c.next("id")?,
        org_id: c.next("org_id")?,
        invoice_id: c.next("invoice_id")?,
        number: c.next("number")?,
        customer_id: c.next("customer_id")?,
        payment_destination_id: c.next("payment_destination_id")?,
        destination_network: c.next("destination_network")?,
        destination_address: c.next("destination_address")?,
        currency: c.next("currency")?,
        due_date: c.next("due_date")?,
        total_minor: c.next("total_minor")?,
        reasoning: c.next("reasoning")?,
        canonical_payload: c.next("canonical_payload")?,
        payload_hash: c.next("payload_hash")?,
        created_at: c.next("created_at")?,
    },
    agent_id: c.next("agent_id")?,
    idempotency_key: c.next("idempotency_key")?,
    state: c.next::<Stored<InvoiceState>>("state")?.into(),
    cancelled_by: c.next::<StoredOpt<Action>>("cancelled_by")?.into(),
    invoice_number: c.next("invoice_number")?,
    revision_count: c.next("revision_count")?,
    first_payload_hash: c.next("first_payload_hash")?,
    invoice_created_at: c.next("invoice_created_at")?,
    invoice_updated_at: c.next("invoice_updated_at")?,
    amount_paid_minor: c.next("amount_paid_minor")?,
    issuing_status: c.next::<StoredOpt<IssuingStatus>>("issuing_status")?.into(),
    issuing_reason: c.next("issuing_reason")?,
    issuing_job_id: c.next("issuing_job_id")?,
    agent_owner_id: c.next("agent_owner_id")?,
    last_decision: c.next::<StoredOpt<DecisionKind>>("last_decision")?.into(),
    last_decision_reason: c.next("last_decision_reason")?,
    last_decision_revision_id: c.next("last_decision_revision_id")?,
    last_decided_at: c.next("last_decided_at")?,
    issuing_attempts: c.next("issuing_attempts")?,
    issuing_job_state: c.next::<StoredOpt<JobState>>("issuing_job_state")?.into(),
    issuing_job_error: c.next("issuing_job_error")?,
    // Both or neither: the org's columns, or a key's nulls in their place.
    settings: match (c.next("four_eyes")?, c.next("shared_review")?) {
        (Some(four_eyes), Some(shared_review)) => Some(OrgSettings {
            four_eyes,
            shared_review,
        }),
        _ => None,
    },
});

// In `KEY`'s order.
in_order!(PresentedKey, |c| PresentedKey {
    c_agent_id: c.next("c_agent_id")?,
    c_org_id: c.next("c_org_id")?,
    c_owner_id: c.next("c_owner_id")?,
    c_agent_name: c.next("c_agent_name")?,
    c_capabilities: c.next("c_capabilities")?,
    c_agent_created_at: c.next("c_agent_created_at")?,
    c_agent_updated_at: c.next("c_agent_updated_at")?,
    c_key_id: c.next("c_key_id")?,
    c_key_hash: c.next("c_key_hash")?,
    c_key_created_at: c.next("c_key_created_at")?,
    c_key_expires_at: c.next("c_key_expires_at")?,
    c_key_revoked_at: c.next("c_key_revoked_at")?,
    c_key_last_used_at: c.next("c_key_last_used_at")?,
});

// In `SESSION`'s order.
in_order!(PresentedSession, |c| PresentedSession {
    c_session_id: c.next("c_session_id")?,
    c_org_id: c.next("c_org_id")?,
    c_user_id: c.next("c_user_id")?,
    c_token_hash: c.next("c_token_hash")?,
    c_session_created_at: c.next("c_session_created_at")?,
    c_session_expires_at: c.next("c_session_expires_at")?,
    c_email: c.next("c_email")?,
    c_email_normalized: c.next("c_email_normalized")?,
    c_role: c.next("c_role")?,
    c_password_hash: c.next("c_password_hash")?,
    c_is_bootstrap: c.next("c_is_bootstrap")?,
    c_user_created_at: c.next("c_user_created_at")?,
    c_user_updated_at: c.next("c_user_updated_at")?,
    c_deactivated_at: c.next("c_deactivated_at")?,
});

/// A statement whose row is one invoice alone (`READ_INVOICE`, the lists).
impl<'r, R: Row> FromRow<'r, R> for InvoiceJoined
where
    usize: ColumnIndex<R>,
    InvoiceJoined: InOrder<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        alone(row)
    }
}

/// A row that is one struct's columns, all of them.
fn alone<'r, R: Row, T: InOrder<'r, R>>(row: &'r R) -> Result<T, sqlx::Error>
where
    usize: ColumnIndex<R>,
{
    let mut c = Columns::new(row);
    let read = T::read(&mut c)?;
    c.end()?;
    Ok(read)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;
    use sqlx::sqlite::SqliteConnection;

    /// A key's columns as `KEY` lists them, `swap` exchanging two and `extra` appended.
    fn key_statement(swap: Option<(usize, usize)>, extra: &str) -> String {
        let mut columns = vec![
            "x'00000000000000000000000000000001' as c_agent_id",
            "x'00000000000000000000000000000002' as c_org_id",
            "x'00000000000000000000000000000003' as c_owner_id",
            "'bot' as c_agent_name",
            "'invoicing' as c_capabilities",
            "'2026-12-01T00:00:00Z' as c_agent_created_at",
            "'2026-12-01T00:00:00Z' as c_agent_updated_at",
            "x'00000000000000000000000000000004' as c_key_id",
            "x'0102' as c_key_hash",
            "'2026-12-01T00:00:00Z' as c_key_created_at",
            "'2027-12-01T00:00:00Z' as c_key_expires_at",
            "null as c_key_revoked_at",
            "null as c_key_last_used_at",
        ];
        if let Some((a, b)) = swap {
            columns.swap(a, b);
        }
        format!("select {}{extra}", columns.join(", "))
    }

    async fn read(sql: &str) -> Result<PresentedKey, sqlx::Error> {
        let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
        let row = sqlx::query(sqlx::AssertSqlSafe(sql))
            .fetch_one(&mut conn)
            .await
            .unwrap();
        alone(&row)
    }

    #[tokio::test]
    async fn columns_in_the_readers_order_decode() {
        let key = read(&key_statement(None, "")).await.unwrap();
        assert_eq!(key.c_org_id, uuid::Uuid::from_u128(2));
        assert_eq!(key.c_agent_name, "bot");
        assert_eq!(key.c_key_hash, vec![1, 2]);
        assert_eq!(key.c_key_revoked_at, None);
    }

    /// Two same-typed columns exchanged are refused by name, not decoded as each other.
    #[tokio::test]
    async fn a_column_out_of_order_is_an_error_naming_it() {
        let err = read(&key_statement(Some((1, 2)), "")).await.unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("c_org_id") && text.contains("`c_owner_id`"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn a_column_the_reader_does_not_know_is_an_error() {
        let err = read(&key_statement(None, ", 1 as added_later"))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("`added_later`"), "{err}");
    }

    #[tokio::test]
    async fn a_missing_column_is_an_error() {
        let sql = key_statement(None, "");
        let shorter = sql.rsplit_once(", ").unwrap().0;
        let err = read(shorter).await.unwrap_err();
        assert!(err.to_string().contains("c_key_last_used_at"), "{err}");
    }
}
