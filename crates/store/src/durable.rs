//! Answers that wait until what they read is durable (SQLite's group commit).

use crate::error::{StoreError, StoreResult};

/// The outcome of a shared commit, as a unit waiting for it sees it: `None` until it is
/// known, then `Ok` or the error's text.
pub(crate) type CommitOutcome = tokio::sync::watch::Receiver<Option<Result<(), String>>>;

tokio::task_local! {
    /// Shared commits the current request's answer depends on (see [`when_durable`]).
    static UNSETTLED: std::cell::RefCell<Vec<CommitOutcome>>;
}

/// Records, for the running request, that its answer depends on a shared commit (a unit read
/// writes that commit will make durable, and ended without committing). Outside
/// [`when_durable`] (a job, a command-line run) there is no answer to hold back.
pub(crate) fn answer_after(outcome: CommitOutcome) {
    let _ = UNSETTLED.try_with(|pending| pending.borrow_mut().push(outcome));
}

/// Runs `answer` (one request's work), then waits until every shared commit whose
/// uncommitted writes a unit of that work read, and then dropped without committing, has
/// ended. `Err`: one of them failed, so the answer was decided on writes that are now lost and
/// must not be sent (the caller answers 503 instead; a retry sees the truth).
///
/// Only SQLite's group commit has such units: a unit sees the units released before it into
/// the same shared transaction, and a replay or a refusal decided on them ends without a
/// commit of its own. A unit that commits waits for its group itself, and PostgreSQL never
/// shows a transaction another's uncommitted writes, so elsewhere this waits for nothing.
pub async fn when_durable<F: std::future::Future>(answer: F) -> (F::Output, StoreResult<()>) {
    let (output, pending) = UNSETTLED
        .scope(std::cell::RefCell::new(Vec::new()), async {
            let output = answer.await;
            let pending = UNSETTLED.with(|p| std::mem::take(&mut *p.borrow_mut()));
            (output, pending)
        })
        .await;
    for mut outcome in pending {
        let settled = outcome
            .wait_for(Option::is_some)
            .await
            .ok()
            .and_then(|o| o.clone());
        match settled {
            Some(Ok(())) => {}
            Some(Err(message)) => return (output, Err(lost(&message))),
            None => return (output, Err(lost("the shared commit was abandoned"))),
        }
    }
    (output, Ok(()))
}

/// The error of a unit whose shared commit failed: nothing it was part of is durable, and
/// nothing was acknowledged, so a retry is safe.
pub(crate) fn lost(message: &str) -> StoreError {
    StoreError::Unavailable(sqlx::Error::Io(std::io::Error::other(format!(
        "the shared commit failed: {message}"
    ))))
}
