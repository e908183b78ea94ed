//! Exact money: integer minor units in an `i128`, parsed from strict strings, never rounded.
//! Every operation is checked: an amount that does not fit is an error, never a wrap or a panic.

use std::{fmt, iter};

use serde::{Serialize, Serializer};
use thiserror::Error;

use super::currency::Currency;
use super::error::{Coded, echo};

/// Most digits accepted before the decimal point of a major-unit string.
pub const MAX_INTEGER_DIGITS: usize = 30;

/// The largest amount in minor units accepted as a JSON integer (2^53, docs/MONEY.md): every
/// JSON parser reads integers up to it exactly, and many round larger ones to a double without
/// a word, so a larger amount comes as a string of digits.
pub const MAX_JSON_INTEGER: i128 = 1 << 53;

/// An exact, non-negative amount in minor units; the currency is its invoice revision's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MinorAmount(i128);

/// Why an amount was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum MoneyError {
    #[error(
        "`{}` is not a decimal amount: send major units as a string of digits with an optional \
         dot and decimals, such as \"1200.50\" (no sign, exponent, spaces or separators)",
        echo(given)
    )]
    InvalidDecimal { given: String },
    #[error(
        "`{}` is not a whole number of minor units: send a JSON integer or a string of digits \
         such as \"120050\"",
        echo(given)
    )]
    InvalidMinor { given: String },
    #[error("amounts cannot be negative: send zero or a positive amount")]
    Negative,
    /// More fractional digits than the currency has, even if they are zeros.
    #[error(
        "`{}` has {decimals} decimal places but {}; Tauros never rounds money, so send at most \
         that many decimals (or the amount in minor units)",
        echo(given),
        allowed_decimals(*currency)
    )]
    TooManyDecimals {
        currency: Currency,
        given: String,
        decimals: usize,
    },
    #[error(
        "the amount is too large: Tauros accepts at most {MAX_INTEGER_DIGITS} digits before the \
         decimal point and at most {} minor units per amount and per total",
        i128::MAX
    )]
    OutOfRange,
    /// A JSON integer beyond [`MAX_JSON_INTEGER`]: the sender's JSON parser may have rounded it.
    #[error(
        "a JSON integer amount is accepted up to {MAX_JSON_INTEGER} (2^53) only: beyond it, JSON \
         parsers round numbers silently; send a larger amount as a string of digits, such as \
         \"12345678901234567890\""
    )]
    BeyondJsonInteger,
    #[error(
        "quantity {quantity} × unit amount {unit_amount} {currency} is not a whole number of \
         minor units ({}); Tauros never rounds money, so change the quantity or the unit amount \
         so that the line amount is exact",
        allowed_decimals(*currency)
    )]
    NotExact {
        quantity: String,
        /// The unit amount in major units.
        unit_amount: String,
        currency: Currency,
    },
    #[error("the invoice total is zero: at least one line must have a positive amount")]
    TotalNotPositive,
}

impl Coded for MoneyError {
    fn code(&self) -> &'static str {
        match self {
            MoneyError::InvalidDecimal { .. } | MoneyError::InvalidMinor { .. } => "invalid_format",
            MoneyError::Negative => "negative_amount",
            MoneyError::TooManyDecimals { .. } => "too_many_decimals",
            MoneyError::OutOfRange | MoneyError::BeyondJsonInteger => "amount_out_of_range",
            MoneyError::NotExact { .. } => "amount_not_exact",
            MoneyError::TotalNotPositive => "total_not_positive",
        }
    }
}

fn allowed_decimals(currency: Currency) -> String {
    match currency.exponent() {
        0 => format!("{currency} has no decimal places"),
        n => format!("{currency} allows at most {n}"),
    }
}

impl MinorAmount {
    /// Zero minor units.
    pub const ZERO: MinorAmount = MinorAmount(0);

    /// Wraps a minor-unit integer; negative values are refused.
    pub fn new(value: i128) -> Result<Self, MoneyError> {
        if value < 0 {
            Err(MoneyError::Negative)
        } else {
            Ok(MinorAmount(value))
        }
    }

    /// The minor-unit integer.
    pub fn get(self) -> i128 {
        self.0
    }

    /// True for zero.
    pub fn is_zero(self) -> bool {
        self.0 == 0
    }

    /// `self + other`, or `amount_out_of_range`.
    pub fn checked_add(self, other: MinorAmount) -> Result<Self, MoneyError> {
        self.0
            .checked_add(other.0)
            .map(MinorAmount)
            .ok_or(MoneyError::OutOfRange)
    }

    /// `self - other`, or `None` when `other` is larger (amounts are never negative).
    pub fn checked_sub(self, other: MinorAmount) -> Option<Self> {
        self.0
            .checked_sub(other.0)
            .filter(|v| *v >= 0)
            .map(MinorAmount)
    }

    /// Sum of amounts, or `amount_out_of_range` as soon as it overflows.
    pub fn checked_sum(amounts: impl IntoIterator<Item = MinorAmount>) -> Result<Self, MoneyError> {
        amounts
            .into_iter()
            .try_fold(MinorAmount::ZERO, MinorAmount::checked_add)
    }

    /// Parses a major-unit decimal string (`"1200.50"` EUR → 120050); never rounds.
    pub fn parse_major(currency: Currency, text: &str) -> Result<Self, MoneyError> {
        let Some((int, frac)) = split_decimal(text) else {
            return Err(sign_or(text, || MoneyError::InvalidDecimal {
                given: text.to_owned(),
            }));
        };
        let exponent = usize::from(currency.exponent());
        if frac.len() > exponent {
            return Err(MoneyError::TooManyDecimals {
                currency,
                given: text.to_owned(),
                decimals: frac.len(),
            });
        }
        if int.len() > MAX_INTEGER_DIGITS {
            return Err(MoneyError::OutOfRange);
        }
        // Appending the missing zeros turns major units into minor units without arithmetic
        // on fractions: "10.5" EUR reads as the digits 1, 0, 5, 0.
        let missing_zeros = iter::repeat_n(b'0', exponent - frac.len());
        let digits = int.bytes().chain(frac.bytes()).chain(missing_zeros);
        digits_to_i128(digits)
            .map(MinorAmount)
            .ok_or(MoneyError::OutOfRange)
    }

    /// Parses a string of digits holding minor units (`"120050"`).
    pub fn parse_minor(text: &str) -> Result<Self, MoneyError> {
        if !is_digits(text) {
            return Err(sign_or(text, || MoneyError::InvalidMinor {
                given: text.to_owned(),
            }));
        }
        digits_to_i128(text.bytes())
            .map(MinorAmount)
            .ok_or(MoneyError::OutOfRange)
    }

    /// Major units with exactly the currency's decimals: `"1200.50"`, JPY `"1200"`. Written
    /// backwards on the stack: one allocation, as a view formats several amounts per request.
    pub fn to_major_string(self, currency: Currency) -> String {
        // i128::MAX has 39 digits; the dot and the zeros before it add at most exponent + 2.
        let mut buffer = [0u8; 48];
        let exponent = usize::from(currency.exponent());
        let mut at = buffer.len();
        let mut written = 0;
        // Prepends a digit (and the dot after the `exponent`-th); answers the digits written.
        let mut push = |digit: u8| {
            at -= 1;
            buffer[at] = b'0' + digit;
            written += 1;
            if written == exponent {
                at -= 1;
                buffer[at] = b'.';
            }
            written
        };
        // Never negative (`new` refuses it). Nearly all amounts fit 64 bits: divide in 64 bits.
        let mut rest = self.0.unsigned_abs();
        while rest > u128::from(u64::MAX) {
            push((rest % 10) as u8);
            rest /= 10;
        }
        let mut rest = rest as u64;
        loop {
            let digits = push((rest % 10) as u8);
            rest /= 10;
            if rest == 0 && digits > exponent {
                break;
            }
        }
        // Only ASCII digits and the dot were written.
        String::from_utf8_lossy(&buffer[at..]).into_owned()
    }
}

/// Writes the minor-unit integer (`120050`).
impl fmt::Display for MinorAmount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Serializes as a JSON integer, even beyond 2^53. `serde_json::to_value` and `json!` fail
/// beyond `u64`, so responses must be serialized directly (as axum's `Json` does).
impl Serialize for MinorAmount {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_i128(self.0)
    }
}

/// The total of an invoice: checked sum of the line amounts, which must be positive.
pub fn invoice_total(
    line_amounts: impl IntoIterator<Item = MinorAmount>,
) -> Result<MinorAmount, MoneyError> {
    let total = MinorAmount::checked_sum(line_amounts)?;
    if total.is_zero() {
        Err(MoneyError::TotalNotPositive)
    } else {
        Ok(total)
    }
}

/// Splits `digits[.digits]`, the whole grammar of amounts and quantities; `None` otherwise.
pub(crate) fn split_decimal(text: &str) -> Option<(&str, &str)> {
    let (int, frac) = match text.split_once('.') {
        Some((int, frac)) if is_digits(frac) => (int, frac),
        Some(_) => return None,
        None => (text, ""),
    };
    is_digits(int).then_some((int, frac))
}

/// Reads ASCII digits into an `i128`; `None` on overflow or on a non-digit.
pub(crate) fn digits_to_i128(digits: impl IntoIterator<Item = u8>) -> Option<i128> {
    digits.into_iter().try_fold(0_i128, |value, byte| {
        let digit = char::from(byte).to_digit(10)?;
        value.checked_mul(10)?.checked_add(i128::from(digit))
    })
}

fn is_digits(text: &str) -> bool {
    !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit())
}

/// A leading minus on an otherwise valid number gets the more useful `negative_amount`.
fn sign_or(text: &str, otherwise: impl FnOnce() -> MoneyError) -> MoneyError {
    match text.strip_prefix('-') {
        Some(rest) if split_decimal(rest).is_some() => MoneyError::Negative,
        _ => otherwise(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn major(currency: Currency, text: &str) -> Result<i128, MoneyError> {
        MinorAmount::parse_major(currency, text).map(MinorAmount::get)
    }

    #[test]
    fn major_strings_become_exact_minor_units() {
        assert_eq!(major(Currency::Eur, "1200.50"), Ok(120_050));
        assert_eq!(major(Currency::Eur, "10.50"), Ok(1050));
        assert_eq!(major(Currency::Eur, "10.5"), Ok(1050));
        assert_eq!(major(Currency::Eur, "400"), Ok(40_000));
        assert_eq!(major(Currency::Eur, "400.00"), Ok(40_000));
        assert_eq!(major(Currency::Eur, "0"), Ok(0));
        assert_eq!(major(Currency::Eur, "007.5"), Ok(750));
        assert_eq!(major(Currency::Jpy, "1200"), Ok(1200));
        assert_eq!(major(Currency::Bhd, "1.234"), Ok(1234));
        assert_eq!(major(Currency::Btc, "0.00000001"), Ok(1));
        assert_eq!(major(Currency::Usdc, "1.000001"), Ok(1_000_001));
        assert_eq!(
            major(Currency::Eth, "123456789.123456789012345678"),
            Ok(123_456_789_123_456_789_012_345_678)
        );
    }

    #[test]
    fn too_many_decimals_is_refused_never_rounded() {
        let cases = [
            (Currency::Eur, "10.005", 3),
            (Currency::Eur, "10.500", 3),
            (Currency::Jpy, "1200.0", 1),
            (Currency::Usdc, "1.0000001", 7),
            (Currency::Eth, "1.0000000000000000001", 19),
        ];
        for (currency, text, decimals) in cases {
            let err = MinorAmount::parse_major(currency, text).unwrap_err();
            assert_eq!(
                err,
                MoneyError::TooManyDecimals {
                    currency,
                    given: text.to_owned(),
                    decimals
                }
            );
            assert_eq!(err.code(), "too_many_decimals");
        }
        let jpy = MinorAmount::parse_major(Currency::Jpy, "1.5").unwrap_err();
        assert!(
            jpy.to_string().contains("JPY has no decimal places"),
            "{jpy}"
        );
    }

    #[test]
    fn malformed_major_strings_are_invalid_format() {
        for bad in [
            "", ".", "1.", ".5", "+1", "1e3", "1E3", " 1", "1 ", "1,000", "1_000", "0x10", "１",
            "1..2", "1.2.3", "NaN", "inf", "١٢",
        ] {
            let err = MinorAmount::parse_major(Currency::Eur, bad).unwrap_err();
            assert_eq!(err.code(), "invalid_format", "{bad:?}");
        }
    }

    #[test]
    fn negative_amounts_have_their_own_code() {
        for bad in ["-1", "-0.50"] {
            let err = MinorAmount::parse_major(Currency::Eur, bad).unwrap_err();
            assert_eq!(err, MoneyError::Negative);
        }
        assert_eq!(MinorAmount::parse_minor("-5"), Err(MoneyError::Negative));
        assert_eq!(MinorAmount::new(-1), Err(MoneyError::Negative));
    }

    #[test]
    fn out_of_range_is_an_error() {
        // The grammar allows 30 integer digits, even where i128 could hold more.
        let thirty_one = "1".repeat(31);
        assert_eq!(
            MinorAmount::parse_major(Currency::Jpy, &thirty_one),
            Err(MoneyError::OutOfRange)
        );
        // 30 integer digits with 18 decimals is 48 digits: beyond i128.
        let huge = format!("{}.5", "9".repeat(30));
        assert_eq!(
            MinorAmount::parse_major(Currency::Eth, &huge),
            Err(MoneyError::OutOfRange)
        );
        let max = i128::MAX.to_string();
        assert_eq!(
            MinorAmount::parse_minor(&max).map(MinorAmount::get),
            Ok(i128::MAX)
        );
        let above = "170141183460469231731687303715884105728";
        assert_eq!(MinorAmount::parse_minor(above), Err(MoneyError::OutOfRange));
        let big = MinorAmount::new(i128::MAX).unwrap();
        assert_eq!(
            big.checked_add(MinorAmount::new(1).unwrap()),
            Err(MoneyError::OutOfRange)
        );
    }

    #[test]
    fn minor_digit_strings() {
        assert_eq!(
            MinorAmount::parse_minor("120050").map(MinorAmount::get),
            Ok(120_050)
        );
        assert_eq!(MinorAmount::parse_minor("000").map(MinorAmount::get), Ok(0));
        for bad in ["", "1.0", "+1", "1e3", " 1", "12a"] {
            assert_eq!(
                MinorAmount::parse_minor(bad).unwrap_err().code(),
                "invalid_format",
                "{bad:?}"
            );
        }
    }

    #[test]
    fn formatting_uses_exactly_the_currency_decimals() {
        let fmt = |currency, minor| MinorAmount::new(minor).unwrap().to_major_string(currency);
        assert_eq!(fmt(Currency::Eur, 120_050), "1200.50");
        assert_eq!(fmt(Currency::Eur, 5), "0.05");
        assert_eq!(fmt(Currency::Eur, 0), "0.00");
        assert_eq!(fmt(Currency::Jpy, 1200), "1200");
        assert_eq!(fmt(Currency::Kwd, 1), "0.001");
        assert_eq!(fmt(Currency::Btc, 100_000_000), "1.00000000");
        assert_eq!(fmt(Currency::Eth, 1), "0.000000000000000001");
        assert_eq!(
            fmt(Currency::Eth, i128::MAX),
            "170141183460469231731.687303715884105727"
        );
    }

    #[test]
    fn totals_are_checked_and_positive() {
        let a = |v| MinorAmount::new(v).unwrap();
        assert_eq!(invoice_total([a(1), a(2)]), Ok(a(3)));
        assert_eq!(
            invoice_total([a(0), a(0)]),
            Err(MoneyError::TotalNotPositive)
        );
        assert_eq!(invoice_total([]), Err(MoneyError::TotalNotPositive));
        assert_eq!(
            invoice_total([a(i128::MAX), a(1)]),
            Err(MoneyError::OutOfRange)
        );
    }

    #[test]
    fn serializes_as_a_json_integer_beyond_2_pow_53() {
        let wei = MinorAmount::new(123_456_789_012_345_678_901_234_567_890).unwrap();
        assert_eq!(
            serde_json::to_string(&wei).unwrap(),
            "123456789012345678901234567890"
        );
    }

    fn any_currency() -> impl Strategy<Value = Currency> {
        proptest::sample::select(Currency::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn parse_format_round_trips(currency in any_currency(), minor in 0..=i128::MAX) {
            let amount = MinorAmount::new(minor).unwrap();
            let text = amount.to_major_string(currency);
            let integer_digits = text.split('.').next().unwrap_or_default().len();
            // Beyond 30 integer digits only the minor form carries it; the major one refuses it.
            let expected = if integer_digits <= MAX_INTEGER_DIGITS { Ok(amount) } else { Err(MoneyError::OutOfRange) };
            prop_assert_eq!(MinorAmount::parse_major(currency, &text), expected);
            prop_assert_eq!(MinorAmount::parse_minor(&amount.to_string()), Ok(amount));
        }

        #[test]
        fn format_parse_round_trips(currency in any_currency(), int in "[1-9][0-9]{0,15}", frac in "[0-9]{18}") {
            let exponent = usize::from(currency.exponent());
            let text = if exponent == 0 { int } else { format!("{int}.{}", &frac[..exponent]) };
            let amount = MinorAmount::parse_major(currency, &text).unwrap();
            prop_assert_eq!(amount.to_major_string(currency), text);
        }

        #[test]
        fn more_decimals_than_the_exponent_are_always_refused(
            currency in any_currency(),
            int in "[0-9]{1,30}",
            frac in "[0-9]{1,24}",
        ) {
            let text = format!("{int}.{frac}");
            let result = MinorAmount::parse_major(currency, &text);
            if frac.len() > usize::from(currency.exponent()) {
                let is_too_many = matches!(result, Err(MoneyError::TooManyDecimals { .. }));
                prop_assert!(is_too_many, "{text} gave {result:?}");
            } else {
                let is_too_many = matches!(result, Err(MoneyError::TooManyDecimals { .. }));
                prop_assert!(!is_too_many, "{text} gave {result:?}");
            }
        }

        #[test]
        fn parsing_arbitrary_text_never_panics(currency in any_currency(), text in "\\PC{0,60}") {
            let _ = MinorAmount::parse_major(currency, &text);
            let _ = MinorAmount::parse_minor(&text);
        }

        #[test]
        fn parsing_numberlike_text_never_panics(currency in any_currency(), text in "[-+0-9.eE ]{0,60}") {
            let _ = MinorAmount::parse_major(currency, &text);
            let _ = MinorAmount::parse_minor(&text);
        }

        #[test]
        fn arithmetic_never_panics(a in any::<i128>(), b in any::<i128>()) {
            match (MinorAmount::new(a), MinorAmount::new(b)) {
                (Ok(x), Ok(y)) => {
                    let sum = x.checked_add(y);
                    prop_assert_eq!(sum.is_ok(), a.checked_add(b).is_some());
                    let _ = invoice_total([x, y, x]);
                }
                (x, y) => prop_assert!((a < 0) == x.is_err() && (b < 0) == y.is_err()),
            }
        }
    }
}
