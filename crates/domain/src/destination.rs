//! A payment destination's lifecycle (docs/contract/domain.md §2).

use crate::address::Network;
use crate::currency::Currency;
use crate::error::FieldError;
use std::fmt;
use std::str::FromStr;

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

/// Checks a payee as sent: currency, a network carrying it, an address valid on it (checksums
/// included). A missing member is not reported here: the request type's rules require each.
pub fn check_payee(
    currency: Option<&str>,
    network: Option<&str>,
    address: Option<&str>,
) -> Result<(Currency, Network, String), Vec<FieldError>> {
    let mut errors = Vec::new();
    let currency = currency.and_then(|c| {
        Currency::from_str(c.trim())
            .map_err(|e| errors.push(FieldError::new("currency", &e)))
            .ok()
    });
    let network = network.and_then(|n| {
        Network::from_str(n.trim())
            .map_err(|e| errors.push(FieldError::new("network", &e)))
            .ok()
    });
    if let (Some(currency), Some(network), Some(address)) = (currency, network, address) {
        match network.check_carries(currency) {
            Err(e) => errors.push(FieldError::new("network", &e)),
            Ok(()) => match network.validate_address(address) {
                Ok(address) => return Ok((currency, network, address)),
                Err(e) => errors.push(FieldError::new("address", &e)),
            },
        }
    }
    Err(errors)
}
