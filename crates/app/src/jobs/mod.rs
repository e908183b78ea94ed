//! What operators and workers do with the queue (docs/contract/effects.md §1); enqueueing and
//! the job view are `queue`'s. The rules are `domain::job`'s; the store applies each outcome
//! fenced by the execution's lease token.
//!
//! - `operators`: what approvers see and do (list, get, retry, cancel);
//! - `held`: the jobs whose business work can outlive them (issue jobs): not cancelled while
//!   their effect is in progress, not pruned while their work is unfinished;
//! - `workers`: the workers' side: claim, heartbeat, settle, rescue the executions whose lease
//!   expired, prune finished jobs, the gauges.

mod held;
mod operators;
mod workers;

pub use held::Redriven;

pub use operators::JobQuery;
pub use workers::{
    ClaimedJob, JobFailure, JobStats, MAIN_POOL, Pool, Rescued, Retention, complete_in,
};
