//! Line quantities and the exact line amount `quantity × unit_amount_minor`.

use std::fmt;

use rust_decimal::Decimal;
use serde::{Serialize, Serializer};
use thiserror::Error;

use super::currency::Currency;
use super::error::{Coded, echo};
use super::money::{MAX_INTEGER_DIGITS, MinorAmount, MoneyError, digits_to_i128, split_decimal};

/// Most fractional digits a quantity may have.
pub const MAX_QUANTITY_DECIMALS: u32 = 6;

/// Largest quantity accepted on a line.
pub const MAX_QUANTITY: u32 = 1_000_000_000;

/// A line quantity: exact, > 0, ≤ 1,000,000,000, at most 6 decimals. Kept without trailing
/// fractional zeros, so `"1.50"` and `"1.5"` have one spelling in the sealed payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Quantity(Decimal);

/// Why a quantity was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum QuantityError {
    #[error(
        "`{}` is not a quantity: send a decimal string such as \"1\" or \"1.5\" (no sign, \
         exponent, spaces or separators)",
        echo(given)
    )]
    InvalidFormat { given: String },
    #[error(
        "quantity `{}` has {decimals} decimal places; at most {MAX_QUANTITY_DECIMALS} are \
         allowed and Tauros never rounds",
        echo(given)
    )]
    TooManyDecimals { given: String, decimals: usize },
    #[error(
        "quantity `{}` is out of range: it must be greater than 0 and at most {MAX_QUANTITY}",
        echo(given)
    )]
    OutOfRange { given: String },
}

impl Coded for QuantityError {
    fn code(&self) -> &'static str {
        match self {
            QuantityError::InvalidFormat { .. } => "invalid_format",
            QuantityError::TooManyDecimals { .. } => "too_many_decimals",
            QuantityError::OutOfRange { .. } => "quantity_out_of_range",
        }
    }
}

impl Quantity {
    /// Parses a quantity string with the same strict grammar as amounts.
    pub fn parse(text: &str) -> Result<Self, QuantityError> {
        let invalid = || QuantityError::InvalidFormat {
            given: text.to_owned(),
        };
        let out_of_range = || QuantityError::OutOfRange {
            given: text.to_owned(),
        };
        let (int, frac) = split_decimal(text).ok_or_else(invalid)?;
        let scale = u32::try_from(frac.len()).map_err(|_| invalid())?;
        if scale > MAX_QUANTITY_DECIMALS {
            return Err(QuantityError::TooManyDecimals {
                given: text.to_owned(),
                decimals: frac.len(),
            });
        }
        // Leading zeros aside, more than 10 integer digits is above a billion for sure; cutting
        // there keeps the mantissa far inside what `Decimal` holds.
        if int.len() > MAX_INTEGER_DIGITS || int.trim_start_matches('0').len() > 10 {
            return Err(out_of_range());
        }
        let mantissa = digits_to_i128(int.bytes().chain(frac.bytes())).ok_or_else(invalid)?;
        let value = Decimal::try_from_i128_with_scale(mantissa, scale).map_err(|_| invalid())?;
        if value <= Decimal::ZERO || value > Decimal::from(MAX_QUANTITY) {
            return Err(out_of_range());
        }
        Ok(Quantity(value.normalize()))
    }

    /// The exact decimal value.
    pub fn as_decimal(self) -> Decimal {
        self.0
    }

    /// The line amount `self × unit`, exact to the minor unit or an error; never rounded.
    pub fn times(self, unit: MinorAmount, currency: Currency) -> Result<MinorAmount, MoneyError> {
        // The quantity is mantissa / 10^scale; in lowest terms n / d. Since n and d share no
        // factor, the product is a whole number of minor units exactly when d divides `unit`,
        // and dividing first keeps the intermediate inside i128 whenever the result is.
        let mantissa = self.0.mantissa();
        let ten_pow_scale = 10_i128
            .checked_pow(self.0.scale())
            .ok_or(MoneyError::OutOfRange)?;
        let common = gcd(mantissa, ten_pow_scale);
        let n = mantissa.checked_div(common).ok_or(MoneyError::OutOfRange)?;
        let d = ten_pow_scale
            .checked_div(common)
            .ok_or(MoneyError::OutOfRange)?;
        if unit.get().checked_rem(d) != Some(0) {
            return Err(MoneyError::NotExact {
                quantity: self.to_string(),
                unit_amount: unit.to_major_string(currency),
                currency,
            });
        }
        let amount = unit
            .get()
            .checked_div(d)
            .and_then(|units| units.checked_mul(n))
            .ok_or(MoneyError::OutOfRange)?;
        MinorAmount::new(amount)
    }
}

/// Greatest common divisor of two positive numbers (Euclid; `checked_rem` ends it at b = 0).
fn gcd(mut a: i128, mut b: i128) -> i128 {
    while let Some(rest) = a.checked_rem(b) {
        a = b;
        b = rest;
    }
    a
}

/// The normalized plain form: `"1.5"`, `"2"`, never an exponent.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn q(text: &str) -> Quantity {
        Quantity::parse(text).unwrap()
    }

    fn minor(value: i128) -> MinorAmount {
        MinorAmount::new(value).unwrap()
    }

    #[test]
    fn quantities_are_normalized() {
        assert_eq!(q("1.50").to_string(), "1.5");
        assert_eq!(q("2.000").to_string(), "2");
        assert_eq!(q("2").to_string(), "2");
        assert_eq!(q("0100").to_string(), "100");
        assert_eq!(q("100").to_string(), "100");
        assert_eq!(q("1000000000").to_string(), "1000000000");
        assert_eq!(q("0.000001").to_string(), "0.000001");
        assert_eq!(q(&format!("{}1.5", "0".repeat(29))).to_string(), "1.5");
        assert_eq!(q("1.50"), q("1.5"));
    }

    #[test]
    fn quantity_rules() {
        let code = |text: &str| Quantity::parse(text).unwrap_err().code();
        assert_eq!(code("0"), "quantity_out_of_range");
        assert_eq!(code("0.000000"), "quantity_out_of_range");
        assert_eq!(code("1000000000.000001"), "quantity_out_of_range");
        assert_eq!(code("99999999999"), "quantity_out_of_range");
        assert_eq!(code(&"9".repeat(30)), "quantity_out_of_range");
        assert_eq!(code("1.0000001"), "too_many_decimals");
        assert_eq!(code("1.0000000"), "too_many_decimals");
        for bad in ["", "-1", "+1", "1e3", "1.", ".5", " 1", "1,5", "one"] {
            assert_eq!(code(bad), "invalid_format", "{bad:?}");
        }
        assert_eq!(code(&"1".repeat(31)), "quantity_out_of_range");
        assert_eq!(
            code(&format!("{}1", "0".repeat(30))),
            "quantity_out_of_range"
        );
    }

    #[test]
    fn line_amounts_are_exact_or_refused() {
        let eur = Currency::Eur;
        assert_eq!(q("1.5").times(minor(12_050), eur), Ok(minor(18_075)));
        assert_eq!(q("2").times(minor(40_000), eur), Ok(minor(80_000)));
        assert_eq!(q("0.25").times(minor(4), eur), Ok(minor(1)));
        assert_eq!(q("3").times(MinorAmount::ZERO, eur), Ok(MinorAmount::ZERO));
        let err = q("1.5").times(minor(5), eur).unwrap_err();
        assert_eq!(err.code(), "amount_not_exact");
        assert!(
            err.to_string().contains("1.5 × unit amount 0.05 EUR"),
            "{err}"
        );
    }

    #[test]
    fn line_amounts_do_not_overflow_early() {
        // 0.5 × i128::MAX-ish: multiplying first would overflow, dividing first does not.
        let even = i128::MAX - 1;
        assert_eq!(
            q("0.5").times(minor(even), Currency::Eth),
            Ok(minor(even / 2))
        );
        assert_eq!(
            q("2").times(minor(i128::MAX), Currency::Eth),
            Err(MoneyError::OutOfRange)
        );
    }

    proptest! {
        #[test]
        fn times_matches_exact_rational_arithmetic(
            mantissa in 1_i64..=1_000_000_000_000,
            scale in 0_u32..=6,
            unit in 0_i64..=i64::MAX,
        ) {
            let quantity = Quantity(Decimal::new(mantissa, scale).normalize());
            let product = i128::from(mantissa) * i128::from(unit);
            let ten = 10_i128.pow(scale);
            let expected = (product % ten == 0).then(|| product / ten);
            let got = quantity.times(minor(i128::from(unit)), Currency::Usd).ok().map(MinorAmount::get);
            prop_assert_eq!(got, expected);
        }

        #[test]
        fn times_never_panics(mantissa in 1_i64..=1_000_000_000_000_000, scale in 0_u32..=6, unit in 0..=i128::MAX) {
            let quantity = Quantity(Decimal::new(mantissa, scale).normalize());
            let _ = quantity.times(minor(unit), Currency::Eth);
        }

        #[test]
        fn parsing_never_panics(text in "\\PC{0,40}") {
            let _ = Quantity::parse(&text);
        }

        #[test]
        fn parse_display_round_trips(int in 1_u32..=999_999_999, frac in "[0-9]{0,6}") {
            let text = if frac.is_empty() { int.to_string() } else { format!("{int}.{frac}") };
            let quantity = q(&text);
            prop_assert_eq!(Quantity::parse(&quantity.to_string()), Ok(quantity));
            prop_assert!(!quantity.to_string().contains('e'));
            prop_assert!(!quantity.to_string().ends_with('0') || !quantity.to_string().contains('.'));
        }
    }
}
