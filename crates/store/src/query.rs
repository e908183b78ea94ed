//! How a read asks for its rows: a page of a keyset-ordered list, and the lock it holds.

use uuid::Uuid;

/// How a locking read holds its row until the transaction ends (PostgreSQL row locks).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lock {
    /// Others may share it too, but nobody may change or delete the row (`FOR SHARE`).
    Share,
    /// Nobody else may lock, change or delete the row (`FOR UPDATE`).
    Update,
}

/// A page request for keyset pagination over time-ordered (v7) ids.
#[derive(Clone, Copy, Debug)]
pub struct Page {
    /// Rows after this id in the list's order.
    pub after: Option<Uuid>,
    /// How many rows at most (the caller asks for one more to learn whether a next page exists).
    pub limit: i64,
}
