//! Answers held back until what they were decided on is durable.

use crate::error::{AppError, AppResult};

/// Runs one request's work and holds its answer back until everything the answer was decided
/// on is durable (see [`tauros_store::when_durable`]); `Err` when that failed: the answer must
/// not be sent, and a retry is safe.
pub async fn when_durable<F: std::future::Future>(work: F) -> (F::Output, AppResult<()>) {
    let (output, durable) = tauros_store::when_durable(work).await;
    (output, durable.map_err(AppError::from))
}
