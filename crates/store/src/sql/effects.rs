//! The claim protocol's claims and the invoice number sequence.

/// Implements `ClaimRead` and `ClaimWrite` for one backend's unit of work `$unit`.
/// `$skip_locked` is appended to the selects of cleanup and reaping; `$sanction` and `$unsanction`
/// open and close a sanctioned reap (the delete guard reads it).
macro_rules! impl_effect_store {
    (
        $unit:ty,
        for_update = $for_update:literal,
        for_share = $for_share:literal,
        skip_locked = $skip_locked:literal,
        sanction = $sanction:literal,
        unsanction = $unsanction:literal,
        map_err = $map_err:path
    ) => {
        const _: () = {
            use ::chrono::{DateTime, Utc};
            use ::uuid::Uuid;
            use $crate::StoreResult;
            use $crate::effects::*;

            #[::async_trait::async_trait]
            impl ClaimRead for $unit {
                #[::tracing::instrument(level = "debug", skip_all)]
                async fn claim_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<ClaimRow>> {
                    ::sqlx::query_as("select * from effect_claims where org_id = $1 and id = $2")
                        .bind(org_id)
                        .bind(id)
                        .fetch_optional(self.0.conn())
                        .await
                        .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn claim_counts(&mut self) -> StoreResult<ClaimCounts> {
                    ::sqlx::query_as(
                        "select
                             (select count(*) from effect_claims where state = 'processing') as processing,
                             (select count(*) from effect_claims where state = 'complete') as complete,
                             (select min(admitted_at) from effect_claims where state = 'processing')
                                 as oldest_processing",
                    )
                    .fetch_one(self.0.conn())
                    .await
                    .map_err($map_err)
                }
            }

            #[::async_trait::async_trait]
            impl ClaimWrite for $unit {
                #[::tracing::instrument(level = "debug", skip_all)]
                async fn insert_claim(&mut self, c: &ClaimRow) -> StoreResult<bool> {
                    let done = ::sqlx::query(
                        "insert into effect_claims (id, org_id, kind, business_key, fingerprint,
                             state, response, admitted_at, completed_at, retain_until)
                         values ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                         on conflict do nothing",
                    )
                    .bind(c.id)
                    .bind(c.org_id)
                    .bind(&c.kind)
                    .bind(&c.business_key)
                    .bind(&c.fingerprint)
                    .bind(&c.state)
                    .bind(&c.response)
                    .bind(c.admitted_at)
                    .bind(c.completed_at)
                    .bind(c.retain_until)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(done.rows_affected() == 1)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn lock_claim(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<ClaimRow>> {
                    ::sqlx::query_as(concat!(
                        "select * from effect_claims where org_id = $1 and id = $2",
                        $for_update
                    ))
                    .bind(org_id)
                    .bind(id)
                    .fetch_optional(self.0.conn())
                    .await
                    .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn complete_claim(
                    &mut self,
                    org_id: Uuid,
                    id: Uuid,
                    response: &str,
                    completed_at: DateTime<Utc>,
                    retain_until: DateTime<Utc>,
                ) -> StoreResult<bool> {
                    let done = ::sqlx::query(
                        "update effect_claims
                         set state = 'complete', response = $3, completed_at = $4, retain_until = $5
                         where org_id = $1 and id = $2 and state = 'processing'",
                    )
                    .bind(org_id)
                    .bind(id)
                    .bind(response)
                    .bind(completed_at)
                    .bind(retain_until)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(done.rows_affected() == 1)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn clean_claims(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
                    let done = ::sqlx::query(concat!(
                        "delete from effect_claims where id in (
                             select id from effect_claims
                             where state = 'complete' and retain_until < $1
                             order by retain_until limit $2",
                        $skip_locked,
                        ")"
                    ))
                    .bind(now)
                    .bind(limit)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(done.rows_affected())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn reap_claims(
                    &mut self,
                    cutoff: DateTime<Utc>,
                    now: DateTime<Utc>,
                    limit: i64,
                ) -> StoreResult<u64> {
                    ::sqlx::query($sanction)
                        .execute(self.0.conn())
                        .await
                        .map_err($map_err)?;
                    let done = ::sqlx::query(concat!(
                        "delete from effect_claims where id in (
                             select id from effect_claims
                             where state = 'processing' and admitted_at < $1 and retain_until < $2
                             order by admitted_at limit $3",
                        $skip_locked,
                        ")"
                    ))
                    .bind(cutoff)
                    .bind(now)
                    .bind(limit)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    ::sqlx::query($unsanction)
                        .execute(self.0.conn())
                        .await
                        .map_err($map_err)?;
                    Ok(done.rows_affected())
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn next_invoice_number(&mut self, org_id: Uuid, year: i32) -> StoreResult<i64> {
                    ::sqlx::query_scalar(
                        "insert into invoice_numbers (org_id, year, last_number) values ($1, $2, 1)
                         on conflict (org_id, year)
                         do update set last_number = invoice_numbers.last_number + 1
                         returning last_number",
                    )
                    .bind(org_id)
                    .bind(year)
                    .fetch_one(self.0.conn())
                    .await
                    .map_err($map_err)
                }

                #[::tracing::instrument(level = "debug", skip_all)]
                async fn hold_invoice_numbers(&mut self, org_id: Uuid, year: i32) -> StoreResult<()> {
                    ::sqlx::query(
                        "insert into invoice_numbers (org_id, year, last_number) values ($1, $2, 0)
                         on conflict (org_id, year) do nothing",
                    )
                    .bind(org_id)
                    .bind(year)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    ::sqlx::query(concat!(
                        "select last_number from invoice_numbers where org_id = $1 and year = $2",
                        $for_share
                    ))
                    .bind(org_id)
                    .bind(year)
                    .execute(self.0.conn())
                    .await
                    .map_err($map_err)?;
                    Ok(())
                }
            }
        };
    };
}

pub(crate) use impl_effect_store;
