//! Authenticated reads in one statement: the credential left joined to the record, so a
//! credential without a record still comes back and a record without one never does. One
//! record is a flat join ([`CredentialSql::and_read`]); a list page a derived table joined.

use super::columns::{Columns, InOrder};
use super::invoices::{
    ISSUE_JOB, JOINED_INVOICE, ORG_SETTINGS, READ_COLUMNS, bind_list_filter, invoice_list_filters,
};
use super::{Backend, query_as};
use crate::error::StoreResult;
use crate::identity::KeyWithAgent;
use crate::invoices::{InvoiceFilter, InvoiceJoined};
use crate::presented::*;
use crate::query::Page;
use async_trait::async_trait;
use sqlx::{ColumnIndex, FromRow, Row};
use std::sync::LazyLock;
use uuid::Uuid;

/// How a statement reads one kind of credential: its `c_` columns, tables, org column, the
/// condition on `$1`, and the org settings (and join) a record read with it needs.
struct CredentialSql {
    columns: &'static str,
    tables: &'static str,
    org: &'static str,
    found_by: &'static str,
    settings: &'static str,
    settings_from: &'static str,
}

/// An API key (`$1`: its id) and its agent.
const KEY: CredentialSql = CredentialSql {
    columns: "a.id as c_agent_id, a.org_id as c_org_id, a.owner_id as c_owner_id,
     a.name as c_agent_name, a.capabilities as c_capabilities,
     a.created_at as c_agent_created_at, a.updated_at as c_agent_updated_at,
     k.id as c_key_id, k.key_hash as c_key_hash, k.created_at as c_key_created_at,
     k.expires_at as c_key_expires_at, k.revoked_at as c_key_revoked_at,
     k.last_used_at as c_key_last_used_at",
    tables: "api_keys k join agents a on a.org_id = k.org_id and a.id = k.agent_id",
    org: "k.org_id",
    found_by: "k.id = $1",
    // Not read: an agent's scope is its own invoices, whatever the org's settings
    // (docs/DECISIONS.md, "An agent's read does not read its org").
    settings: "null as four_eyes, null as shared_review",
    settings_from: "",
};

/// A session (`$1`: its token's hash) and its human.
const SESSION: CredentialSql = CredentialSql {
    columns: "s.id as c_session_id, s.org_id as c_org_id, s.user_id as c_user_id,
     s.token_hash as c_token_hash, s.created_at as c_session_created_at,
     s.expires_at as c_session_expires_at, u.email as c_email,
     u.email_normalized as c_email_normalized, u.role as c_role,
     u.password_hash as c_password_hash, u.is_bootstrap as c_is_bootstrap,
     u.created_at as c_user_created_at, u.updated_at as c_user_updated_at,
     u.deactivated_at as c_deactivated_at",
    tables: "sessions s join users u on u.org_id = s.org_id and u.id = s.user_id",
    org: "s.org_id",
    found_by: "s.token_hash = $1",
    settings: ORG_SETTINGS,
    settings_from: "join orgs o on o.id = s.org_id",
};

impl CredentialSql {
    /// The credential alone.
    fn select(&self) -> String {
        let CredentialSql {
            columns,
            tables,
            found_by,
            ..
        } = self;
        format!("select {columns} from {tables} where {found_by}")
    }

    /// The credential and the row of its org's read model that `record` picks, in one flat join
    /// (left, by the credential's own org column: SQLite has no `lateral`), with the org's
    /// settings where the credential's reads depend on them (a human's).
    fn and_read(&self, record: &str) -> String {
        let CredentialSql {
            columns,
            tables,
            org,
            found_by,
            settings,
            settings_from,
        } = self;
        format!(
            "select {columns}, {READ_COLUMNS}, {settings} from {tables} {settings_from} \
             left join invoice_reads v on v.org_id = {org} and {record} {ISSUE_JOB} \
             where {found_by}"
        )
    }
}

/// The organisation of the key bound at `p`, as a scalar subquery (evaluated once).
fn key_org(p: &str) -> String {
    format!("(select org_id from api_keys where id = {p})")
}

/// The agent of the key bound at `p`, as a scalar subquery (evaluated once).
fn key_agent(p: &str) -> String {
    format!("(select agent_id from api_keys where id = {p})")
}

/// An API key (`$1`) and the invoice `$2` of its org (the read model's key is (org_id, id)).
static INVOICE_BY_KEY: LazyLock<String> = LazyLock::new(|| KEY.and_read("v.invoice_id = $2"));

/// A session (`$1`) and the invoice `$2` of its org.
static INVOICE_BY_SESSION: LazyLock<String> =
    LazyLock::new(|| SESSION.and_read("v.invoice_id = $2"));

/// An API key (`$1`) and its agent's invoice under the idempotency key `$2`.
static INVOICE_BY_IDEMPOTENCY_KEY: LazyLock<String> =
    LazyLock::new(|| KEY.and_read("v.agent_id = k.agent_id and v.idempotency_key = $2"));

/// An API key (`$1`) and a page of its agent's invoices (`$2`: the key again, for the filters'
/// scope), a derived table left joined to the key so an empty page still returns it; the outer
/// order restores the page's, which a join does not promise to keep.
fn own_invoices(order: &str, after: &str) -> String {
    format!(
        "select c.*, j.* from ({}) c left join ({}{} \
         and ($7 is null or v.invoice_id {after} $7) order by v.invoice_id {order} limit $8) j \
         on 1 = 1 order by j.invoice_id {order}",
        KEY.select(),
        *JOINED_INVOICE,
        invoice_list_filters(&key_org("$2"), &key_agent("$2"), "$3"),
    )
}

static OWN_INVOICES_OLDEST_FIRST: LazyLock<String> = LazyLock::new(|| own_invoices("asc", ">"));
static OWN_INVOICES_NEWEST_FIRST: LazyLock<String> = LazyLock::new(|| own_invoices("desc", "<"));

#[async_trait]
impl<U: Backend> PresentedRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_joined_presented(
        &mut self,
        credential: Presented<'_>,
        id: Uuid,
    ) -> StoreResult<Option<(Presenter, Option<InvoiceJoined>)>> {
        let found = match credential {
            Presented::ApiKey(key_id) => query_as(INVOICE_BY_KEY.as_str())
                .bind(key_id)
                .bind(id)
                .fetch_optional(self)
                .await?
                .map(|Joined(key, item): Joined<PresentedKey>| (Presenter::from(key), item)),
            Presented::Session(hash) => query_as(INVOICE_BY_SESSION.as_str())
                .bind(hash)
                .bind(id)
                .fetch_optional(self)
                .await?
                .map(|Joined(session, item): Joined<PresentedSession>| {
                    (Presenter::from(session), item)
                }),
        };
        Ok(found)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn invoice_by_key_presented(
        &mut self,
        key_id: Uuid,
        idempotency_key: &str,
    ) -> StoreResult<Option<(KeyWithAgent, Option<InvoiceJoined>)>> {
        let row: Option<Joined<PresentedKey>> = query_as(INVOICE_BY_IDEMPOTENCY_KEY.as_str())
            .bind(key_id)
            .bind(idempotency_key)
            .fetch_optional(self)
            .await?;
        Ok(row.map(|Joined(key, item)| (KeyWithAgent::from(key), item)))
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn own_invoices_presented(
        &mut self,
        key_id: Uuid,
        f: &InvoiceFilter,
        page: Page,
    ) -> StoreResult<Option<(KeyWithAgent, Vec<InvoiceJoined>)>> {
        let sql = if f.oldest_first {
            OWN_INVOICES_OLDEST_FIRST.as_str()
        } else {
            OWN_INVOICES_NEWEST_FIRST.as_str()
        };
        // `$1` the key, `$2` the key again for the filters' scope, `$3` (an owner) null.
        let rows: Vec<Joined<PresentedKey>> = query_as(sql)
            .bind(key_id)
            .bind(key_id)
            .bind(Option::<Uuid>::None)
            .bind_with(|q| bind_list_filter(q, f, page))
            .fetch_all(self)
            .await?;
        let mut rows = rows.into_iter();
        let Some(Joined(key, first)) = rows.next() else {
            return Ok(None);
        };
        let items = first
            .into_iter()
            .chain(rows.filter_map(|Joined(_, item)| item))
            .collect();
        Ok(Some((KeyWithAgent::from(key), items)))
    }
}

/// A joined row: the credential's columns, then the record's if the left join found one.
struct Joined<C>(C, Option<InvoiceJoined>);

impl<'r, R, C> FromRow<'r, R> for Joined<C>
where
    R: Row,
    usize: ColumnIndex<R>,
    C: InOrder<'r, R>,
    InvoiceJoined: InOrder<'r, R>,
{
    fn from_row(row: &'r R) -> Result<Self, sqlx::Error> {
        let mut c = Columns::new(row);
        let credential = C::read(&mut c)?;
        let item = if c.is_null_next("id")? {
            None
        } else {
            Some(InvoiceJoined::read(&mut c)?)
        };
        if item.is_some() {
            c.end()?;
        }
        Ok(Joined(credential, item))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `bench/pg` file's first statement, without comments or psql commands, spaces collapsed.
    fn bench_statement(file: &str) -> String {
        let path = format!("{}/../../bench/pg/{file}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        let lines: Vec<&str> = text
            .lines()
            .filter(|l| !l.starts_with("--") && !l.starts_with('\\'))
            .collect();
        let joined = lines.join(" ");
        collapse(joined.split(';').next().unwrap_or(""))
    }

    fn collapse(sql: &str) -> String {
        let words: Vec<&str> = sql.split_whitespace().collect();
        words.join(" ").trim_end_matches(';').to_owned()
    }

    /// `bench/pg/get.sql`, `replay.sql` and `create.sql` open with this module's statements (ids
    /// as psql variables), so the bench's exact-statement bound measures what Tauros sends.
    #[test]
    fn the_benchs_exact_statements_are_the_ones_sent() {
        let cases: [(&str, &str, [&str; 2]); 3] = [
            ("get.sql", &INVOICE_BY_KEY, [":key_id", ":invoice"]),
            (
                "replay.sql",
                &INVOICE_BY_IDEMPOTENCY_KEY,
                [":key_id", ":ikey"],
            ),
            (
                "create.sql",
                &INVOICE_BY_IDEMPOTENCY_KEY,
                [":key_id", "'raw-' || :n"],
            ),
        ];
        for (file, sql, [first, second]) in cases {
            let sent = collapse(&sql.replace("$1", first).replace("$2", second));
            assert_eq!(bench_statement(file), sent, "bench/pg/{file}");
        }
    }
}
