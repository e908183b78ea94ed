//! What operators and workers do with the queue (docs/contract/effects.md §1).

mod held;
mod operators;
mod workers;

pub use held::Redriven;

pub use operators::JobQuery;
pub use workers::{
    ClaimedJob, JobFailure, JobStats, MAIN_POOL, Pool, Rescued, Retention, complete_in,
};
