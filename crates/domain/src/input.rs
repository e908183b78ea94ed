//! Money and quantity fields as they arrive in JSON: only the shape, so the money rules
//! (`lines::validate_lines`) report every offending field at once. A float is refused with a
//! message starting [`FLOAT_NOT_ALLOWED`] and `": "` (the HTTP layer's cue for a 400). An integer
//! is an integer whatever its size: beyond [`MAX_JSON_INTEGER`] it is `amount_out_of_range`; the
//! wire reads a literal beyond 64 bits, which serde_json would hand to `visit_f64`, as the
//! largest 64-bit integer of its sign (`http::json::saturate_wide_integers` in the api crate).

use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Unexpected, Visitor};

use super::currency::Currency;
use super::money::{MAX_JSON_INTEGER, MinorAmount, MoneyError};
use super::quantity::{Quantity, QuantityError};

/// Marker that starts the serde error message of a float in a money or quantity field.
pub const FLOAT_NOT_ALLOWED: &str = "float_not_allowed";

/// How each field is sent instead of a float; docs/MONEY.md quotes these, so keep them alike.
const MAJOR_HINT: &str = "send unit_amount as a decimal string in major units such as \"1200.50\"";
const MINOR_HINT: &str =
    "send unit_amount_minor as an integer number of minor units such as 120050";
const AMOUNT_HINT: &str = "send amount as a decimal string in major units such as \"1200.50\"";
const AMOUNT_MINOR_HINT: &str =
    "send amount_minor as an integer number of minor units such as 120050";
const QUANTITY_HINT: &str = "send quantity as a decimal string such as \"1.5\"";
const NEVER: &str = "floating-point numbers are never accepted";

/// `unit_amount` as sent: a decimal string in major units (`"1200.50"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MajorAmountInput(pub String);

/// `unit_amount_minor` as sent: a JSON integer, or a string of digits beyond 2^53.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MinorAmountInput {
    /// A JSON integer, kept even when negative so validation can name the problem.
    Integer(i128),
    /// A JSON string, expected to hold only digits.
    Text(String),
}

/// `quantity` as sent: a decimal string (`"1.5"`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QuantityInput(pub String);

/// A settlement event's `amount`: the same input as `unit_amount`, with its own hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmountInput(pub MajorAmountInput);

/// A settlement event's `amount_minor`: the same input as `unit_amount_minor`, own hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AmountMinorInput(pub MinorAmountInput);

impl MajorAmountInput {
    /// Applies the money rules of `currency` (grammar, decimals, range).
    pub fn to_minor(&self, currency: Currency) -> Result<MinorAmount, MoneyError> {
        MinorAmount::parse_major(currency, &self.0)
    }
}

impl MinorAmountInput {
    /// Applies the minor-unit rules (digits only, not negative, in range).
    pub fn to_minor(&self) -> Result<MinorAmount, MoneyError> {
        match self {
            MinorAmountInput::Integer(value) if *value > MAX_JSON_INTEGER => {
                Err(MoneyError::BeyondJsonInteger)
            }
            MinorAmountInput::Integer(value) => MinorAmount::new(*value),
            MinorAmountInput::Text(text) => MinorAmount::parse_minor(text),
        }
    }
}

impl QuantityInput {
    /// Applies the quantity rules.
    pub fn to_quantity(&self) -> Result<Quantity, QuantityError> {
        Quantity::parse(&self.0)
    }
}

/// The error of a float in a field, with that field's own hint.
fn float_error<E: de::Error>(value: f64, hint: &str) -> E {
    // A whole number this large most likely was an exact integer that the JSON parser could
    // only read as a float; tell the client how to send it instead.
    const TWO_POW_53: f64 = 9_007_199_254_740_992.0;
    if value.fract() == 0.0 && value.abs() >= TWO_POW_53 {
        E::custom(format_args!(
            "{FLOAT_NOT_ALLOWED}: {hint}; {NEVER}; integers beyond 2^53 must be sent as strings \
             of digits"
        ))
    } else {
        E::custom(format_args!("{FLOAT_NOT_ALLOWED}: {hint}; {NEVER}"))
    }
}

/// Reads a major-unit field; `minor_field` names its minor-unit twin.
struct MajorVisitor {
    minor_field: &'static str,
    hint: &'static str,
}

impl Visitor<'_> for MajorVisitor {
    type Value = MajorAmountInput;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "a decimal string in major units such as \"1200.50\" (integer minor units go in \
             {})",
            self.minor_field
        )
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(MajorAmountInput(value.to_owned()))
    }

    // An integer here is ambiguous (major or minor units?), so it is a type error, not a guess.
    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Unsigned(value), &self))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Signed(value), &self))
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Other("integer"), &self))
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Other("integer"), &self))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Err(float_error(value, self.hint))
    }
}

/// Reads a minor-unit field; `hint` says how to send it instead of a float.
struct MinorVisitor {
    hint: &'static str,
}

impl Visitor<'_> for MinorVisitor {
    type Value = MinorAmountInput;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an integer number of minor units, or a string of digits")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(MinorAmountInput::Text(value.to_owned()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Ok(MinorAmountInput::Integer(i128::from(value)))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Ok(MinorAmountInput::Integer(i128::from(value)))
    }

    // Not reached through serde_json, but other formats may send 128-bit integers.
    fn visit_u128<E: de::Error>(self, value: u128) -> Result<Self::Value, E> {
        Ok(match i128::try_from(value) {
            Ok(value) => MinorAmountInput::Integer(value),
            Err(_) => MinorAmountInput::Text(value.to_string()),
        })
    }

    fn visit_i128<E: de::Error>(self, value: i128) -> Result<Self::Value, E> {
        Ok(MinorAmountInput::Integer(value))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Err(float_error(value, self.hint))
    }
}

struct QuantityVisitor;

impl Visitor<'_> for QuantityVisitor {
    type Value = QuantityInput;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a decimal string such as \"1\" or \"1.5\"")
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Self::Value, E> {
        Ok(QuantityInput(value.to_owned()))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Unsigned(value), &self))
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Signed(value), &self))
    }

    fn visit_u128<E: de::Error>(self, _: u128) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Other("integer"), &self))
    }

    fn visit_i128<E: de::Error>(self, _: i128) -> Result<Self::Value, E> {
        Err(E::invalid_type(Unexpected::Other("integer"), &self))
    }

    fn visit_f64<E: de::Error>(self, value: f64) -> Result<Self::Value, E> {
        Err(float_error(value, QUANTITY_HINT))
    }
}

impl<'de> Deserialize<'de> for MajorAmountInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MajorVisitor {
            minor_field: "unit_amount_minor",
            hint: MAJOR_HINT,
        })
    }
}

impl<'de> Deserialize<'de> for MinorAmountInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(MinorVisitor { hint: MINOR_HINT })
    }
}

impl<'de> Deserialize<'de> for AmountInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(MajorVisitor {
                minor_field: "amount_minor",
                hint: AMOUNT_HINT,
            })
            .map(AmountInput)
    }
}

impl<'de> Deserialize<'de> for AmountMinorInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer
            .deserialize_any(MinorVisitor {
                hint: AMOUNT_MINOR_HINT,
            })
            .map(AmountMinorInput)
    }
}

impl<'de> Deserialize<'de> for QuantityInput {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_any(QuantityVisitor)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const FLOAT_PREFIX: &str = "float_not_allowed: send ";

    fn error<T: for<'de> Deserialize<'de> + fmt::Debug>(json: &str) -> String {
        serde_json::from_str::<T>(json).unwrap_err().to_string()
    }

    #[test]
    fn floats_are_refused_with_the_marker_in_every_field() {
        // serde_json reads `-0` as the float -0.0, so it is refused like any float.
        for json in ["1.5", "400.00", "1e3", "0.0", "-2.5", "1E-7", "-0"] {
            assert!(
                error::<MajorAmountInput>(json).starts_with(FLOAT_PREFIX),
                "{json}"
            );
            assert!(
                error::<MinorAmountInput>(json).starts_with(FLOAT_PREFIX),
                "{json}"
            );
            assert!(
                error::<QuantityInput>(json).starts_with(FLOAT_PREFIX),
                "{json}"
            );
            assert!(!error::<MinorAmountInput>(json).contains("2^53"), "{json}");
        }
    }

    #[test]
    fn each_field_says_how_to_send_it() {
        assert!(error::<QuantityInput>("1.5").contains("send quantity as a decimal string"));
        assert!(error::<MajorAmountInput>("1.5").contains("send unit_amount as a decimal string"));
        assert!(error::<MinorAmountInput>("1.5").contains("send unit_amount_minor as an integer"));
        assert!(error::<AmountInput>("1.5").contains("send amount as a decimal string"));
        assert!(error::<AmountMinorInput>("1.5").contains("send amount_minor as an integer"));
        assert!(error::<AmountInput>("400").contains("amount_minor"));
        assert!(!error::<AmountInput>("400").contains("unit_amount"));
        for message in [
            error::<QuantityInput>("1.5"),
            error::<MajorAmountInput>("1.5"),
            error::<MinorAmountInput>("1.5"),
            error::<AmountInput>("1.5"),
            error::<AmountMinorInput>("1.5"),
        ] {
            assert!(message.contains(NEVER), "{message}");
        }
    }

    #[test]
    fn a_whole_float_beyond_2_53_is_told_to_come_as_digits() {
        let message = error::<MinorAmountInput>("1e20");
        assert!(message.starts_with(FLOAT_PREFIX), "{message}");
        assert!(message.contains("integers beyond 2^53 must be sent as strings of digits"));
    }

    #[test]
    fn a_json_integer_is_an_amount_up_to_2_53_and_out_of_range_beyond() {
        let minor = |json: &str| {
            serde_json::from_str::<MinorAmountInput>(json)
                .unwrap()
                .to_minor()
        };
        assert_eq!(minor("9007199254740992").unwrap().get(), 1 << 53);
        for beyond in ["9007199254740993", "18446744073709551615"] {
            assert_eq!(
                minor(beyond),
                Err(MoneyError::BeyondJsonInteger),
                "{beyond}"
            );
        }
        assert_eq!(minor("-9223372036854775808"), Err(MoneyError::Negative));
        // The same amounts as digits are exact.
        assert_eq!(
            minor("\"18446744073709551615\"").unwrap().get(),
            i128::from(u64::MAX)
        );
    }

    #[test]
    fn minor_amounts_accept_integers_and_digit_strings() {
        let parse = |json| serde_json::from_str::<MinorAmountInput>(json).unwrap();
        assert_eq!(parse("40000"), MinorAmountInput::Integer(40_000));
        assert_eq!(parse("\"40000\""), MinorAmountInput::Text("40000".into()));
        assert_eq!(parse("40000").to_minor().unwrap().get(), 40_000);
        assert_eq!(
            parse("\"123456789012345678901234567890\"")
                .to_minor()
                .unwrap()
                .get(),
            123_456_789_012_345_678_901_234_567_890
        );
    }

    #[test]
    fn negative_integers_are_a_validation_error_not_a_type_error() {
        let input = serde_json::from_str::<MinorAmountInput>("-5").unwrap();
        assert_eq!(input.to_minor(), Err(MoneyError::Negative));
    }

    #[test]
    fn integers_are_a_type_error_for_major_amounts_and_quantities() {
        let major = error::<MajorAmountInput>("400");
        assert!(major.contains("invalid type: integer `400`"), "{major}");
        assert!(major.contains("unit_amount_minor"), "{major}");
        assert!(!major.starts_with(FLOAT_NOT_ALLOWED));
        let quantity = error::<QuantityInput>("2");
        assert!(quantity.contains("decimal string"), "{quantity}");
    }

    #[test]
    fn other_json_types_are_type_errors() {
        for json in ["true", "null", "[]", "{}"] {
            assert!(!error::<MajorAmountInput>(json).starts_with(FLOAT_NOT_ALLOWED));
            assert!(!error::<MinorAmountInput>(json).starts_with(FLOAT_NOT_ALLOWED));
            assert!(!error::<QuantityInput>(json).starts_with(FLOAT_NOT_ALLOWED));
        }
    }

    proptest! {
        #[test]
        fn every_fractional_json_number_is_refused(int in 0_u64..1_000_000_000, frac in "[0-9]{1,20}") {
            let json = format!("{int}.{frac}");
            prop_assert!(error::<MinorAmountInput>(&json).starts_with(FLOAT_PREFIX));
            prop_assert!(error::<MajorAmountInput>(&json).starts_with(FLOAT_PREFIX));
        }
    }
}
