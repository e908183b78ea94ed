//! What list use cases share: the page asked for and a filter by one of a set of names.

use crate::error::FieldError;
use tauros_store::Page;
use uuid::Uuid;

/// One page of a list: keyset pagination over time-ordered (v7) ids.
#[derive(Clone, Copy, Debug)]
pub struct PageRequest {
    /// Continue after this id (the last id of the previous page), in the list's order.
    pub after: Option<Uuid>,
    /// How many rows at most; the caller asks one more to learn whether a next page exists.
    pub limit: i64,
}

impl From<PageRequest> for Page {
    fn from(p: PageRequest) -> Page {
        Page {
            after: p.after,
            limit: p.limit,
        }
    }
}

/// A list's optional filter by one of `all`, or `invalid_value` listing every accepted name.
pub(crate) fn list_filter<T: Copy>(
    field: &str,
    sent: Option<&str>,
    all: &[T],
    name: fn(T) -> &'static str,
    errors: &mut Vec<FieldError>,
) -> Option<T> {
    let sent = sent?;
    let found = all.iter().copied().find(|v| name(*v) == sent);
    if found.is_none() {
        let names: Vec<&str> = all.iter().map(|v| name(*v)).collect();
        errors.push(FieldError::plain(
            field,
            "invalid_value",
            format!("{field} must be one of {}", names.join(", ")),
        ));
    }
    found
}
