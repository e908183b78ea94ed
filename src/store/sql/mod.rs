//! The SQL both adapters share, one macro per area (identities, parties, invoices). Each statement is written once, in a dialect both PostgreSQL and
//! SQLite accept (`$n` placeholders, `returning`, `on conflict`); the few places where they differ
//! (row locks) are macro parameters. The macro expands the same code for each concrete backend,
//! which keeps sqlx's types concrete (no generic executor bounds) and the SQL in one place.

use super::{StoreError, StoreResult};
use sqlx::pool::PoolConnection;
use sqlx::{Database, Transaction};

/// A unit of work: a real transaction, or a plain pooled connection for reads.
pub(crate) enum Conn<DB: Database> {
    Tx(Transaction<'static, DB>),
    Plain(PoolConnection<DB>),
}

impl<DB: Database> Conn<DB> {
    pub(crate) fn get(&mut self) -> &mut DB::Connection {
        match self {
            Conn::Tx(tx) => tx,
            Conn::Plain(conn) => conn,
        }
    }

    pub(crate) async fn commit(self) -> StoreResult<()> {
        match self {
            Conn::Tx(tx) => tx.commit().await.map_err(classify_other),
            Conn::Plain(_) => Ok(()),
        }
    }
}

/// Constraint names the app layer may react to, as declared in the migrations.
pub(crate) const CONSTRAINTS: &[&str] = &[
    "orgs_name_key",
    "users_email_key",
    "users_one_bootstrap_per_org",
    "sessions_token_hash_key",
    "invitations_token_hash_key",
    "payment_destinations_idempotency_key",
    "payment_destinations_supersedes_key",
    "invoices_idempotency_key",
    "decisions_revision_key",
];

/// Errors that are not constraint violations: unreachable database or a bug.
pub(crate) fn classify_other(err: sqlx::Error) -> StoreError {
    match err {
        sqlx::Error::Io(_)
        | sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Tls(_) => StoreError::Unavailable(err),
        other => StoreError::Other(other),
    }
}

mod identity;
mod invoices;
mod parties;

pub(crate) use identity::impl_identity_tx;
pub(crate) use invoices::{impl_invoice_tx, invoice_list_filters, joined_invoice};
pub(crate) use parties::{impl_party_tx, scope_binds};

/// Whether every migration embedded in this binary has been applied.
pub(crate) fn migrations_current(migrator: &sqlx::migrate::Migrator, applied: &[(i64,)]) -> bool {
    migrator
        .iter()
        .all(|m| applied.iter().any(|(version,)| *version == m.version))
}
