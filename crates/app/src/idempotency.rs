//! One idempotency mechanism for every keyed create (docs/contract/domain.md §7). A [`Keyed`]
//! request says how its key is found, its fingerprints, conflict and replay; the sequence is
//! written once: [`lookup`] (one indexed read, no lock), [`create`] (one unit; the unique key
//! decides between concurrent creates, the loser answering as the winner's replay or conflict),
//! [`answer`] (fingerprints compared). A create inside its caller's transaction uses [`winner`].

use crate::app::{LOCK_ATTEMPTS, finish};
use crate::error::{AppError, AppResult};
use async_trait::async_trait;
use tauros_domain::fingerprint::same_payload;
use tauros_store::{DynStore, Lane, Reader, Tx};

/// A command's answer: the record as it is now, and whether it was a replay (nothing written).
#[derive(Clone, Debug)]
pub struct Replayed<T> {
    pub value: T,
    pub replayed: bool,
}

impl<T> Replayed<T> {
    /// The command wrote this just now.
    pub fn fresh(value: T) -> Replayed<T> {
        Replayed {
            value,
            replayed: false,
        }
    }

    /// The command's goal already held; nothing was written.
    pub fn replay(value: T) -> Replayed<T> {
        Replayed {
            value,
            replayed: true,
        }
    }
}

/// A create that carries an idempotency key.
#[async_trait]
pub(crate) trait Keyed: Sync {
    /// The stored record that holds a key.
    type Stored: Send;
    /// What the create answers.
    type Answer: Send;

    /// The record that holds this request's key, if any (none when the request has no key).
    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<Self::Stored>>;

    /// The fingerprint of the payload `stored` was made from.
    fn stored_fingerprint<'s>(&self, stored: &'s Self::Stored) -> Option<&'s str>;

    /// This request's fingerprint, made as `stored`'s was; `None` when it cannot be.
    async fn fingerprint(
        &self,
        conn: &mut dyn Reader,
        stored: &Self::Stored,
    ) -> AppResult<Option<String>>;

    /// The refusal of another payload under a key in use.
    fn conflict(&self, stored: &Self::Stored) -> AppError;

    /// What a replay answers: the record as it is now.
    async fn replay(&self, conn: &mut dyn Reader, stored: Self::Stored) -> AppResult<Self::Answer>;

    /// The error when the record that won the key cannot be read.
    fn vanished(&self) -> AppError;
}

/// What the write step of a [`KeyedCreate`] did.
pub(crate) enum Written<T> {
    /// Written, to be committed with the unit.
    Fresh(T),
    /// A concurrent same-key create won and is visible: answer its replay or conflict (abandoned).
    KeyTaken,
    /// A same-key create won and the refusal ended this unit (PostgreSQL): read the winner afresh.
    KeyTakenUnitEnded,
    /// Something the write depends on changed under it: start again in a new unit.
    Retry,
}

/// A keyed create an agent makes in a unit of work of its own.
#[async_trait]
pub(crate) trait KeyedCreate: Keyed {
    /// Whose work the create is (its organisation's turn at the database).
    fn lane(&self) -> Lane;

    /// Writes the record and whatever goes with it (the audit event included) in `tx`. It
    /// holds the agent first: a concurrent create with the same key is then either seen or
    /// loses the key, and the agent cannot be deleted before this unit ends.
    async fn write(&self, tx: &mut dyn Tx) -> AppResult<Written<Self::Answer>>;

    /// The error when every attempt had to start again.
    fn gave_up(&self) -> AppError {
        AppError::Internal("a keyed create kept starting again".into())
    }
}

/// The answer for a key `stored` holds: a replay when the payloads match, else the conflict.
pub(crate) async fn answer<K: Keyed>(
    request: &K,
    conn: &mut dyn Reader,
    stored: K::Stored,
) -> AppResult<Replayed<K::Answer>> {
    let requested = request.fingerprint(conn, &stored).await?;
    if !same_payload(request.stored_fingerprint(&stored), requested.as_deref()) {
        return Err(request.conflict(&stored));
    }
    Ok(Replayed::replay(request.replay(conn, stored).await?))
}

/// The fast path: the key read without a lock; a replay (or the conflict) when it is held.
pub(crate) async fn lookup<K: Keyed>(
    request: &K,
    conn: &mut dyn Reader,
) -> AppResult<Option<Replayed<K::Answer>>> {
    match request.find(conn).await? {
        Some(stored) => answer(request, conn, stored).await.map(Some),
        None => Ok(None),
    }
}

/// The answer after this request's insert lost the key: the winner, read through `conn`.
pub(crate) async fn winner<K: Keyed>(
    request: &K,
    conn: &mut dyn Reader,
) -> AppResult<Replayed<K::Answer>> {
    let stored = request
        .find(conn)
        .await?
        .ok_or_else(|| request.vanished())?;
    answer(request, conn, stored).await
}

/// The create in a unit of its own: written, or the replay (or conflict) of a winner.
pub(crate) async fn create<K: KeyedCreate>(
    store: &DynStore,
    request: &K,
) -> AppResult<Replayed<K::Answer>> {
    for _ in 0..LOCK_ATTEMPTS {
        let mut tx = store.begin(request.lane()).await?;
        let answer = match request.write(&mut *tx).await {
            Ok(Written::Fresh(value)) => Ok(Replayed::fresh(value)),
            Ok(Written::KeyTaken) => winner(request, &mut *tx).await,
            Err(refused) => Err(refused),
            Ok(Written::KeyTakenUnitEnded) => {
                tx.abandon().await?;
                let mut conn = store.reader(request.lane()).await?;
                return winner(request, &mut *conn).await;
            }
            Ok(Written::Retry) => {
                tx.abandon().await?;
                continue;
            }
        };
        return finish(tx, answer).await;
    }
    Err(request.gave_up())
}
