//! Pruning: attempts and settled deliveries past their retention.

use crate::app::App;
use crate::clock::now;
use crate::error::AppResult;
use tauros_domain::webhook as rules;
use tauros_store::Lane;

impl App {
    /// Deletes attempts past retention (30 days) in batches, then unheld deliveries as old.
    pub async fn prune_webhook_attempts(&self, batch: i64) -> AppResult<u64> {
        let before = now()
            - chrono::Duration::from_std(rules::ATTEMPT_RETENTION)
                .unwrap_or_else(|_| chrono::Duration::days(30));
        let full = u64::try_from(batch).unwrap_or(0);
        let mut pruned = 0;
        loop {
            let mut tx = self.store.begin(Lane::Unattributed).await?;
            let answer = tx
                .prune_webhook_attempts(before, batch)
                .await
                .map_err(Into::into);
            let n = crate::app::finish(tx, answer).await?;
            pruned += n;
            if n < full {
                break;
            }
        }
        loop {
            let mut tx = self.store.begin(Lane::Unattributed).await?;
            let answer = tx
                .prune_webhook_deliveries(before, batch)
                .await
                .map_err(Into::into);
            let n = crate::app::finish(tx, answer).await?;
            if n < full {
                return Ok(pruned);
            }
        }
    }
}
