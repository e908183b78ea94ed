//! Authenticated reads in one statement: the credential (as a one-row derived table `c`) left
//! joined to the record, so a credential without a record still comes back, and a record
//! without a credential never does.

/// An API key (`$1`: its id) and its agent, under `c_` names.
macro_rules! presented_key {
    () => {
        "select a.id as c_agent_id, a.org_id as c_org_id, a.owner_id as c_owner_id,
             a.name as c_agent_name, a.capabilities as c_capabilities,
             a.created_at as c_agent_created_at, a.updated_at as c_agent_updated_at,
             k.id as c_key_id, k.key_hash as c_key_hash, k.created_at as c_key_created_at,
             k.expires_at as c_key_expires_at, k.revoked_at as c_key_revoked_at,
             k.last_used_at as c_key_last_used_at
         from api_keys k join agents a on a.org_id = k.org_id and a.id = k.agent_id
         where k.id = $1"
    };
}

/// A session (`$1`: its token's hash) and its human, under `c_` names.
macro_rules! presented_session {
    () => {
        "select s.id as c_session_id, s.org_id as c_org_id, s.user_id as c_user_id,
             s.token_hash as c_token_hash, s.created_at as c_session_created_at,
             s.expires_at as c_session_expires_at, u.email as c_email,
             u.email_normalized as c_email_normalized, u.role as c_role,
             u.password_hash as c_password_hash, u.is_bootstrap as c_is_bootstrap,
             u.created_at as c_user_created_at, u.updated_at as c_user_updated_at,
             u.deactivated_at as c_deactivated_at
         from sessions s join users u on u.org_id = s.org_id and u.id = s.user_id
         where s.token_hash = $1"
    };
}

/// The organisation of the key bound at `$p`, as a scalar subquery (evaluated once).
macro_rules! key_org {
    ($p:literal) => {
        concat!("(select org_id from api_keys where id = ", $p, ")")
    };
}

/// The agent of the key bound at `$p`, as a scalar subquery (evaluated once).
macro_rules! key_agent {
    ($p:literal) => {
        concat!("(select agent_id from api_keys where id = ", $p, ")")
    };
}

/// Implements `PresentedRead` for one backend's unit of work `$unit`.
macro_rules! impl_presented_store {
    ($unit:ty, map_err = $map_err:path) => {
        const _: () = {
            use ::uuid::Uuid;
            use $crate::presented::*;
            use $crate::sql::presented::{row_item, row_key};
            use $crate::{InvoiceFilter, InvoiceJoined, KeyWithAgent, Page, StoreResult};

            #[::async_trait::async_trait]
            impl PresentedRead for $unit {
                #[::tracing::instrument(level = "debug", skip_all)]
                async fn invoice_joined_presented(
                    &mut self,
                    credential: Presented<'_>,
                    id: Uuid,
                ) -> StoreResult<Option<(Presenter, Option<InvoiceJoined>)>> {
                    let query = match credential {
                        Presented::ApiKey(key_id) => ::sqlx::query(concat!(
                            "select c.*, j.* from (",
                            $crate::sql::presented::presented_key!(),
                            ") c left join (",
                            $crate::sql::joined_invoice!(),
                            " where i.id = $2) j on j.org_id = c.c_org_id"
                        ))
                        .bind(key_id),
                        Presented::Session(hash) => ::sqlx::query(concat!(
                            "select c.*, j.* from (",
                            $crate::sql::presented::presented_session!(),
                            ") c left join (",
                            $crate::sql::joined_invoice!(),
                            " where i.id = $2) j on j.org_id = c.c_org_id"
                        ))
                        .bind(hash),
                    };
                    let Some(row) = query
                        .bind(id)
                        .fetch_optional(self.0.conn())
                        .await
                        .map_err($map_err)?
                    else {
                        return Ok(None);
                    };
                    let presenter = match credential {
                        Presented::ApiKey(_) => Presenter::from(row_key(&row).map_err($map_err)?),
                        Presented::Session(_) => Presenter::from(
                            <PresentedSession as ::sqlx::FromRow<_>>::from_row(&row)
                                .map_err($map_err)?,
                        ),
                    };
                    let invoice = row_item(&row).map_err($map_err)?;
                    Ok(Some((presenter, invoice)))
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn invoice_by_key_presented(
                    &mut self,
                    key_id: Uuid,
                    idempotency_key: &str,
                ) -> StoreResult<Option<(KeyWithAgent, Option<InvoiceJoined>)>> {
                    let row = ::sqlx::query(concat!(
                        "select c.*, j.* from (",
                        $crate::sql::presented::presented_key!(),
                        ") c left join (",
                        $crate::sql::joined_invoice!(),
                        " where i.org_id = ",
                        $crate::sql::presented::key_org!("$1"),
                        " and i.agent_id = ",
                        $crate::sql::presented::key_agent!("$1"),
                        " and i.idempotency_key = $2) j on j.agent_id = c.c_agent_id"
                    ))
                    .bind(key_id)
                    .bind(idempotency_key)
                    .fetch_optional(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    let Some(row) = row else {
                        return Ok(None);
                    };
                    let key = KeyWithAgent::from(row_key(&row).map_err($map_err)?);
                    Ok(Some((key, row_item(&row).map_err($map_err)?)))
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn own_invoices_presented(
                    &mut self,
                    key_id: Uuid,
                    f: &InvoiceFilter,
                    page: Page,
                ) -> StoreResult<Option<(KeyWithAgent, Vec<InvoiceJoined>)>> {
                    // The page is a derived table (its own order and limit) left joined to the
                    // key, so an empty page still returns the key; the outer order restores
                    // the page's, which a join does not promise to keep.
                    let sql = if f.oldest_first {
                        concat!(
                            "select c.*, j.* from (",
                            $crate::sql::presented::presented_key!(),
                            ") c left join (",
                            $crate::sql::joined_invoice!(),
                            $crate::sql::invoice_list_filters!(
                                $crate::sql::presented::key_org!("$2"),
                                $crate::sql::presented::key_agent!("$2"),
                                "$3"
                            ),
                            " and ($7 is null or i.id > $7) order by i.id asc limit $8",
                            ") j on 1 = 1 order by j.invoice_id asc"
                        )
                    } else {
                        concat!(
                            "select c.*, j.* from (",
                            $crate::sql::presented::presented_key!(),
                            ") c left join (",
                            $crate::sql::joined_invoice!(),
                            $crate::sql::invoice_list_filters!(
                                $crate::sql::presented::key_org!("$2"),
                                $crate::sql::presented::key_agent!("$2"),
                                "$3"
                            ),
                            " and ($7 is null or i.id < $7) order by i.id desc limit $8",
                            ") j on 1 = 1 order by j.invoice_id desc"
                        )
                    };
                    // `$1` is the key (the credential's statement), `$2` the same key for the
                    // filters' scope, `$3` (an owner) null: the scope is the key's agent.
                    let rows = ::sqlx::query(sql)
                        .bind(key_id)
                        .bind(key_id)
                        .bind(Option::<Uuid>::None)
                        .bind(f.state.map(|s| s.as_str()))
                        .bind(f.customer_id)
                        .bind(f.agent_id)
                        .bind(page.after)
                        .bind(page.limit)
                        .bind(f.decision.map(|k| k.as_str()))
                        .bind(&f.idempotency_key)
                        .bind(f.overdue)
                        .bind(f.today)
                        .fetch_all(self.0.conn())
                        .await
                        .map_err($map_err)?;
                    let Some(first) = rows.first() else {
                        return Ok(None);
                    };
                    let key = KeyWithAgent::from(row_key(first).map_err($map_err)?);
                    let mut items = Vec::with_capacity(rows.len());
                    for row in &rows {
                        if let Some(item) = row_item(row).map_err($map_err)? {
                            items.push(item);
                        }
                    }
                    Ok(Some((key, items)))
                }
            }
        };
    };
}

/// The credential columns of a joined row.
pub(crate) fn row_key<'r, R: sqlx::Row>(
    row: &'r R,
) -> Result<crate::presented::PresentedKey, sqlx::Error>
where
    crate::presented::PresentedKey: sqlx::FromRow<'r, R>,
{
    <crate::presented::PresentedKey as sqlx::FromRow<'r, R>>::from_row(row)
}

/// The record columns of a joined row, if the left join found a record (its revision's
/// `invoice_id` is never null in a record).
pub(crate) fn row_item<'r, R: sqlx::Row, T: sqlx::FromRow<'r, R>>(
    row: &'r R,
) -> Result<Option<T>, sqlx::Error>
where
    Option<uuid::Uuid>: sqlx::Decode<'r, R::Database> + sqlx::Type<R::Database>,
    &'static str: sqlx::ColumnIndex<R>,
{
    let probe: Option<uuid::Uuid> = row.try_get("invoice_id")?;
    match probe {
        Some(_) => T::from_row(row).map(Some),
        None => Ok(None),
    }
}

pub(crate) use {impl_presented_store, key_agent, key_org, presented_key, presented_session};
