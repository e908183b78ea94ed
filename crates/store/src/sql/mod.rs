//! The SQL both adapters share, one file per area, each implementing its port traits once for
//! every backend's unit (`impl<U: Backend> InvoiceRead for U`) in a dialect both accept. What
//! differs lives in [`Backend`] ([`stmt`]); why not sqlx's generic builders: docs/DECISIONS.md,
//! "Storage: SQL as named functions". Backend-only statements are in the adapters.

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

/// A duration as signed milliseconds for [`Backend::now_plus_ms`], saturating.
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

/// A domain enum read from its text column (`#[sqlx(try_from = "Stored<T>")]`): an unknown name
/// is a decode error here, so the app only handles the enum (the domain knows nothing of sqlx).
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

/// The conversions `try_from` calls, per stored enum (the orphan rule refuses a generic one).
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
