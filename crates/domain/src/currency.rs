//! The currency registry: every currency Tauros accepts and its minor-unit decimals. An
//! exponent is part of the money contract: changing one changes every stored amount's meaning.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use thiserror::Error;

use super::error::{Coded, echo};

/// A currency Tauros can invoice in: crypto assets, then ISO 4217 fiat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Currency {
    /// Bitcoin, 8 decimals (satoshi).
    Btc,
    /// Ether, 18 decimals (wei).
    Eth,
    /// Tether USD, 6 decimals.
    Usdt,
    /// USD Coin, 6 decimals.
    Usdc,
    /// Dai, 18 decimals.
    Dai,
    /// TrueUSD, 18 decimals.
    Tusd,
    /// Binance USD, 18 decimals.
    Busd,
    /// First Digital USD, 18 decimals.
    Fdusd,
    /// Gemini Dollar, 2 decimals.
    Gusd,
    /// Pax Dollar under its former symbol, 18 decimals.
    Pax,
    /// Pax Dollar, 18 decimals.
    Usdp,
    /// Liquity USD, 18 decimals.
    Lusd,
    /// Frax, 18 decimals.
    Frax,
    /// Synthetix USD, 18 decimals.
    Susd,
    Usd,
    Eur,
    Chf,
    Gbp,
    Jpy,
    Cad,
    Aud,
    Nzd,
    Sek,
    Nok,
    Dkk,
    Sgd,
    Bhd,
    Kwd,
}

/// An unknown or misspelt currency code.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[error(
    "`{}` is not a supported currency; send one of these uppercase codes: {}",
    echo(given),
    supported_codes()
)]
pub struct UnknownCurrency {
    pub given: String,
}

impl Coded for UnknownCurrency {
    fn code(&self) -> &'static str {
        "unknown_currency"
    }
}

impl Currency {
    /// Every supported currency, in registry order (crypto first, then fiat).
    pub const ALL: [Currency; 28] = [
        Currency::Btc,
        Currency::Eth,
        Currency::Usdt,
        Currency::Usdc,
        Currency::Dai,
        Currency::Tusd,
        Currency::Busd,
        Currency::Fdusd,
        Currency::Gusd,
        Currency::Pax,
        Currency::Usdp,
        Currency::Lusd,
        Currency::Frax,
        Currency::Susd,
        Currency::Usd,
        Currency::Eur,
        Currency::Chf,
        Currency::Gbp,
        Currency::Jpy,
        Currency::Cad,
        Currency::Aud,
        Currency::Nzd,
        Currency::Sek,
        Currency::Nok,
        Currency::Dkk,
        Currency::Sgd,
        Currency::Bhd,
        Currency::Kwd,
    ];

    /// The uppercase code, as sent and stored (`"EUR"`, `"USDC"`).
    pub fn code(self) -> &'static str {
        match self {
            Currency::Btc => "BTC",
            Currency::Eth => "ETH",
            Currency::Usdt => "USDT",
            Currency::Usdc => "USDC",
            Currency::Dai => "DAI",
            Currency::Tusd => "TUSD",
            Currency::Busd => "BUSD",
            Currency::Fdusd => "FDUSD",
            Currency::Gusd => "GUSD",
            Currency::Pax => "PAX",
            Currency::Usdp => "USDP",
            Currency::Lusd => "LUSD",
            Currency::Frax => "FRAX",
            Currency::Susd => "SUSD",
            Currency::Usd => "USD",
            Currency::Eur => "EUR",
            Currency::Chf => "CHF",
            Currency::Gbp => "GBP",
            Currency::Jpy => "JPY",
            Currency::Cad => "CAD",
            Currency::Aud => "AUD",
            Currency::Nzd => "NZD",
            Currency::Sek => "SEK",
            Currency::Nok => "NOK",
            Currency::Dkk => "DKK",
            Currency::Sgd => "SGD",
            Currency::Bhd => "BHD",
            Currency::Kwd => "KWD",
        }
    }

    /// Number of decimals of the minor unit: 1 major = 10^exponent minor.
    pub fn exponent(self) -> u8 {
        match self {
            Currency::Jpy => 0,
            Currency::Usd
            | Currency::Eur
            | Currency::Chf
            | Currency::Gbp
            | Currency::Cad
            | Currency::Aud
            | Currency::Nzd
            | Currency::Sek
            | Currency::Nok
            | Currency::Dkk
            | Currency::Sgd
            | Currency::Gusd => 2,
            Currency::Bhd | Currency::Kwd => 3,
            Currency::Usdt | Currency::Usdc => 6,
            Currency::Btc => 8,
            Currency::Eth
            | Currency::Dai
            | Currency::Tusd
            | Currency::Busd
            | Currency::Fdusd
            | Currency::Pax
            | Currency::Usdp
            | Currency::Lusd
            | Currency::Frax
            | Currency::Susd => 18,
        }
    }

    /// True for ISO 4217 currencies (paid by bank transfer), false for crypto assets.
    pub fn is_fiat(self) -> bool {
        matches!(
            self,
            Currency::Usd
                | Currency::Eur
                | Currency::Chf
                | Currency::Gbp
                | Currency::Jpy
                | Currency::Cad
                | Currency::Aud
                | Currency::Nzd
                | Currency::Sek
                | Currency::Nok
                | Currency::Dkk
                | Currency::Sgd
                | Currency::Bhd
                | Currency::Kwd
        )
    }

    /// True for the USD-pegged tokens (every crypto asset except BTC and ETH).
    pub fn is_stablecoin(self) -> bool {
        !self.is_fiat() && !matches!(self, Currency::Btc | Currency::Eth)
    }

    /// `fiat`, `stablecoin` or `crypto`, as `GET /v1/currencies` names the family.
    pub fn kind(self) -> &'static str {
        if self.is_fiat() {
            "fiat"
        } else if self.is_stablecoin() {
            "stablecoin"
        } else {
            "crypto"
        }
    }
}

fn supported_codes() -> String {
    Currency::ALL.map(Currency::code).join(", ")
}

impl FromStr for Currency {
    type Err = UnknownCurrency;

    /// Exact uppercase match only: `"eur"` is refused so that one currency has one spelling.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Currency::ALL
            .into_iter()
            .find(|c| c.code() == s)
            .ok_or_else(|| UnknownCurrency {
                given: s.to_owned(),
            })
    }
}

impl fmt::Display for Currency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

impl Serialize for Currency {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.code())
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let code = String::deserialize(deserializer)?;
        code.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exponents_match_the_registry() {
        let expected = [
            ("USD", 2),
            ("EUR", 2),
            ("CHF", 2),
            ("GBP", 2),
            ("CAD", 2),
            ("AUD", 2),
            ("NZD", 2),
            ("SEK", 2),
            ("NOK", 2),
            ("DKK", 2),
            ("SGD", 2),
            ("JPY", 0),
            ("BHD", 3),
            ("KWD", 3),
            ("BTC", 8),
            ("USDC", 6),
            ("USDT", 6),
            ("GUSD", 2),
            ("ETH", 18),
            ("DAI", 18),
        ];
        for (code, exponent) in expected {
            let currency: Currency = code.parse().unwrap();
            assert_eq!(currency.exponent(), exponent, "{code}");
            assert_eq!(currency.code(), code);
        }
    }

    #[test]
    fn every_code_round_trips_and_is_unique() {
        for c in Currency::ALL {
            assert_eq!(c.code().parse::<Currency>().unwrap(), c);
            assert_eq!(c.code(), c.code().to_ascii_uppercase());
            assert!(
                c.exponent() <= 18,
                "the decimal grammar allows 18 decimals at most"
            );
        }
        let mut codes: Vec<_> = Currency::ALL.iter().map(|c| c.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Currency::ALL.len());
    }

    #[test]
    fn unknown_and_lowercase_codes_are_refused() {
        for bad in ["DOGE", "eur", "Eur", " EUR", "", "EURO"] {
            let err = bad.parse::<Currency>().unwrap_err();
            assert_eq!(err.code(), "unknown_currency");
            assert!(err.to_string().contains("EUR, CHF"), "{err}");
        }
    }

    #[test]
    fn fiat_and_stablecoin_families() {
        assert!(Currency::Jpy.is_fiat());
        assert!(!Currency::Btc.is_fiat() && !Currency::Btc.is_stablecoin());
        assert!(Currency::Gusd.is_stablecoin() && Currency::Dai.is_stablecoin());
        assert_eq!(Currency::ALL.iter().filter(|c| c.is_fiat()).count(), 14);
    }

    #[test]
    fn serde_uses_the_code_string() {
        assert_eq!(serde_json::to_string(&Currency::Usdc).unwrap(), "\"USDC\"");
        let c: Currency = serde_json::from_str("\"KWD\"").unwrap();
        assert_eq!(c, Currency::Kwd);
        assert!(serde_json::from_str::<Currency>("\"usd\"").is_err());
    }
}
