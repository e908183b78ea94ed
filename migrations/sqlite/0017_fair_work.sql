-- Fair work (Tenancy, issue #25): job claims take turns across organisations, per worker pool;
-- deliveries of one webhook endpoint share a lane whose running jobs a claim caps; a failed
-- webhook attempt records a kind, never a resolver's or a socket's words.

-- When each organisation last had a job claimed by each pool ('main', 'webhooks'): a claim
-- takes the organisation whose turn is oldest (never claimed first) among those with a due job.
create table job_turns (
    org_id          blob not null references orgs (id),
    pool            text not null,
    last_claimed_at text not null,
    primary key (org_id, pool)
);

-- Jobs that share a lane (a webhook endpoint's deliveries: its id) run at most a cap at once.
alter table jobs add column lane text;

-- A claim's walk: the organisations with waiting jobs (a skip scan over org_id), then each
-- one's earliest due job of each kind the pool runs.
create index jobs_fair_idx on jobs (org_id, kind, run_at, id)
    where state in ('available', 'scheduled', 'retryable');
-- The running jobs of one lane, counted by a claim.
create index jobs_lane_idx on jobs (org_id, lane) where state = 'running' and lane is not null;

-- Attempts recorded before: the new kinds, and no error text (it could hold a resolver's
-- message or an address). An answer other than 2xx is now the kind http_status.
update webhook_attempts set
    error_kind = case error_kind
        when 'dns' then 'dns_failure'
        when 'address_refused' then 'address_not_allowed'
        when 'network' then 'connect_failed'
        else error_kind
    end,
    error = null
where error_kind is not null;
update webhook_attempts set error_kind = 'http_status'
where error_kind is null and status_code is not null and (status_code < 200 or status_code > 299);
-- The same for the last error of delivery jobs.
update jobs set
    last_error_code = case last_error_code
        when 'dns' then 'dns_failure'
        when 'address_refused' then 'address_not_allowed'
        when 'network' then 'connect_failed'
        else last_error_code
    end,
    last_error_message = 'the attempt failed (its details were recorded before migration 0017)'
where kind = 'webhook.deliver.v1' and last_error_code in ('dns', 'address_refused', 'network', 'timeout');
