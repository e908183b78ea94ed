//! What operators and workers do with the queue (docs/contract/effects.md §1).

mod held;
mod operators;
mod workers;

pub use held::Redriven;

pub use crate::queue::ClaimedJob;
pub use operators::JobQuery;
pub use workers::{JobFailure, JobStats, MAIN_POOL, Pool, Rescued, Retention, complete_in};
