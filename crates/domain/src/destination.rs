//! A payment destination's lifecycle (docs/contract/domain.md §2): it receives money while
//! `active`, and stops for good when deactivated or replaced by a successor.

use std::fmt;

/// Whether a destination still receives money.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DestinationState {
    /// Invoices may name it.
    Active,
    /// Its agent or owner stopped it; invoices naming it can no longer be submitted or approved.
    Deactivated,
    /// A newer destination replaced it (`supersedes_id`).
    Superseded,
}

impl DestinationState {
    /// Every state.
    pub const ALL: [DestinationState; 3] = [
        DestinationState::Active,
        DestinationState::Deactivated,
        DestinationState::Superseded,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            DestinationState::Active => "active",
            DestinationState::Deactivated => "deactivated",
            DestinationState::Superseded => "superseded",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<DestinationState> {
        DestinationState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
    }
}

impl fmt::Display for DestinationState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
