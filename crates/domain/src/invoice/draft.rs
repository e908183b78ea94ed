//! Every rule of a draft's content (docs/contract/domain.md §3–§4, docs/contract/api.md
//! Invoices); every broken rule is reported at once.
//!
//! Two steps, so a create's replay is recognised between them (it succeeds even when the parties
//! changed or the due date passed since): [`check_content`] on the request alone, then
//! [`check_parties`] on facts read under the invoice's locks. A draft refused in step 1 is
//! checked against step 2 too, with what step 1 could read ([`RefusedContent::known`]).

use chrono::NaiveDate;
use uuid::Uuid;

use crate::currency::Currency;
use crate::error::{FieldError, missing};
use crate::lines::{LineInput, validate_lines};
use crate::payload::{Payload, PayloadDestination, PayloadLine};
use crate::text::checked_multiline_text;

/// The most characters of an agent's `reasoning`.
pub const MAX_REASONING_CHARS: usize = 4000;

/// The content of a create or revise as sent; optional members, so every missing one is reported.
#[derive(Debug, Default, Clone)]
pub struct DraftInput {
    /// The customer billed (one of the agent's).
    pub customer_id: Option<Uuid>,
    /// Where the money goes (one of the agent's active destinations).
    pub payment_destination_id: Option<Uuid>,
    /// ISO 4217 or token code; must be the destination's currency.
    pub currency: Option<String>,
    /// `YYYY-MM-DD`, today (UTC) or later.
    pub due_date: Option<String>,
    /// 1–100 lines.
    pub lines: Option<Vec<LineInput>>,
    /// Why the agent proposes this (not sealed), 1–4000 characters.
    pub reasoning: Option<String>,
}

/// A draft's content once every field rule holds; the parties are not checked yet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DraftContent {
    pub customer_id: Uuid,
    pub destination_id: Uuid,
    pub currency: Currency,
    pub due_date: NaiveDate,
    pub lines: Vec<PayloadLine>,
    /// Trimmed.
    pub reasoning: String,
}

impl DraftContent {
    /// Its members as the party rules read them.
    pub fn known(&self) -> KnownMembers {
        KnownMembers {
            customer_id: Some(self.customer_id),
            destination_id: Some(self.destination_id),
            currency: Some(self.currency),
            due_date: Some(self.due_date),
        }
    }

    /// What the seal covers, with the destination's network and address as stored.
    pub fn payload(&self, destination: PayloadDestination) -> Payload {
        Payload {
            customer_id: self.customer_id,
            destination,
            currency: self.currency,
            due_date: self.due_date,
            lines: self.lines.clone(),
        }
    }
}

/// The members of a refused draft that could still be read, for the party rules.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct KnownMembers {
    pub customer_id: Option<Uuid>,
    pub destination_id: Option<Uuid>,
    pub currency: Option<Currency>,
    pub due_date: Option<NaiveDate>,
}

/// Why step 1 refused a draft, and what it could read of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RefusedContent {
    pub errors: Vec<FieldError>,
    pub known: KnownMembers,
}

/// Step 1: every field rule of a create (`current` is `None`) or a revise, which keeps what it
/// omits from the current revision's sealed content.
pub fn check_content(
    input: &DraftInput,
    current: Option<&Payload>,
) -> Result<DraftContent, RefusedContent> {
    let mut errors = Vec::new();
    let customer_id = input.customer_id.or(current.map(|c| c.customer_id));
    if customer_id.is_none() {
        errors.push(missing("customer_id"));
    }
    let destination_id = input
        .payment_destination_id
        .or(current.map(|c| c.destination.id));
    if destination_id.is_none() {
        errors.push(missing("payment_destination_id"));
    }
    let currency = match (&input.currency, current) {
        (Some(code), _) => code
            .trim()
            .parse::<Currency>()
            .map_err(|e| errors.push(FieldError::new("currency", &e)))
            .ok(),
        (None, Some(c)) => Some(c.currency),
        (None, None) => {
            errors.push(missing("currency"));
            None
        }
    };
    let due_date = match (&input.due_date, current) {
        (Some(text), _) => parse_due_date(text).map_err(|e| errors.push(e)).ok(),
        (None, Some(c)) => Some(c.due_date),
        (None, None) => {
            errors.push(missing("due_date"));
            None
        }
    };
    let reasoning = match &input.reasoning {
        Some(text) => Some(checked_multiline_text(
            "reasoning",
            text,
            MAX_REASONING_CHARS,
            &mut errors,
        )),
        None => {
            errors.push(missing("reasoning"));
            None
        }
    };
    let lines = match (&input.lines, currency, current) {
        (Some(lines), Some(currency), _) => match validate_lines(currency, lines) {
            Ok(valid) => Some(valid.payload_lines()),
            Err(mut line_errors) => {
                errors.append(&mut line_errors);
                None
            }
        },
        // The currency's own error is already listed; lines cannot be read without it.
        (Some(_), None, _) => None,
        (None, Some(currency), Some(c)) if currency != c.currency => {
            // Stored lines are minor units of the old currency: they would mean other money.
            errors.push(FieldError::plain(
                "lines",
                "required",
                "send `lines` again when changing the currency: amounts are in the currency's units",
            ));
            None
        }
        (None, Some(_), Some(c)) => Some(c.lines.clone()),
        (None, _, current) => {
            if current.is_none() {
                errors.push(missing("lines"));
            }
            None
        }
    };
    let content = || {
        Some(DraftContent {
            customer_id: customer_id?,
            destination_id: destination_id?,
            currency: currency?,
            due_date: due_date?,
            lines: lines?,
            reasoning: reasoning?,
        })
    };
    match content() {
        Some(content) if errors.is_empty() => Ok(content),
        _ => Err(RefusedContent {
            errors,
            known: KnownMembers {
                customer_id,
                destination_id,
                currency,
                due_date,
            },
        }),
    }
}

/// The destination a draft names, as the agent may see it.
#[derive(Debug, Clone, Copy)]
pub struct NamedDestination<'a> {
    pub active: bool,
    pub currency: &'a str,
}

/// A party a draft names: not named at all (its own error is step 1's), not one of the
/// proposing agent's (unknown and foreign are the same), or the agent's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Party<T> {
    NotNamed,
    NotAgents,
    Agents(T),
}

/// What step 2 needs, read under the invoice's locks (or, for a draft step 1 refused, without
/// them). A rule whose inputs are unknown is skipped: step 1 already reported them.
#[derive(Debug, Clone, Copy)]
pub struct PartyFacts<'a> {
    /// Today's date in UTC.
    pub today: NaiveDate,
    pub due_date: Option<NaiveDate>,
    pub currency: Option<Currency>,
    pub customer: Party<()>,
    pub destination: Party<NamedDestination<'a>>,
}

/// Step 2: the rules that depend on the database's current state.
pub fn check_parties(facts: PartyFacts<'_>) -> Result<(), Vec<FieldError>> {
    let mut errors = Vec::new();
    if facts.due_date.is_some_and(|due| due < facts.today) {
        errors.push(FieldError::plain(
            "due_date",
            "due_date_in_past",
            format!("due_date must be today ({}, UTC) or later", facts.today),
        ));
    }
    if facts.customer == Party::NotAgents {
        errors.push(FieldError::plain(
            "customer_id",
            "unknown_customer",
            "no customer with this id is yours; send one of your customers' ids (GET /v1/customers)",
        ));
    }
    match facts.destination {
        Party::NotNamed => {}
        Party::NotAgents => errors.push(FieldError::plain(
            "payment_destination_id",
            "unknown_destination",
            "no payment destination with this id is yours; send one of your destinations' ids",
        )),
        Party::Agents(d) if !d.active => errors.push(FieldError::plain(
            "payment_destination_id",
            "destination_inactive",
            "this payment destination no longer receives money; send an active one (GET /v1/payment-destinations?state=active)",
        )),
        Party::Agents(d) if facts.currency.is_some_and(|c| c.code() != d.currency) => {
            errors.push(FieldError::plain(
            "currency",
            "currency_mismatch",
            format!(
                "the payment destination receives {}; send currency {} or another destination",
                d.currency, d.currency
            ),
            ));
        }
        Party::Agents(_) => {}
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// Reads `YYYY-MM-DD`; whether the date is still ahead is a party rule (step 2).
fn parse_due_date(text: &str) -> Result<NaiveDate, FieldError> {
    let text = text.trim();
    match NaiveDate::parse_from_str(text, "%Y-%m-%d") {
        Ok(date) if text.len() == 10 => Ok(date),
        _ => Err(FieldError::plain(
            "due_date",
            "invalid_date",
            "send due_date as YYYY-MM-DD",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::address::Network;

    fn line(amount: &str) -> LineInput {
        serde_json::from_value(serde_json::json!({
            "description": "Work", "quantity": "1", "unit_amount": amount
        }))
        .unwrap()
    }

    fn full() -> DraftInput {
        DraftInput {
            customer_id: Some(Uuid::from_u128(1)),
            payment_destination_id: Some(Uuid::from_u128(2)),
            currency: Some("EUR".into()),
            due_date: Some("2030-01-31".into()),
            lines: Some(vec![line("400.00")]),
            reasoning: Some("  agreed  ".into()),
        }
    }

    fn fields(errors: &[FieldError]) -> Vec<(&str, &str)> {
        errors.iter().map(|e| (e.field.as_str(), e.code)).collect()
    }

    #[test]
    fn a_complete_create_passes_with_trimmed_reasoning() {
        let content = check_content(&full(), None).unwrap();
        assert_eq!(content.currency, Currency::Eur);
        assert_eq!(content.reasoning, "agreed");
        assert_eq!(content.lines.len(), 1);
    }

    #[test]
    fn an_empty_create_names_every_missing_field() {
        let errors = check_content(&DraftInput::default(), None)
            .unwrap_err()
            .errors;
        assert_eq!(
            fields(&errors),
            [
                ("customer_id", "required"),
                ("payment_destination_id", "required"),
                ("currency", "required"),
                ("due_date", "required"),
                ("reasoning", "required"),
                ("lines", "required"),
            ]
        );
    }

    #[test]
    fn a_revise_keeps_omitted_fields_but_needs_lines_for_a_new_currency() {
        let stored = check_content(&full(), None).unwrap();
        let current = stored.payload(PayloadDestination {
            id: stored.destination_id,
            network: Network::Iban,
            address: "CH9300762011623852957".into(),
        });
        let only_reasoning = DraftInput {
            reasoning: Some("again".into()),
            ..DraftInput::default()
        };
        let kept = check_content(&only_reasoning, Some(&current)).unwrap();
        assert_eq!(kept.lines, stored.lines);
        assert_eq!(kept.due_date, stored.due_date);

        let new_currency = DraftInput {
            currency: Some("USD".into()),
            ..only_reasoning
        };
        let errors = check_content(&new_currency, Some(&current))
            .unwrap_err()
            .errors;
        assert_eq!(fields(&errors), [("lines", "required")]);
    }

    #[test]
    fn malformed_fields_are_reported_together() {
        let input = DraftInput {
            currency: Some("EURO".into()),
            due_date: Some("31.01.2030".into()),
            reasoning: Some(" ".into()),
            ..full()
        };
        let refused = check_content(&input, None).unwrap_err();
        assert_eq!(refused.known.due_date, None);
        assert_eq!(refused.known.customer_id, Some(Uuid::from_u128(1)));
        let errors = refused.errors;
        assert_eq!(
            fields(&errors),
            [
                ("currency", "unknown_currency"),
                ("due_date", "invalid_date"),
                ("reasoning", "required"),
            ]
        );
    }

    fn facts(destination: Party<NamedDestination<'_>>) -> PartyFacts<'_> {
        PartyFacts {
            today: NaiveDate::from_ymd_opt(2030, 1, 31).unwrap(),
            due_date: NaiveDate::from_ymd_opt(2030, 1, 31),
            currency: Some(Currency::Eur),
            customer: Party::Agents(()),
            destination,
        }
    }

    #[test]
    fn parties_pass_when_everything_is_the_agents_and_active() {
        let ok = NamedDestination {
            active: true,
            currency: "EUR",
        };
        assert!(check_parties(facts(Party::Agents(ok))).is_ok());
    }

    #[test]
    fn every_party_rule_is_reported_at_once() {
        let mut f = facts(Party::Agents(NamedDestination {
            active: true,
            currency: "USD",
        }));
        f.due_date = f.today.pred_opt();
        f.customer = Party::NotAgents;
        let errors = check_parties(f).unwrap_err();
        assert_eq!(
            fields(&errors),
            [
                ("due_date", "due_date_in_past"),
                ("customer_id", "unknown_customer"),
                ("currency", "currency_mismatch"),
            ]
        );
        let inactive = NamedDestination {
            active: false,
            currency: "EUR",
        };
        let errors = check_parties(facts(Party::Agents(inactive))).unwrap_err();
        assert_eq!(
            fields(&errors),
            [("payment_destination_id", "destination_inactive")]
        );
        let errors = check_parties(facts(Party::NotAgents)).unwrap_err();
        assert_eq!(
            fields(&errors),
            [("payment_destination_id", "unknown_destination")]
        );
        // What step 1 could not read is not judged again.
        let mut unknown = facts(Party::NotNamed);
        unknown.due_date = None;
        unknown.currency = None;
        unknown.customer = Party::NotNamed;
        assert!(check_parties(unknown).is_ok());
    }
}
