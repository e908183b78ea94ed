//! A statement as the shared SQL writes it: text, plain arguments ([`Arg`]) and the type it
//! decodes to, run on a [`Backend`]. Rust does not carry a trait's `where` clauses to its
//! users, so sqlx's bounds are written once here ([`bind_all`], [`fetch_optional`], …).

use crate::error::{StoreError, StoreResult};
use crate::query::Lock;
use async_trait::async_trait;
use chrono::{DateTime, NaiveDate, Utc};
use sqlx::error::BoxDynError;
use sqlx::{Arguments, AssertSqlSafe, Database, Encode, Executor, FromRow, IntoArguments, Type};
use std::borrow::Cow;
use std::marker::PhantomData;
use tauros_domain::visibility::Scope;
use uuid::Uuid;

/// The two backends' rows, named through `sqlx::Database`.
type PgRow = <sqlx::Postgres as Database>::Row;
type SqliteRow = <sqlx::Sqlite as Database>::Row;

/// Only the two adapters' units implement [`Backend`]; each says so next to its impl.
pub(crate) mod sealed {
    pub trait Sealed {}
}

/// An agent's idempotency key in an organisation, as a unit that writes alone found it free.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FreeKey {
    pub org_id: Uuid,
    pub agent_id: Uuid,
    pub key: String,
}

/// A backend's unit of work as the shared SQL sees it: where statements run, how errors are
/// classified, the few texts that differ. Implemented by the two adapters' units only; every
/// port trait is implemented once, for any `U: Backend`, in this module's area files.
#[async_trait]
pub trait Backend: Send + sealed::Sealed {
    /// Appended to a select that locks its rows for update (empty on SQLite: one writer).
    const FOR_UPDATE: &'static str;
    /// Appended to a select that locks the rows it returns against updates.
    const FOR_SHARE: &'static str;
    /// Appended to the selects of cleanup and reaping: pass over rows others hold.
    const SKIP_LOCKED: &'static str;
    /// Opens a sanctioned reap (the claims' delete guard reads it).
    const SANCTION_REAP: &'static str;
    /// Closes a sanctioned reap.
    const UNSANCTION_REAP: &'static str;
    /// The database's now, in the stored type and (SQLite) text format: leases and reaper horizons
    /// use it, never the application's clock (docs/JOBS.md, "Whose clock").
    const NOW: &'static str;

    /// [`Backend::NOW`] plus the signed milliseconds bound at `param`.
    fn now_plus_ms(param: &str) -> String;

    /// A subquery of the strings of the JSON array (text) bound at `param`, for `in (…)`.
    fn json_texts(param: &str) -> String;

    /// Classifies the backend's errors (constraint names, retryable codes).
    fn map_err(err: sqlx::Error) -> StoreError;

    /// Runs a statement, returning its first row, if any.
    async fn fetch_optional_row<O: Decoded>(&mut self, stmt: Stmt<'_>) -> StoreResult<Option<O>>;

    /// Runs a statement, returning every row.
    async fn fetch_all_rows<O: Decoded>(&mut self, stmt: Stmt<'_>) -> StoreResult<Vec<O>>;

    /// Runs a statement, returning how many rows it affected.
    async fn execute_stmt(&mut self, stmt: Stmt<'_>) -> StoreResult<u64>;

    /// Runs a statement for its effect alone. A backend may send it with the unit's next call or
    /// commit (SQLite's writer), its error then failing that call and the unit for good, so a
    /// statement whose error its caller answers (a conflict it tells apart) never runs here.
    async fn execute_later(&mut self, stmt: Stmt<'_>) -> StoreResult<()> {
        self.execute_stmt(stmt).await.map(drop)
    }

    /// Whether this unit writes alone until it ends (SQLite): a create's key found free with its
    /// first reads stays free, so its insert needs no conflict check and may run later.
    const WRITES_ALONE: bool = false;

    /// Notes that this unit found the agent's idempotency key free ([`Backend::WRITES_ALONE`]).
    fn key_found_free(&mut self, _key: FreeKey) {}

    /// Whether this unit found the key free before (and so may insert it without a check).
    fn key_is_free(&self, _key: &FreeKey) -> bool {
        false
    }

    /// A row as this backend returns it, before [`Backend::decode`].
    type Row: Send;

    /// Decodes a row of [`Backend::fetch_first_rows`] as `O`.
    fn decode<O: Decoded>(row: &Self::Row) -> StoreResult<O>;

    /// Runs selects in order, each one's first row ([`Together`]); SQLite in one hand-off.
    async fn fetch_first_rows(
        &mut self,
        stmts: Vec<Stmt<'_>>,
    ) -> StoreResult<Vec<Option<Self::Row>>>;

    /// Wakes idle workers once this unit's enqueues are committed.
    async fn wake_workers(&mut self) -> StoreResult<()>;
}

/// A row type both backends decode.
pub trait Decoded:
    for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin + 'static
{
}

impl<T> Decoded for T where
    T: for<'r> FromRow<'r, PgRow> + for<'r> FromRow<'r, SqliteRow> + Send + Unpin + 'static
{
}

/// One bound argument; an `Option` binds as the value or a typed null.
#[derive(Clone, Copy, Debug)]
pub enum Arg<'a> {
    Uuid(Option<Uuid>),
    Text(Option<&'a str>),
    Int(Option<i32>),
    BigInt(Option<i64>),
    Bool(Option<bool>),
    Time(Option<DateTime<Utc>>),
    Date(Option<NaiveDate>),
    Bytes(Option<&'a [u8]>),
}

/// `From` for each type an [`Arg`] carries, and for its `Option` (a typed null).
macro_rules! arg_from {
    ($($ty:ty => $variant:ident),* $(,)?) => {$(
        impl<'a> From<$ty> for Arg<'a> {
            fn from(value: $ty) -> Arg<'a> {
                Arg::$variant(Some(value))
            }
        }

        impl<'a> From<Option<$ty>> for Arg<'a> {
            fn from(value: Option<$ty>) -> Arg<'a> {
                Arg::$variant(value)
            }
        }
    )*};
}

arg_from!(
    Uuid => Uuid,
    &'a str => Text,
    i32 => Int,
    i64 => BigInt,
    bool => Bool,
    DateTime<Utc> => Time,
    NaiveDate => Date,
    &'a [u8] => Bytes,
);

impl<'a> From<&'a String> for Arg<'a> {
    fn from(value: &'a String) -> Arg<'a> {
        Arg::Text(Some(value.as_str()))
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(value: &'a Option<String>) -> Arg<'a> {
        Arg::Text(value.as_deref())
    }
}

impl<'a> From<&'a Vec<u8>> for Arg<'a> {
    fn from(value: &'a Vec<u8>) -> Arg<'a> {
        Arg::Bytes(Some(value.as_slice()))
    }
}

impl<'a> From<&'a Option<Vec<u8>>> for Arg<'a> {
    fn from(value: &'a Option<Vec<u8>>) -> Arg<'a> {
        Arg::Bytes(value.as_deref())
    }
}

/// A statement's text and arguments.
#[derive(Debug)]
pub struct Stmt<'a> {
    sql: Cow<'static, str>,
    args: Vec<Arg<'a>>,
}

/// A statement that decodes each row as `O`.
#[must_use = "a statement does nothing until it runs"]
pub struct QueryAs<'a, O> {
    stmt: Stmt<'a>,
    output: PhantomData<fn() -> O>,
}

/// A statement that decodes the first column of each row as `O`.
#[must_use = "a statement does nothing until it runs"]
pub struct QueryScalar<'a, O> {
    stmt: Stmt<'a>,
    output: PhantomData<fn() -> O>,
}

/// A statement run for its effect.
#[must_use = "a statement does nothing until it runs"]
pub struct Query<'a> {
    stmt: Stmt<'a>,
}

/// What an executed statement did.
pub struct Done {
    rows_affected: u64,
}

impl Done {
    pub fn rows_affected(&self) -> u64 {
        self.rows_affected
    }
}

fn stmt<'a>(sql: impl Into<Cow<'static, str>>) -> Stmt<'a> {
    Stmt {
        sql: sql.into(),
        args: Vec::new(),
    }
}

/// A statement whose rows decode as `O`.
pub fn query_as<'a, O>(sql: impl Into<Cow<'static, str>>) -> QueryAs<'a, O> {
    QueryAs {
        stmt: stmt(sql),
        output: PhantomData,
    }
}

/// A statement whose first column decodes as `O`.
pub fn query_scalar<'a, O>(sql: impl Into<Cow<'static, str>>) -> QueryScalar<'a, O> {
    QueryScalar {
        stmt: stmt(sql),
        output: PhantomData,
    }
}

/// A statement run for its effect.
pub fn query<'a>(sql: impl Into<Cow<'static, str>>) -> Query<'a> {
    Query { stmt: stmt(sql) }
}

/// `select` with the backend's row lock for `lock` appended.
pub fn locked<U: Backend>(lock: Lock, select: &'static str) -> Cow<'static, str> {
    match lock {
        Lock::Share => for_share::<U>(select),
        Lock::Update => for_update::<U>(select),
    }
}

/// `select` with the backend's `for update` appended.
pub fn for_update<U: Backend>(select: &'static str) -> Cow<'static, str> {
    suffixed(select, U::FOR_UPDATE)
}

/// `select` with the backend's `for share` appended.
pub fn for_share<U: Backend>(select: &'static str) -> Cow<'static, str> {
    suffixed(select, U::FOR_SHARE)
}

fn suffixed(sql: &'static str, suffix: &'static str) -> Cow<'static, str> {
    if suffix.is_empty() {
        Cow::Borrowed(sql)
    } else {
        Cow::Owned(format!("{sql}{suffix}"))
    }
}

impl<'a> Stmt<'a> {
    fn push(mut self, arg: impl Into<Arg<'a>>) -> Self {
        self.args.push(arg.into());
        self
    }

    /// The text and the arguments, for an adapter that sends several statements in one call.
    pub(crate) fn into_parts(self) -> (Cow<'static, str>, Vec<Arg<'a>>) {
        (self.sql, self.args)
    }
}

impl<'a, O> QueryAs<'a, O> {
    pub fn bind(self, arg: impl Into<Arg<'a>>) -> Self {
        QueryAs {
            stmt: self.stmt.push(arg),
            output: PhantomData,
        }
    }

    /// Binds what a helper binds (a bind chain several statements share).
    pub fn bind_with(self, bind: impl FnOnce(Self) -> Self) -> Self {
        bind(self)
    }

    /// Binds the org, the one agent and the one owner of `scope` as the next three (null widens).
    pub fn bind_scope(self, org_id: Uuid, scope: Scope) -> Self {
        let (agent, owner) = match scope {
            Scope::Agent(id) => (Some(id), None),
            Scope::Owner(id) => (None, Some(id)),
            Scope::Org => (None, None),
        };
        self.bind(org_id).bind(agent).bind(owner)
    }
}

impl<'a, O: Decoded> QueryAs<'a, O> {
    /// Adds this select to `together`: its first row is read with the others'.
    pub fn along(self, together: &mut Together<'a>) {
        together.stmts.push(self.stmt);
    }

    pub async fn fetch_optional<U: Backend>(self, unit: &mut U) -> StoreResult<Option<O>> {
        unit.fetch_optional_row(self.stmt).await
    }

    pub async fn fetch_all<U: Backend>(self, unit: &mut U) -> StoreResult<Vec<O>> {
        unit.fetch_all_rows(self.stmt).await
    }

    pub async fn fetch_one<U: Backend>(self, unit: &mut U) -> StoreResult<O> {
        unit.fetch_optional_row(self.stmt)
            .await?
            .ok_or_else(|| U::map_err(sqlx::Error::RowNotFound))
    }
}

impl<'a, O> QueryScalar<'a, O>
where
    (O,): Decoded,
{
    pub fn bind(self, arg: impl Into<Arg<'a>>) -> Self {
        QueryScalar {
            stmt: self.stmt.push(arg),
            output: PhantomData,
        }
    }

    pub async fn fetch_optional<U: Backend>(self, unit: &mut U) -> StoreResult<Option<O>> {
        let row: Option<(O,)> = unit.fetch_optional_row(self.stmt).await?;
        Ok(row.map(|(value,)| value))
    }

    pub async fn fetch_one<U: Backend>(self, unit: &mut U) -> StoreResult<O> {
        self.fetch_optional(unit)
            .await?
            .ok_or_else(|| U::map_err(sqlx::Error::RowNotFound))
    }
}

impl<'a> Query<'a> {
    pub fn bind(self, arg: impl Into<Arg<'a>>) -> Self {
        Query {
            stmt: self.stmt.push(arg),
        }
    }

    /// Binds what a helper binds (a bind chain several statements share).
    pub fn bind_with(self, bind: impl FnOnce(Self) -> Self) -> Self {
        bind(self)
    }

    pub async fn execute<U: Backend>(self, unit: &mut U) -> StoreResult<Done> {
        let rows_affected = unit.execute_stmt(self.stmt).await?;
        Ok(Done { rows_affected })
    }

    #[cfg(test)]
    pub(crate) fn into_stmt(self) -> Stmt<'a> {
        self.stmt
    }

    /// Runs the statement for its effect alone, possibly with the unit's next call
    /// ([`Backend::execute_later`]): for an insert whose failure only ever fails the unit.
    pub async fn execute_later<U: Backend>(self, unit: &mut U) -> StoreResult<()> {
        unit.execute_later(self.stmt).await
    }
}

/// Selects whose first rows are read together ([`Backend::fetch_first_rows`]), in order.
#[derive(Default)]
pub struct Together<'a> {
    stmts: Vec<Stmt<'a>>,
}

/// The first rows of [`Together`]'s selects, in the order they were added.
pub struct Firsts<U: Backend> {
    rows: std::vec::IntoIter<Option<U::Row>>,
}

impl<'a> Together<'a> {
    pub async fn fetch<U: Backend>(self, unit: &mut U) -> StoreResult<Firsts<U>> {
        let expected = self.stmts.len();
        let rows = unit.fetch_first_rows(self.stmts).await?;
        if rows.len() != expected {
            return Err(U::map_err(sqlx::Error::Protocol(format!(
                "{expected} selects read together answered {} times",
                rows.len()
            ))));
        }
        Ok(Firsts {
            rows: rows.into_iter(),
        })
    }
}

impl<U: Backend> Firsts<U> {
    /// The next select's first row, decoded as `O` (its statement's row type).
    pub fn next<O: Decoded>(&mut self) -> StoreResult<Option<O>> {
        match self.rows.next() {
            Some(row) => row.as_ref().map(U::decode).transpose(),
            None => Err(U::map_err(sqlx::Error::Protocol(
                "more rows taken than selects read together".into(),
            ))),
        }
    }
}

// What the adapters call: sqlx's builders, with every bound the statements need written once.

/// A database that binds every [`Arg`]: its adapter's statements are built here.
pub trait Binds<'q>: Database {
    /// sqlx's statement for `stmt`, its arguments bound in order.
    fn bind_all(
        stmt: Stmt<'q>,
    ) -> Result<sqlx::query::Query<'q, Self, Self::Arguments>, sqlx::Error>;

    /// Appends `args` to `to`, in order (SQLite's writer puts several statements' in one list).
    fn add_all(to: &mut Self::Arguments, args: Vec<Arg<'q>>) -> Result<(), BoxDynError>;
}

impl<'q, DB> Binds<'q> for DB
where
    DB: Database,
    DB::Arguments: IntoArguments<DB>,
    Option<Uuid>: Encode<'q, DB> + Type<DB>,
    Option<&'q str>: Encode<'q, DB> + Type<DB>,
    Option<i32>: Encode<'q, DB> + Type<DB>,
    Option<i64>: Encode<'q, DB> + Type<DB>,
    Option<bool>: Encode<'q, DB> + Type<DB>,
    Option<DateTime<Utc>>: Encode<'q, DB> + Type<DB>,
    Option<NaiveDate>: Encode<'q, DB> + Type<DB>,
    Option<&'q [u8]>: Encode<'q, DB> + Type<DB>,
{
    fn bind_all(stmt: Stmt<'q>) -> Result<sqlx::query::Query<'q, DB, DB::Arguments>, sqlx::Error> {
        let mut arguments = DB::Arguments::default();
        Self::add_all(&mut arguments, stmt.args).map_err(sqlx::Error::Encode)?;
        Ok(match stmt.sql {
            Cow::Borrowed(sql) => sqlx::query_with(sql, arguments),
            Cow::Owned(sql) => sqlx::query_with(AssertSqlSafe(sql), arguments),
        })
    }

    fn add_all(to: &mut DB::Arguments, args: Vec<Arg<'q>>) -> Result<(), BoxDynError> {
        for arg in args {
            match arg {
                Arg::Uuid(v) => to.add(v),
                Arg::Text(v) => to.add(v),
                Arg::Int(v) => to.add(v),
                Arg::BigInt(v) => to.add(v),
                Arg::Bool(v) => to.add(v),
                Arg::Time(v) => to.add(v),
                Arg::Date(v) => to.add(v),
                Arg::Bytes(v) => to.add(v),
            }?;
        }
        Ok(())
    }
}

/// Runs `stmt` on `conn`, decoding its first row, if any, as `O`.
pub async fn fetch_optional<'q, 'c, DB, O>(
    conn: impl Executor<'c, Database = DB>,
    stmt: Stmt<'q>,
) -> Result<Option<O>, sqlx::Error>
where
    DB: Binds<'q>,
    DB::Arguments: IntoArguments<DB>,
    O: for<'r> FromRow<'r, DB::Row>,
{
    let row = first_row(conn, stmt).await?;
    row.map(|row| O::from_row(&row)).transpose()
}

/// Runs `stmt` on `conn`, answering its first row, if any, undecoded.
pub async fn first_row<'q, 'c, DB>(
    conn: impl Executor<'c, Database = DB>,
    stmt: Stmt<'q>,
) -> Result<Option<DB::Row>, sqlx::Error>
where
    DB: Binds<'q>,
    DB::Arguments: IntoArguments<DB>,
{
    conn.fetch_optional(DB::bind_all(stmt)?).await
}

/// Runs `stmt` on `conn`, decoding every row as `O`.
pub async fn fetch_all<'q, 'c, DB, O>(
    conn: impl Executor<'c, Database = DB>,
    stmt: Stmt<'q>,
) -> Result<Vec<O>, sqlx::Error>
where
    DB: Binds<'q>,
    DB::Arguments: IntoArguments<DB>,
    O: for<'r> FromRow<'r, DB::Row>,
{
    let rows = conn.fetch_all(DB::bind_all(stmt)?).await?;
    rows.iter().map(|row| O::from_row(row)).collect()
}

/// Runs `stmt` on `conn`, returning how many rows it affected.
pub async fn execute<'q, 'c, DB>(
    conn: impl Executor<'c, Database = DB>,
    stmt: Stmt<'q>,
) -> Result<u64, sqlx::Error>
where
    DB: Binds<'q>,
    DB::Arguments: IntoArguments<DB>,
    DB::QueryResult: RowsAffected,
{
    let done = conn.execute(DB::bind_all(stmt)?).await?;
    Ok(done.rows_affected())
}

/// A result's affected row count (each adapter implements it for its own result type).
pub trait RowsAffected {
    fn rows_affected(&self) -> u64;
}
