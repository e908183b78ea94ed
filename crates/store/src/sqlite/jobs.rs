//! The job claim on the single writer.

use super::dialect::{map_err, now_plus_ms};
use super::writer::WriteUnit;
use crate::error::{StoreError, StoreResult};
use crate::jobs::{Claim, JobRow};

// Backend-only: the claim inside the single writer (wake-ups are `unit.rs`'s notify).

/// Claims as a write unit on the single writer: claimers (across processes too, at SQLite's
/// write lock) are serialized, so no two get the same job and a lane's count holds still.
/// Fair across organisations (docs/JOBS.md, "Fairness"): a skip scan over `jobs_fair_idx`
/// finds those with waiting jobs; the oldest turn's earliest due job is taken. The scan names
/// its index: left alone, SQLite walks `jobs_org_state_idx`, which also holds finished jobs.
pub(super) async fn claim_job(
    mut unit: WriteUnit,
    claim: &Claim<'_>,
) -> StoreResult<Option<JobRow>> {
    let kinds = serde_json::to_string(claim.kinds)
        .map_err(|e| StoreError::Other(sqlx::Error::Encode(Box::new(e))))?;
    let next: Option<(uuid::Uuid, uuid::Uuid)> = sqlx::query_as(
        "with recursive orgs (org_id) as (
             select (select org_id from jobs indexed by jobs_fair_idx
                     where state in ('available', 'scheduled', 'retryable')
                     order by org_id limit 1)
             union all
             select (select j.org_id from jobs j indexed by jobs_fair_idx
                     where j.state in ('available', 'scheduled', 'retryable')
                       and j.org_id > orgs.org_id
                     order by j.org_id limit 1)
             from orgs where orgs.org_id is not null
         ),
         heads as materialized (
             select o.org_id,
                 (select j.id from jobs j
                  where j.org_id = o.org_id and j.kind = k.value
                    and j.state in ('available', 'scheduled', 'retryable') and j.run_at <= $1
                    and (j.lane is null or $4 is null
                         or (select count(*) from jobs r
                             where r.org_id = j.org_id and r.lane = j.lane
                               and r.state = 'running' and r.lane is not null) < $4)
                  order by j.run_at, j.id
                  limit 1) as id
             from orgs o, json_each($2) k
             where o.org_id is not null
         )
         select h.id, h.org_id from heads h
         join jobs j on j.org_id = h.org_id and j.id = h.id
         left join job_turns t on t.org_id = h.org_id and t.pool = $3
         where h.id is not null
         order by t.last_claimed_at is not null, t.last_claimed_at, j.run_at, j.id
         limit 1",
    )
    .bind(claim.now)
    .bind(kinds)
    .bind(claim.pool)
    .bind(claim.lane_limit)
    .fetch_optional(unit.conn())
    .await
    .map_err(map_err)?;
    let Some((id, org_id)) = next else {
        unit.commit(false).await?;
        return Ok(None);
    };
    let row = sqlx::query_as(sqlx::AssertSqlSafe(format!(
        "update jobs set state = 'running', lease_token = $3, lease_expires_at = {until},
             worker = $5, executions = executions + 1, started_at = $1, updated_at = $1
         where org_id = $6 and id = $2
         returning *",
        until = now_plus_ms("$4"),
    )))
    .bind(claim.now)
    .bind(id)
    .bind(claim.lease_token)
    .bind(crate::sql::millis(claim.lease))
    .bind(claim.worker)
    .bind(org_id)
    .fetch_optional(unit.conn())
    .await
    .map_err(map_err)?;
    sqlx::query(
        "insert into job_turns (org_id, pool, last_claimed_at) values ($1, $2, $3)
         on conflict (org_id, pool) do update set last_claimed_at = excluded.last_claimed_at",
    )
    .bind(org_id)
    .bind(claim.pool)
    .bind(claim.now)
    .execute(unit.conn())
    .await
    .map_err(map_err)?;
    unit.commit(false).await?;
    Ok(row)
}
