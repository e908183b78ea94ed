//! Invoice lines: the input, the rules that validate it against a currency, and the view.

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::currency::Currency;
use super::error::{Coded, FieldError};
use super::input::{MajorAmountInput, MinorAmountInput, QuantityInput};
use super::money::{MinorAmount, MoneyError, invoice_total};
use super::payload::PayloadLine;
use super::quantity::Quantity;
use super::text::{Lines, unclean};

/// Fewest lines an invoice may have.
pub const MIN_LINES: usize = 1;
/// Most lines an invoice may have.
pub const MAX_LINES: usize = 100;
/// Longest line description, in Unicode scalar values after trimming and NFC.
pub const MAX_DESCRIPTION_CHARS: usize = 500;

/// One line before validation; members optional so [`validate_lines`] reports a missing one too.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LineInput {
    /// Free text, trimmed, 1–500 characters.
    #[serde(default)]
    pub description: Option<String>,
    /// Decimal string, > 0, ≤ 1e9, ≤ 6 decimals.
    #[serde(default)]
    pub quantity: Option<QuantityInput>,
    /// Unit price in major units (`"1200.50"`); exclusive with `unit_amount_minor`.
    #[serde(default)]
    pub unit_amount: Option<MajorAmountInput>,
    /// Unit price in minor units (`120050`); exclusive with `unit_amount`.
    #[serde(default)]
    pub unit_amount_minor: Option<MinorAmountInput>,
}

/// A line that passed every rule, with its exact amount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedLine {
    /// Trimmed and NFC-normalized, as stored and hashed.
    pub description: String,
    pub quantity: Quantity,
    pub unit_amount_minor: MinorAmount,
    /// `quantity × unit_amount_minor`, exact.
    pub amount_minor: MinorAmount,
}

/// All lines of a revision and their total (> 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidatedLines {
    pub lines: Vec<ValidatedLine>,
    pub total_minor: MinorAmount,
}

/// Line rules that are not about money.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum LineError {
    #[error(
        "description is required: send 1 to {MAX_DESCRIPTION_CHARS} characters describing the line"
    )]
    MissingDescription,
    #[error("quantity is required: send a decimal string such as \"1\" or \"1.5\"")]
    MissingQuantity,
    #[error(
        "a unit price is required: send unit_amount (a decimal string in major units, such as \
         \"1200.50\") or unit_amount_minor (an integer of minor units, such as 120050)"
    )]
    MissingUnitPrice,
    #[error(
        "send the unit price once: either unit_amount (a decimal string in major units) or \
         unit_amount_minor (an integer of minor units), not both"
    )]
    ConflictingUnitPrices,
    #[error("description has {0} characters; at most {MAX_DESCRIPTION_CHARS} are allowed")]
    DescriptionTooLong(usize),
    #[error("an invoice has {MIN_LINES} to {MAX_LINES} lines; {0} were sent")]
    LineCount(usize),
    #[error(
        "description holds an invisible or control character (U+{0:04X} at position {1}); send \
         plain text: an approver must see exactly what is sealed"
    )]
    HiddenCharacter(u32, usize),
}

impl Coded for LineError {
    fn code(&self) -> &'static str {
        match self {
            LineError::MissingDescription
            | LineError::MissingQuantity
            | LineError::MissingUnitPrice => "required",
            LineError::ConflictingUnitPrices => "conflicting_fields",
            LineError::DescriptionTooLong(_) => "invalid_length",
            LineError::LineCount(_) => "invalid_line_count",
            LineError::HiddenCharacter(..) => "invalid_characters",
        }
    }
}

impl ValidatedLine {
    /// The part of the line that is sealed in the payload.
    pub fn to_payload_line(&self) -> PayloadLine {
        PayloadLine {
            description: self.description.clone(),
            quantity: self.quantity,
            unit_amount_minor: self.unit_amount_minor,
        }
    }
}

impl ValidatedLines {
    /// The lines as the payload seals them.
    pub fn payload_lines(&self) -> Vec<PayloadLine> {
        self.lines
            .iter()
            .map(ValidatedLine::to_payload_line)
            .collect()
    }
}

/// Validates request lines for `currency`; on failure returns every offending field.
pub fn validate_lines(
    currency: Currency,
    lines: &[LineInput],
) -> Result<ValidatedLines, Vec<FieldError>> {
    let mut errors = Vec::new();
    if lines.len() > MAX_LINES {
        // Refused before any line is checked: a list far over its maximum must not cost a
        // check (and an error) per item.
        return Err(vec![FieldError::new(
            "lines",
            &LineError::LineCount(lines.len()),
        )]);
    }
    if lines.len() < MIN_LINES {
        errors.push(FieldError::new("lines", &LineError::LineCount(lines.len())));
    }
    let mut valid = Vec::with_capacity(lines.len());
    for (index, line) in lines.iter().enumerate() {
        match validate_line(currency, line, &format!("lines[{index}]")) {
            Ok(line) => valid.push(line),
            Err(mut line_errors) => errors.append(&mut line_errors),
        }
    }
    if !errors.is_empty() {
        return Err(errors);
    }
    let total_minor = invoice_total(valid.iter().map(|line| line.amount_minor))
        .map_err(|error| vec![FieldError::new("lines", &error)])?;
    Ok(ValidatedLines {
        lines: valid,
        total_minor,
    })
}

fn validate_line(
    currency: Currency,
    line: &LineInput,
    path: &str,
) -> Result<ValidatedLine, Vec<FieldError>> {
    let mut errors = Vec::new();
    let at = |field: &str| format!("{path}{field}");

    let description = record(&mut errors, at(".description"), description(line));
    let quantity = match &line.quantity {
        Some(input) => record(&mut errors, at(".quantity"), input.to_quantity()),
        None => record(
            &mut errors,
            at(".quantity"),
            Err(LineError::MissingQuantity),
        ),
    };
    let unit_amount_minor = match (&line.unit_amount, &line.unit_amount_minor) {
        (Some(major), None) => record(&mut errors, at(".unit_amount"), major.to_minor(currency)),
        (None, Some(minor)) => record(&mut errors, at(".unit_amount_minor"), minor.to_minor()),
        (Some(_), Some(_)) => record(&mut errors, at(""), Err(LineError::ConflictingUnitPrices)),
        (None, None) => record(
            &mut errors,
            at(".unit_amount"),
            Err(LineError::MissingUnitPrice),
        ),
    };

    let (Some(description), Some(quantity), Some(unit_amount_minor)) =
        (description, quantity, unit_amount_minor)
    else {
        return Err(errors);
    };
    let amount_minor = quantity
        .times(unit_amount_minor, currency)
        .map_err(|error| vec![FieldError::new(path, &error)])?;
    Ok(ValidatedLine {
        description,
        quantity,
        unit_amount_minor,
        amount_minor,
    })
}

/// Keeps the value, or records the error under `field` and gives `None`.
fn record<T, E: Coded>(
    errors: &mut Vec<FieldError>,
    field: String,
    result: Result<T, E>,
) -> Option<T> {
    result
        .map_err(|error| errors.push(FieldError::new(field, &error)))
        .ok()
}

/// Trims and NFC-normalizes (what is stored is what is hashed), then checks the length.
fn description(line: &LineInput) -> Result<String, LineError> {
    let text = line.description.as_deref().unwrap_or_default();
    let normalized = crate::text::nfc(text.trim()).into_owned();
    if let Some((position, c)) = unclean(&normalized, Lines::Many) {
        return Err(LineError::HiddenCharacter(u32::from(c), position));
    }
    match normalized.chars().count() {
        0 => Err(LineError::MissingDescription),
        n if n > MAX_DESCRIPTION_CHARS => Err(LineError::DescriptionTooLong(n)),
        _ => Ok(normalized),
    }
}

/// A line as shown in responses: every amount in both forms. The `_minor` integers are exact
/// even beyond 2^53; clients that read JSON numbers as doubles should read the strings.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LineView {
    pub description: String,
    pub quantity: Quantity,
    /// With exactly the currency's decimals (`"1200.50"`).
    pub unit_amount: String,
    pub unit_amount_minor: MinorAmount,
    /// With exactly the currency's decimals.
    pub amount: String,
    pub amount_minor: MinorAmount,
}

impl LineView {
    /// Builds the view of a stored line; fails only if the stored line is not exact.
    pub fn new(currency: Currency, line: &PayloadLine) -> Result<Self, MoneyError> {
        let amount_minor = line.quantity.times(line.unit_amount_minor, currency)?;
        Ok(LineView {
            description: line.description.clone(),
            quantity: line.quantity,
            unit_amount: line.unit_amount_minor.to_major_string(currency),
            unit_amount_minor: line.unit_amount_minor,
            amount: amount_minor.to_major_string(currency),
            amount_minor,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn lines(value: serde_json::Value) -> Vec<LineInput> {
        serde_json::from_value(value).unwrap()
    }

    fn fields(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors.iter().map(|e| (e.field.as_str(), e.code)).collect()
    }

    #[test]
    fn both_input_forms_give_the_same_lines() {
        let input = lines(json!([
            {"description": "Design", "quantity": "1", "unit_amount": "400"},
            {"description": "Build", "quantity": "2.00", "unit_amount": "400.00"},
            {"description": "Review", "quantity": "1.5", "unit_amount_minor": 12050},
            {"description": "Hosting", "quantity": "1", "unit_amount_minor": "40000"},
        ]));
        let valid = validate_lines(Currency::Eur, &input).unwrap();
        let minor: Vec<_> = valid
            .lines
            .iter()
            .map(|l| l.unit_amount_minor.get())
            .collect();
        assert_eq!(minor, [40_000, 40_000, 12_050, 40_000]);
        let amounts: Vec<_> = valid.lines.iter().map(|l| l.amount_minor.get()).collect();
        assert_eq!(amounts, [40_000, 80_000, 18_075, 40_000]);
        assert_eq!(valid.total_minor.get(), 178_075);
        assert_eq!(valid.lines[1].quantity.to_string(), "2");
    }

    #[test]
    fn every_offending_field_is_reported() {
        let input = lines(json!([
            {"description": "  ", "quantity": "0", "unit_amount": "10.005"},
            {"description": "ok", "quantity": "1.5", "unit_amount": "0.05"},
            {"description": "ok", "quantity": "1", "unit_amount": "1", "unit_amount_minor": 100},
            {"description": "ok", "quantity": "1.0000001"},
            {"quantity": "abc", "unit_amount_minor": -5},
            {"description": "x".repeat(501), "unit_amount_minor": "12a"},
            {"description": "ok", "quantity": "1", "unit_amount": "-1"},
        ]));
        let errors = validate_lines(Currency::Eur, &input).unwrap_err();
        assert_eq!(
            fields(&errors),
            [
                ("lines[0].description", "required"),
                ("lines[0].quantity", "quantity_out_of_range"),
                ("lines[0].unit_amount", "too_many_decimals"),
                ("lines[1]", "amount_not_exact"),
                ("lines[2]", "conflicting_fields"),
                ("lines[3].quantity", "too_many_decimals"),
                ("lines[3].unit_amount", "required"),
                ("lines[4].description", "required"),
                ("lines[4].quantity", "invalid_format"),
                ("lines[4].unit_amount_minor", "negative_amount"),
                ("lines[5].description", "invalid_length"),
                ("lines[5].quantity", "required"),
                ("lines[5].unit_amount_minor", "invalid_format"),
                ("lines[6].unit_amount", "negative_amount"),
            ]
        );
        assert!(errors.iter().all(|e| !e.detail.is_empty()));
    }

    #[test]
    fn line_count_limits() {
        let one = json!({"description": "a", "quantity": "1", "unit_amount": "1"});
        let errors = validate_lines(Currency::Eur, &[]).unwrap_err();
        assert_eq!(fields(&errors), [("lines", "invalid_line_count")]);
        let hundred = lines(json!(vec![one.clone(); 100]));
        assert_eq!(
            validate_lines(Currency::Eur, &hundred).unwrap().lines.len(),
            100
        );
        let too_many = lines(json!(vec![one; 101]));
        let errors = validate_lines(Currency::Eur, &too_many).unwrap_err();
        assert_eq!(fields(&errors), [("lines", "invalid_line_count")]);
        // Over the maximum, no line is checked: 10,000 empty lines are one error, not 30,000.
        let empty = lines(json!(vec![json!({}); 10_000]));
        let errors = validate_lines(Currency::Eur, &empty).unwrap_err();
        assert_eq!(fields(&errors), [("lines", "invalid_line_count")]);
    }

    #[test]
    fn total_must_be_positive_and_in_range() {
        let zero = lines(json!([{"description": "free", "quantity": "3", "unit_amount": "0"}]));
        let errors = validate_lines(Currency::Eur, &zero).unwrap_err();
        assert_eq!(fields(&errors), [("lines", "total_not_positive")]);

        let max = i128::MAX.to_string();
        let overflow = lines(json!([
            {"description": "a", "quantity": "1", "unit_amount_minor": max},
            {"description": "b", "quantity": "1", "unit_amount_minor": "1"},
        ]));
        let errors = validate_lines(Currency::Eth, &overflow).unwrap_err();
        assert_eq!(fields(&errors), [("lines", "amount_out_of_range")]);

        let line_overflow =
            lines(json!([{"description": "a", "quantity": "2", "unit_amount_minor": max}]));
        let errors = validate_lines(Currency::Eth, &line_overflow).unwrap_err();
        assert_eq!(fields(&errors), [("lines[0]", "amount_out_of_range")]);
    }

    #[test]
    fn descriptions_are_trimmed_and_nfc_normalized() {
        let input =
            lines(json!([{"description": "  Cafe\u{301}\n", "quantity": "1", "unit_amount": "1"}]));
        let valid = validate_lines(Currency::Eur, &input).unwrap();
        assert_eq!(valid.lines[0].description, "Caf\u{e9}");
        let exactly_500 =
            lines(json!([{"description": "é".repeat(500), "quantity": "1", "unit_amount": "1"}]));
        assert!(validate_lines(Currency::Eur, &exactly_500).is_ok());
    }

    #[test]
    fn unknown_fields_and_floats_fail_deserialization() {
        let unknown =
            json!([{"description": "a", "quantity": "1", "unit_amount": "1", "amount": "1"}]);
        let message = serde_json::from_value::<Vec<LineInput>>(unknown)
            .unwrap_err()
            .to_string();
        assert!(message.contains("unknown field `amount`"), "{message}");
        let float = r#"[{"description":"a","quantity":"1","unit_amount_minor":1.0}]"#;
        let message = serde_json::from_str::<Vec<LineInput>>(float)
            .unwrap_err()
            .to_string();
        assert!(message.starts_with("float_not_allowed: "), "{message}");
    }

    #[test]
    fn views_show_both_forms() {
        let input = lines(json!([{"description": "Build", "quantity": "2", "unit_amount": "400"}]));
        let valid = validate_lines(Currency::Eur, &input).unwrap();
        let view = LineView::new(Currency::Eur, &valid.lines[0].to_payload_line()).unwrap();
        assert_eq!(
            serde_json::to_string(&view).unwrap(),
            r#"{"description":"Build","quantity":"2","unit_amount":"400.00","unit_amount_minor":40000,"amount":"800.00","amount_minor":80000}"#
        );
    }
}
