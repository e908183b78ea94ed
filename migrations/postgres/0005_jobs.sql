-- The job queue (effects.md §1): one row per job, a slim submission record that keeps
-- deduplication alive after the job row is pruned, and the executions of the built-in test
-- job kinds. Times are the application's clock (as everywhere in Tauros); retry times and
-- lease deadlines are computed in Rust and stored.

create table jobs (
    id                 uuid primary key,
    org_id             uuid not null references orgs (id),
    -- versioned kind, e.g. invoice.issue.v1
    kind               text not null,
    -- canonical JSON object, at most 64 KiB (checked in Rust)
    args               text not null,
    submission_id      text,
    definition_hash    text not null,
    state              text not null constraint jobs_state_check check (state in
        ('available', 'scheduled', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    -- the counted attempt the next (or current) execution is; expired leases do not count
    attempt            integer not null constraint jobs_attempt_check check (attempt >= 1),
    max_attempts       integer not null constraint jobs_max_attempts_check check (max_attempts between 1 and 1000),
    -- every claim, counted or not
    executions         integer not null constraint jobs_executions_check check (executions >= 0),
    -- executions that ended by an expired lease
    interruptions      integer not null constraint jobs_interruptions_check check (interruptions >= 0),
    -- when it may run (enqueued for, or the stored, jittered retry time)
    run_at             timestamptz not null,
    lease_token        uuid,
    lease_expires_at   timestamptz,
    -- the process and task that holds (or last held) it
    worker             text,
    last_error_code    text,
    last_error_message text,
    created_at         timestamptz not null,
    updated_at         timestamptz not null,
    started_at         timestamptz,
    finished_at        timestamptz,
    -- a running job has a lease, and nothing else has one
    constraint jobs_lease_check check
        ((state = 'running') = (lease_token is not null and lease_expires_at is not null))
);
-- What workers claim, oldest due first.
create index jobs_due_idx on jobs (run_at, id) where state in ('available', 'scheduled', 'retryable');
-- Expired leases.
create index jobs_lease_idx on jobs (lease_expires_at) where state = 'running';
-- Retention.
create index jobs_finished_idx on jobs (state, finished_at) where state in ('completed', 'discarded', 'cancelled');
-- Operators' lists.
create index jobs_org_idx on jobs (org_id, id);
create index jobs_org_state_idx on jobs (org_id, state, id);

-- One row per submission id, kept when the job row is pruned: the unique keys, not a pre-read,
-- decide whether a submission is new, and the definition hash whether a repeat is the same job.
create table job_submissions (
    job_id          uuid primary key,
    org_id          uuid not null references orgs (id),
    kind            text not null,
    submission_id   text not null,
    definition_hash text not null,
    created_at      timestamptz not null,
    constraint job_submissions_key unique (org_id, kind, submission_id)
);

-- Executions of the built-in test job kinds (registered only with TAUROS_TEST_JOBS): what the
-- multi-process tests check for overlapping runs. Nothing else writes here.
create table test_job_executions (
    id          uuid primary key,
    org_id      uuid not null references orgs (id),
    job_id      uuid not null,
    lease_token uuid not null,
    worker      text not null,
    attempt     integer not null,
    outcome     text not null,
    started_at  timestamptz not null,
    finished_at timestamptz not null
);
create index test_job_executions_job_idx on test_job_executions (org_id, job_id, started_at);
