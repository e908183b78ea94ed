//! The SQL both adapters share. One file per area (identities, governance, parties, invoices,
//! settlement, claims, jobs, webhooks, presented reads) implements that area's port traits
//! once, for every backend's unit of work: `impl<U: Backend> InvoiceRead for U`. Each statement
//! is a named function (the trait method) or a named `const`/`static` text it uses, written
//! once in a dialect both PostgreSQL and SQLite accept (`$n` placeholders, `returning`,
//! `on conflict`).
//!
//! - [`stmt`]: how a statement is written (`query_as(SQL).bind(a).fetch_optional(self)`, the
//!   shape of sqlx's builders, its arguments as plain values) and [`Backend`], the sealed trait
//!   the two units of work implement: it runs a statement (binding the arguments, classifying
//!   the errors with the backend's `map_err`) and holds what differs between the backends as
//!   associated consts and functions: the row-lock suffixes ([`locked`], [`for_update`],
//!   [`for_share`]: empty on SQLite, whose single writer already serializes write transactions),
//!   `SKIP LOCKED`, the sanctioned reap, the job wake-up. Why not sqlx's builders generic over
//!   the database: `docs/DECISIONS.md`, "Storage: SQL as named functions".
//! - Backend-only statements (the job claim, `LISTEN/NOTIFY`) are in the adapters, not here.
//! - [`Stored`] / [`StoredOpt`]: text-stored domain enums, as rows decode them.

mod claims;
mod columns;
mod governance;
mod identity;
mod invoices;
mod jobs;
mod parties;
mod presented;
mod settlement;
pub(crate) mod stmt;
mod webhooks;

pub(crate) use stmt::{
    Backend, Decoded, FreeKey, Query, QueryAs, Stmt, Together, execute, fetch_all, fetch_optional,
    first_row, for_share, for_update, locked, query, query_as, query_scalar,
};

use crate::error::StoreError;
use sqlx::Database;
use tauros_domain::destination::DestinationState;
use tauros_domain::effect::IssuingStatus;
use tauros_domain::governance::{ChangeKind, ChangeState};
use tauros_domain::identity::{ActorKind, Interface, Role};
use tauros_domain::invoice::{Action, DecisionKind, InvoiceState};
use tauros_domain::job::JobState;
use tauros_domain::resolution::ResolveAction;
use tauros_domain::settlement::{PaymentState, PaymentStatus, Unmatched};

/// A duration as the signed milliseconds [`Backend::now_plus_ms`] adds to the database's now
/// (saturating: a duration of centuries is still far in the future).
pub(crate) fn millis(d: std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 2)
}

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

/// Whether every migration embedded in this binary has been applied.
pub(crate) fn migrations_current(migrator: &sqlx::migrate::Migrator, applied: &[(i64,)]) -> bool {
    migrator
        .iter()
        .all(|m| applied.iter().any(|(version,)| *version == m.version))
}

/// A domain enum read from its text column: rows name it in `#[sqlx(try_from = "Stored<T>")]`
/// (or `StoredOpt<T>` for a nullable column), so an unknown name is a decode error here and the
/// app only ever handles the enum; binds write `as_str()`. The domain crate knows nothing of
/// sqlx, so the decoding lives here, in these two wrappers.
pub struct Stored<T>(T);

/// [`Stored`] for a nullable column.
pub struct StoredOpt<T>(Option<T>);

/// A domain enum with a text name, as its `parse` reads it.
pub trait StoredText: Sized {
    fn from_text(text: &str) -> Option<Self>;
}

fn decode_text<'r, DB: Database, T: StoredText>(
    value: DB::ValueRef<'r>,
) -> Result<T, sqlx::error::BoxDynError>
where
    &'r str: sqlx::Decode<'r, DB>,
{
    let text = <&'r str as sqlx::Decode<'r, DB>>::decode(value)?;
    T::from_text(text).ok_or_else(|| {
        let name = std::any::type_name::<T>()
            .rsplit("::")
            .next()
            .unwrap_or("value");
        format!("unknown {name} `{text}`").into()
    })
}

impl<DB: Database, T> sqlx::Type<DB> for Stored<T>
where
    String: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <String as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <String as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<DB: Database, T> sqlx::Type<DB> for StoredOpt<T>
where
    String: sqlx::Type<DB>,
{
    fn type_info() -> DB::TypeInfo {
        <String as sqlx::Type<DB>>::type_info()
    }

    fn compatible(ty: &DB::TypeInfo) -> bool {
        <String as sqlx::Type<DB>>::compatible(ty)
    }
}

impl<'r, DB: Database, T: StoredText> sqlx::Decode<'r, DB> for Stored<T>
where
    &'r str: sqlx::Decode<'r, DB>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        decode_text::<DB, T>(value).map(Stored)
    }
}

impl<'r, DB: Database, T: StoredText> sqlx::Decode<'r, DB> for StoredOpt<T>
where
    &'r str: sqlx::Decode<'r, DB>,
{
    fn decode(value: DB::ValueRef<'r>) -> Result<Self, sqlx::error::BoxDynError> {
        if sqlx::ValueRef::is_null(&value) {
            return Ok(StoredOpt(None));
        }
        decode_text::<DB, T>(value).map(|v| StoredOpt(Some(v)))
    }
}

/// The conversions `#[sqlx(try_from = …)]` calls, one set per stored enum (the orphan rule
/// wants them per concrete type: `impl<T> From<Stored<T>> for T` is refused). No SQL, like
/// `stmt.rs`'s `arg_from!` (docs/DECISIONS.md, "Storage: SQL as named functions").
macro_rules! stored_as_text {
    ($($ty:ty),* $(,)?) => {$(
        impl StoredText for $ty {
            fn from_text(text: &str) -> Option<Self> {
                <$ty>::parse(text)
            }
        }

        impl From<Stored<$ty>> for $ty {
            fn from(stored: Stored<$ty>) -> $ty {
                stored.0
            }
        }

        impl From<StoredOpt<$ty>> for Option<$ty> {
            fn from(stored: StoredOpt<$ty>) -> Option<$ty> {
                stored.0
            }
        }
    )*};
}

stored_as_text!(
    IssuingStatus,
    InvoiceState,
    Action,
    DecisionKind,
    DestinationState,
    ChangeKind,
    ChangeState,
    Role,
    JobState,
    PaymentState,
    PaymentStatus,
    Unmatched,
    ResolveAction,
    ActorKind,
    Interface
);
