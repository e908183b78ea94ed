//! `ClaimRead` and `ClaimWrite` for every backend's unit (reaps run sanctioned).

use super::{Backend, for_share, for_update, query, query_as, query_scalar};
use crate::claims::*;
use crate::error::StoreResult;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

#[async_trait]
impl<U: Backend> ClaimRead for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn claim_by_id(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<ClaimRow>> {
        query_as("select * from effect_claims where org_id = $1 and id = $2")
            .bind(org_id)
            .bind(id)
            .fetch_optional(self)
            .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn processing_claim_exists(
        &mut self,
        org_id: Uuid,
        kind: &str,
        key: &str,
        prefix: &str,
    ) -> StoreResult<bool> {
        // A prefix compared with substr, not LIKE: no character of it is a wildcard.
        let found: Option<(i32,)> = query_as(
            "select 1 from effect_claims
             where org_id = $1 and kind = $2 and state = 'processing'
               and (business_key = $3 or substr(business_key, 1, length($4)) = $4)
             limit 1",
        )
        .bind(org_id)
        .bind(kind)
        .bind(key)
        .bind(prefix)
        .fetch_optional(self)
        .await?;
        Ok(found.is_some())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn claim_counts(&mut self) -> StoreResult<ClaimCounts> {
        query_as(
            "select
                 (select count(*) from effect_claims where state = 'processing') as processing,
                 (select count(*) from effect_claims where state = 'complete') as complete,
                 (select count(*) from effect_claims where state = 'rejected') as rejected,
                 (select min(admitted_at) from effect_claims where state = 'processing')
                     as oldest_processing",
        )
        .fetch_one(self)
        .await
    }
}

#[async_trait]
impl<U: Backend> ClaimWrite for U {
    #[tracing::instrument(level = "debug", skip_all)]
    async fn insert_claim(&mut self, c: &ClaimRow) -> StoreResult<bool> {
        let done = query(
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
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn lock_claim(&mut self, org_id: Uuid, id: Uuid) -> StoreResult<Option<ClaimRow>> {
        query_as(for_update::<U>(
            "select * from effect_claims where org_id = $1 and id = $2",
        ))
        .bind(org_id)
        .bind(id)
        .fetch_optional(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn complete_claim(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        response: &str,
        completed_at: DateTime<Utc>,
        retain_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = query(
            "update effect_claims
             set state = 'complete', response = $3, completed_at = $4, retain_until = $5
             where org_id = $1 and id = $2 and state = 'processing'",
        )
        .bind(org_id)
        .bind(id)
        .bind(response)
        .bind(completed_at)
        .bind(retain_until)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn reject_claim(
        &mut self,
        org_id: Uuid,
        id: Uuid,
        completed_at: DateTime<Utc>,
        retain_until: DateTime<Utc>,
    ) -> StoreResult<bool> {
        let done = query(
            "update effect_claims
             set state = 'rejected', completed_at = $3, retain_until = $4
             where org_id = $1 and id = $2 and state = 'processing'",
        )
        .bind(org_id)
        .bind(id)
        .bind(completed_at)
        .bind(retain_until)
        .execute(self)
        .await?;
        Ok(done.rows_affected() == 1)
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn clean_claims(&mut self, now: DateTime<Utc>, limit: i64) -> StoreResult<u64> {
        let sql = format!(
            "delete from effect_claims where (org_id, id) in (
                 select org_id, id from effect_claims
                 where state in ('complete', 'rejected') and retain_until < $1
                 order by retain_until limit $2{})",
            U::SKIP_LOCKED
        );
        let done = query(sql).bind(now).bind(limit).execute(self).await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn reap_claims(&mut self, horizon: std::time::Duration, limit: i64) -> StoreResult<u64> {
        query(U::SANCTION_REAP).execute(self).await?;
        let sql = format!(
            "delete from effect_claims where (org_id, id) in (
                 select org_id, id from effect_claims
                 where state = 'processing' and admitted_at < {cutoff} and retain_until < {now}
                 order by admitted_at limit $2{skip})",
            cutoff = U::now_plus_ms("(-$1)"),
            now = U::NOW,
            skip = U::SKIP_LOCKED
        );
        let done = query(sql)
            .bind(super::millis(horizon))
            .bind(limit)
            .execute(self)
            .await?;
        query(U::UNSANCTION_REAP).execute(self).await?;
        Ok(done.rows_affected())
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn next_invoice_number(&mut self, org_id: Uuid, year: i32) -> StoreResult<i64> {
        query_scalar(
            "insert into invoice_numbers (org_id, year, last_number) values ($1, $2, 1)
             on conflict (org_id, year)
             do update set last_number = invoice_numbers.last_number + 1
             returning last_number",
        )
        .bind(org_id)
        .bind(year)
        .fetch_one(self)
        .await
    }

    #[tracing::instrument(level = "debug", skip_all)]
    async fn hold_invoice_numbers(&mut self, org_id: Uuid, year: i32) -> StoreResult<()> {
        query(
            "insert into invoice_numbers (org_id, year, last_number) values ($1, $2, 0)
             on conflict (org_id, year) do nothing",
        )
        .bind(org_id)
        .bind(year)
        .execute(self)
        .await?;
        query(for_share::<U>(
            "select last_number from invoice_numbers where org_id = $1 and year = $2",
        ))
        .bind(org_id)
        .bind(year)
        .execute(self)
        .await?;
        Ok(())
    }
}
