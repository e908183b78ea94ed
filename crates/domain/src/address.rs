//! Payment networks, which currencies each carries, and the address rule of each.
//! An address is stored and hashed as given (trimmed), so only one spelling is accepted where
//! the format allows it (IBAN uppercase, Bitcoin lowercase); EVM casing is its EIP-55 checksum.

use std::fmt;
use std::str::FromStr;

use bech32::{hrp, segwit};
use serde::{Deserialize, Serialize};
use sha3::{Digest, Keccak256};
use thiserror::Error;

use super::currency::Currency;
use super::error::{Coded, echo};

/// Longest address stored, whatever the network.
pub const MAX_ADDRESS_CHARS: usize = 128;

/// A payment network (rail) a destination receives money on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Bank transfer to an IBAN; carries every fiat currency.
    Iban,
    /// Bitcoin mainnet, Taproot addresses only; carries BTC.
    Bitcoin,
    /// Ethereum mainnet; carries ETH and every stablecoin.
    Ethereum,
    /// Arbitrum One; carries ETH, USDC, USDT, DAI.
    Arbitrum,
    /// Base mainnet; carries ETH, USDC, DAI.
    Base,
}

/// Why a network or an address was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum AddressError {
    #[error(
        "`{}` is not a supported network; send one of: iban, bitcoin, ethereum, arbitrum, base",
        echo(given)
    )]
    UnknownNetwork { given: String },
    #[error(
        "network {network} does not carry {currency}; {currency} is carried on: {}",
        list(carriers)
    )]
    NetworkDoesNotCarry {
        network: Network,
        currency: Currency,
        /// The networks that do carry it.
        carriers: Vec<Network>,
    },
    #[error("the address must be 1 to {MAX_ADDRESS_CHARS} characters")]
    Length,
    #[error("`{}` is not a valid {network} address: {expected}", echo(given))]
    Format {
        network: Network,
        given: String,
        /// What a valid address looks like.
        expected: &'static str,
    },
    /// Right shape, wrong check digits: most likely a typo.
    #[error("`{}` fails the {network} checksum: {hint}", echo(given))]
    Checksum {
        network: Network,
        given: String,
        /// What to check.
        hint: &'static str,
    },
    #[error(
        "`{}` is a SegWit v{version} address; Tauros accepts only Taproot addresses (bc1p…), \
         so send the receiver's Taproot address",
        echo(given)
    )]
    NotTaproot { given: String, version: u8 },
}

impl Coded for AddressError {
    fn code(&self) -> &'static str {
        match self {
            AddressError::UnknownNetwork { .. } => "unknown_network",
            AddressError::NetworkDoesNotCarry { .. } => "network_currency_mismatch",
            AddressError::Length | AddressError::Format { .. } => "invalid_address",
            AddressError::Checksum { .. } => "invalid_checksum",
            AddressError::NotTaproot { .. } => "unsupported_address_type",
        }
    }
}

fn list(networks: &[Network]) -> String {
    networks
        .iter()
        .map(|n| n.name())
        .collect::<Vec<_>>()
        .join(", ")
}

impl Network {
    /// Every network, in the order errors list them.
    pub const ALL: [Network; 5] = [
        Network::Iban,
        Network::Bitcoin,
        Network::Ethereum,
        Network::Arbitrum,
        Network::Base,
    ];

    /// The lowercase name, as sent, stored and hashed.
    pub fn name(self) -> &'static str {
        match self {
            Network::Iban => "iban",
            Network::Bitcoin => "bitcoin",
            Network::Ethereum => "ethereum",
            Network::Arbitrum => "arbitrum",
            Network::Base => "base",
        }
    }

    /// Whether this network moves `currency` (the table in docs/MONEY.md).
    pub fn carries(self, currency: Currency) -> bool {
        use Currency::{Dai, Eth, Usdc, Usdt};
        match self {
            Network::Iban => currency.is_fiat(),
            Network::Bitcoin => currency == Currency::Btc,
            Network::Ethereum => currency == Eth || currency.is_stablecoin(),
            Network::Arbitrum => matches!(currency, Eth | Usdc | Usdt | Dai),
            Network::Base => matches!(currency, Eth | Usdc | Dai),
        }
    }

    /// The networks that carry `currency`, in [`Network::ALL`] order.
    pub fn for_currency(currency: Currency) -> Vec<Network> {
        Network::ALL
            .into_iter()
            .filter(|n| n.carries(currency))
            .collect()
    }

    /// `Ok` if this network carries `currency`, else an error listing the networks that do.
    pub fn check_carries(self, currency: Currency) -> Result<(), AddressError> {
        if self.carries(currency) {
            Ok(())
        } else {
            Err(AddressError::NetworkDoesNotCarry {
                network: self,
                currency,
                carriers: Network::for_currency(currency),
            })
        }
    }

    /// Validates an address for this network and returns it trimmed, otherwise unchanged.
    pub fn validate_address(self, address: &str) -> Result<String, AddressError> {
        let address = address.trim();
        if address.is_empty() || address.chars().count() > MAX_ADDRESS_CHARS {
            return Err(AddressError::Length);
        }
        match self {
            Network::Iban => validate_iban(address),
            Network::Bitcoin => validate_taproot(address),
            Network::Ethereum | Network::Arbitrum | Network::Base => validate_evm(self, address),
        }?;
        Ok(address.to_owned())
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Network {
    type Err = AddressError;

    /// Exact lowercase name only.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Network::ALL
            .into_iter()
            .find(|n| n.name() == s)
            .ok_or_else(|| AddressError::UnknownNetwork {
                given: s.to_owned(),
            })
    }
}

/// Electronic-format IBAN (`^[A-Z]{2}[0-9]{2}[A-Z0-9]{11,30}$`) with ISO 13616 mod-97 = 1.
fn validate_iban(iban: &str) -> Result<(), AddressError> {
    let bytes = iban.as_bytes();
    let shape_ok = (15..=34).contains(&bytes.len())
        && bytes[..2].iter().all(u8::is_ascii_uppercase)
        && bytes[2..4].iter().all(u8::is_ascii_digit)
        && bytes[4..]
            .iter()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit());
    if !shape_ok {
        return Err(AddressError::Format {
            network: Network::Iban,
            given: iban.to_owned(),
            expected: "send an IBAN in electronic format: uppercase letters and digits, no \
                       spaces (such as DE89370400440532013000)",
        });
    }
    // Move the country and check digits to the end, read letters as 10..35, and reduce mod 97
    // one digit at a time so the number never grows past a few digits.
    let rearranged = bytes[4..].iter().chain(&bytes[..4]);
    let remainder = rearranged.fold(0_u32, |acc, &b| {
        let value = char::from(b).to_digit(36).unwrap_or(0);
        let shifted = if value < 10 { acc * 10 } else { acc * 100 };
        (shifted + value) % 97
    });
    if remainder == 1 {
        Ok(())
    } else {
        Err(AddressError::Checksum {
            network: Network::Iban,
            given: iban.to_owned(),
            hint: "the check digits do not match; copy the IBAN again from the bank's document",
        })
    }
}

/// Bitcoin mainnet Taproot: bech32m, hrp `bc`, witness v1, 32-byte program; lowercase only.
fn validate_taproot(address: &str) -> Result<(), AddressError> {
    let format_error = || AddressError::Format {
        network: Network::Bitcoin,
        given: address.to_owned(),
        expected: "send a mainnet Taproot address in lowercase, starting with bc1p",
    };
    // Uppercase bech32 is valid Bitcoin, but accepting it would give one address two spellings
    // and so two payload hashes.
    if address.bytes().any(|b| b.is_ascii_uppercase()) || !address.starts_with("bc1") {
        return Err(format_error());
    }
    let Ok((hrp, version, program)) = segwit::decode(address) else {
        return Err(AddressError::Checksum {
            network: Network::Bitcoin,
            given: address.to_owned(),
            hint: "it is not a valid bech32m address (a character is wrong or missing); copy \
                   the Taproot address (bc1p…) again",
        });
    };
    if hrp != hrp::BC {
        return Err(format_error());
    }
    if version != segwit::VERSION_1 {
        return Err(AddressError::NotTaproot {
            given: address.to_owned(),
            version: version.to_u8(),
        });
    }
    if program.len() != 32 {
        return Err(format_error());
    }
    Ok(())
}

/// `0x` + 40 hex; all-lowercase or all-uppercase carry no checksum, mixed case must be EIP-55.
fn validate_evm(network: Network, address: &str) -> Result<(), AddressError> {
    let hex = address
        .strip_prefix("0x")
        .filter(|hex| hex.len() == 40 && hex.bytes().all(|b| b.is_ascii_hexdigit()));
    let Some(hex) = hex else {
        return Err(AddressError::Format {
            network,
            given: address.to_owned(),
            expected: "send 0x followed by 40 hexadecimal characters",
        });
    };
    let has_lower = hex.bytes().any(|b| b.is_ascii_lowercase());
    let has_upper = hex.bytes().any(|b| b.is_ascii_uppercase());
    if !(has_lower && has_upper) || hex == eip55_case(hex) {
        Ok(())
    } else {
        Err(AddressError::Checksum {
            network,
            given: address.to_owned(),
            hint: "the mixed-case EIP-55 checksum does not match; copy the address again, or \
                   send it all in lowercase",
        })
    }
}

/// The EIP-55 spelling of 40 hex digits: a letter is uppercase when the matching nibble of
/// Keccak-256(lowercase hex) is 8 or more.
fn eip55_case(hex: &str) -> String {
    let lower = hex.to_ascii_lowercase();
    let hash = Keccak256::digest(lower.as_bytes());
    lower
        .chars()
        .enumerate()
        .map(|(i, c)| {
            let byte = hash[i / 2];
            let nibble = if i % 2 == 0 { byte >> 4 } else { byte & 0x0f };
            if nibble >= 8 {
                c.to_ascii_uppercase()
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TAPROOT: &str = "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr";

    fn code(network: Network, address: &str) -> &'static str {
        network.validate_address(address).unwrap_err().code()
    }

    #[test]
    fn the_domain_vectors() {
        assert_eq!(Network::Bitcoin.validate_address(TAPROOT).unwrap(), TAPROOT);
        let bad_checksum = TAPROOT.replace("kedrcr", "kedrcs");
        assert_eq!(code(Network::Bitcoin, &bad_checksum), "invalid_checksum");
        let v0 = "bc1qw508d6qejxtdg4y5r3zarvary0c5xw7kv8f3t4";
        let err = Network::Bitcoin.validate_address(v0).unwrap_err();
        assert_eq!(err.code(), "unsupported_address_type");
        assert!(err.to_string().contains("SegWit v0"), "{err}");
        let old_fixture = "bc1pxy2kgdygjrsqtzq2n0yrf2493p3xcn65v4ezuqpf9eajsuu4k4uqjc37h0";
        assert_eq!(code(Network::Bitcoin, old_fixture), "invalid_checksum");

        for iban in ["CH9300762011623852957", "DE89370400440532013000"] {
            assert_eq!(Network::Iban.validate_address(iban).unwrap(), iban);
        }
        assert_eq!(
            code(Network::Iban, "CH9300762011623852958"),
            "invalid_checksum"
        );

        let eip55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
        assert!(Network::Ethereum.validate_address(eip55).is_ok());
        let flipped = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAeD";
        assert_eq!(code(Network::Ethereum, flipped), "invalid_checksum");
        assert!(
            Network::Base
                .validate_address(&eip55.to_ascii_lowercase())
                .is_ok()
        );
    }

    #[test]
    fn eip55_reference_vectors() {
        // From the EIP-55 specification: mixed case, all caps, all lowercase.
        for address in [
            "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
            "0xfB6916095ca1df60bB79Ce92cE3Ea74c37c5d359",
            "0xdbF03B407c01E7cD3CBea99509d93f8DDDC8C6FB",
            "0xD1220A0cf47c7B9Be7A2E6BA89F429762e7b9aDb",
            "0x52908400098527886E0F7030069857D2E4169EE7",
            "0x8617E340B3D01FA5F11F306F4090FD50E238070D",
            "0xde709f2102306220921060314715629080e2fb77",
            "0x27b1fdb04752bbc536007a920d24acb045561c26",
        ] {
            assert!(
                Network::Arbitrum.validate_address(address).is_ok(),
                "{address}"
            );
            let hex = &address[2..];
            if hex.bytes().any(|b| b.is_ascii_lowercase())
                && hex.bytes().any(|b| b.is_ascii_uppercase())
            {
                assert_eq!(eip55_case(hex), hex);
            }
        }
    }

    #[test]
    fn malformed_addresses() {
        for bad in [
            "0x123",
            "0X5aaeb6053f3e94c9b9a09f33669435e7ef1beaed",
            "5aaeb6053f3e94c9b9a09f33669435e7ef1beaed00",
            "0x5aaeb6053f3e94c9b9a09f33669435e7ef1beaeg",
        ] {
            assert_eq!(code(Network::Ethereum, bad), "invalid_address", "{bad}");
        }
        for bad in [
            "CH93 0076 2011 6238 5295 7",
            "ch9300762011623852957",
            "CH93007620116",
            "C19300762011623852957",
            "CH9300762011623852957X1234567890123456",
        ] {
            assert_eq!(code(Network::Iban, bad), "invalid_address", "{bad}");
        }
        assert_eq!(
            code(Network::Bitcoin, &TAPROOT.to_ascii_uppercase()),
            "invalid_address"
        );
        assert_eq!(
            code(
                Network::Bitcoin,
                "tb1pqqqqp399et2xygdj5xreqhjjvcmzhxw4aywxecjdzew6hylgvsesf3hn0c"
            ),
            "invalid_address"
        );
        assert_eq!(
            code(Network::Bitcoin, "1BvBMSEYstWetqTFn5Au4m4GFg7xJaNVN2"),
            "invalid_address"
        );
        assert_eq!(code(Network::Iban, ""), "invalid_address");
        assert_eq!(code(Network::Iban, "   "), "invalid_address");
        assert_eq!(code(Network::Iban, &"A".repeat(129)), "invalid_address");
    }

    #[test]
    fn addresses_are_trimmed_but_otherwise_kept() {
        let eip55 = "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed";
        assert_eq!(
            Network::Ethereum
                .validate_address(&format!(" {eip55}\n"))
                .unwrap(),
            eip55
        );
    }

    #[test]
    fn which_networks_carry_which_currencies() {
        use Network::*;
        assert_eq!(Network::for_currency(Currency::Eur), [Iban]);
        assert_eq!(Network::for_currency(Currency::Jpy), [Iban]);
        assert_eq!(Network::for_currency(Currency::Btc), [Bitcoin]);
        assert_eq!(
            Network::for_currency(Currency::Eth),
            [Ethereum, Arbitrum, Base]
        );
        assert_eq!(
            Network::for_currency(Currency::Usdc),
            [Ethereum, Arbitrum, Base]
        );
        assert_eq!(Network::for_currency(Currency::Usdt), [Ethereum, Arbitrum]);
        assert_eq!(
            Network::for_currency(Currency::Dai),
            [Ethereum, Arbitrum, Base]
        );
        assert_eq!(Network::for_currency(Currency::Gusd), [Ethereum]);
        for currency in Currency::ALL {
            assert!(!Network::for_currency(currency).is_empty(), "{currency}");
        }
        let err = Base.check_carries(Currency::Usdt).unwrap_err();
        assert_eq!(err.code(), "network_currency_mismatch");
        assert_eq!(
            err.to_string(),
            "network base does not carry USDT; USDT is carried on: ethereum, arbitrum"
        );
    }

    #[test]
    fn network_names() {
        for network in Network::ALL {
            assert_eq!(network.name().parse::<Network>().unwrap(), network);
            let json = serde_json::to_string(&network).unwrap();
            assert_eq!(json, format!("\"{}\"", network.name()));
        }
        assert_eq!(
            "solana".parse::<Network>().unwrap_err().code(),
            "unknown_network"
        );
        assert!("IBAN".parse::<Network>().is_err());
    }
}
