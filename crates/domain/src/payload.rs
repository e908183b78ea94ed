//! The seal: a revision's canonical payload and its SHA-256 (docs/MONEY.md). The approver
//! approves a hash, so it covers exactly the money facts. The bytes are written by hand and
//! checked against independent golden vectors (`fixtures/golden/`): a new encoding is a new
//! `SCHEMA`, never a silent change.

use chrono::{Datelike, NaiveDate};
use serde::Deserialize;
use sha2::{Digest, Sha256};
use thiserror::Error;
use uuid::Uuid;

use super::address::Network;
use super::currency::Currency;
use super::error::Coded;
use super::money::{MinorAmount, MoneyError};
use super::quantity::Quantity;

/// Version tag written into every payload.
pub const SCHEMA: &str = "tauros.invoice.v1";

/// One line as sealed: the line amount is not written, the total is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadLine {
    /// Line text (NFC-normalized when written).
    pub description: String,
    pub quantity: Quantity,
    pub unit_amount_minor: MinorAmount,
}

/// Where the money goes: the destination's id, network and address as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PayloadDestination {
    pub id: Uuid,
    pub network: Network,
    /// Address exactly as stored (trimmed at creation, case kept).
    pub address: String,
}

/// Everything the seal covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Payload {
    pub customer_id: Uuid,
    pub destination: PayloadDestination,
    pub currency: Currency,
    /// Due date (written as `YYYY-MM-DD`).
    pub due_date: NaiveDate,
    pub lines: Vec<PayloadLine>,
}

/// The sealed payload: canonical bytes, their hash and the total they state.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seal {
    /// The canonical JSON text that was hashed.
    pub canonical: String,
    /// Lowercase hex SHA-256 of `canonical`.
    pub hash: String,
    /// Sum of the line amounts, as written in the payload.
    pub total_minor: MinorAmount,
}

/// Why a payload could not be sealed.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum SealError {
    /// A line is inexact or the total overflows.
    #[error(transparent)]
    Money(#[from] MoneyError),
    #[error("due date {0} is outside the years 0001 to 9999; send a date as YYYY-MM-DD")]
    DueDateOutOfRange(NaiveDate),
}

impl Coded for SealError {
    fn code(&self) -> &'static str {
        match self {
            SealError::Money(error) => error.code(),
            SealError::DueDateOutOfRange(_) => "invalid_date",
        }
    }
}

/// Builds the canonical bytes of `payload` and hashes them.
pub fn seal(payload: &Payload) -> Result<Seal, SealError> {
    let (canonical, total_minor) = canonical_and_total(payload)?;
    let hash = sha256_hex(canonical.as_bytes());
    Ok(Seal {
        canonical,
        hash,
        total_minor,
    })
}

/// The canonical bytes [`seal`] hashes, unhashed: comparing them compares hashes for free.
pub fn canonical(payload: &Payload) -> Result<String, SealError> {
    canonical_and_total(payload).map(|(canonical, _)| canonical)
}

fn canonical_and_total(payload: &Payload) -> Result<(String, MinorAmount), SealError> {
    let amounts = payload
        .lines
        .iter()
        .map(|line| {
            line.quantity
                .times(line.unit_amount_minor, payload.currency)
        })
        .collect::<Result<Vec<_>, _>>()?;
    let total_minor = MinorAmount::checked_sum(amounts)?;
    if !(1..=9999).contains(&payload.due_date.year()) {
        return Err(SealError::DueDateOutOfRange(payload.due_date));
    }

    let mut out = String::with_capacity(320 + 96 * payload.lines.len());
    out.push_str("{\"currency\":");
    write_str(&mut out, payload.currency.code());
    out.push_str(",\"customer_id\":");
    write_str(&mut out, &lowercase_id(payload.customer_id));
    out.push_str(",\"destination\":{\"address\":");
    write_str(&mut out, &payload.destination.address);
    out.push_str(",\"id\":");
    write_str(&mut out, &lowercase_id(payload.destination.id));
    out.push_str(",\"network\":");
    write_str(&mut out, payload.destination.network.name());
    out.push_str("},\"due_date\":");
    write_str(&mut out, &payload.due_date.format("%Y-%m-%d").to_string());
    out.push_str(",\"lines\":");
    write_lines(&mut out, &payload.lines);
    out.push_str(",\"schema\":");
    write_str(&mut out, SCHEMA);
    out.push_str(",\"total_minor\":");
    write_str(&mut out, &total_minor.to_string());
    out.push('}');
    Ok((out, total_minor))
}

fn write_lines(out: &mut String, lines: &[PayloadLine]) {
    out.push('[');
    for (index, line) in lines.iter().enumerate() {
        if index > 0 {
            out.push(',');
        }
        out.push_str("{\"description\":");
        write_str(out, &line.description);
        out.push_str(",\"quantity\":");
        write_str(out, &line.quantity.to_string());
        out.push_str(",\"unit_amount_minor\":");
        write_str(out, &line.unit_amount_minor.to_string());
        out.push('}');
    }
    out.push(']');
}

/// Writes `text` NFC-normalized as a JSON string, escaped as serde_json and Python's
/// `json.dumps(ensure_ascii=False)` do: `"` `\` and controls escaped, everything else raw UTF-8.
fn write_str(out: &mut String, text: &str) {
    out.push('"');
    for c in crate::text::nfc(text).chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{00}'..='\u{1f}' => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            _ => out.push(c),
        }
    }
    out.push('"');
}

/// Ids are lowercase in the payload; lowered here so uuid's formatting cannot change that.
fn lowercase_id(id: Uuid) -> String {
    id.hyphenated().to_string().to_ascii_lowercase()
}

fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex::lower(&Sha256::digest(bytes))
}

/// A revision's query columns: copies of sealed facts, kept so SQL can filter and sum them.
#[derive(Debug, Clone, Copy)]
pub struct StoredRevision<'a> {
    pub customer_id: Uuid,
    /// `payment_destination_id` column.
    pub destination_id: Uuid,
    pub network: &'a str,
    pub address: &'a str,
    pub currency: &'a str,
    pub due_date: NaiveDate,
    /// `total_minor` column, as a string of digits (NUMERIC(39,0) read as text).
    pub total_minor: &'a str,
}

/// The stored revision no longer matches its seal: something changed it outside Tauros.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum IntegrityError {
    #[error(
        "the stored canonical payload of this revision cannot be read back ({0}); it was altered outside Tauros"
    )]
    Unreadable(String),
    #[error(
        "the stored canonical payload of this revision is not in canonical form; it was altered outside Tauros"
    )]
    CanonicalMismatch,
    #[error(
        "the stored {0} of this revision differs from its canonical payload; it was altered outside Tauros"
    )]
    ColumnMismatch(&'static str),
    #[error(
        "the stored payload hash of this revision ({stored}) differs from the hash of its canonical payload ({computed}); it was altered outside Tauros"
    )]
    HashMismatch { stored: String, computed: String },
}

impl Coded for IntegrityError {
    fn code(&self) -> &'static str {
        "payload_integrity"
    }
}

/// A canonical payload read back: what it seals and the total it states.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decoded {
    pub payload: Payload,
    pub total_minor: MinorAmount,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CanonicalPayload {
    currency: String,
    customer_id: Uuid,
    destination: CanonicalDestination,
    due_date: NaiveDate,
    lines: Vec<CanonicalLine>,
    schema: String,
    total_minor: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CanonicalDestination {
    address: String,
    id: Uuid,
    network: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CanonicalLine {
    description: String,
    quantity: String,
    unit_amount_minor: String,
}

/// Reads a stored canonical payload back: the one source of a revision's sealed content. Strict
/// about its members and values; whether the bytes are exactly canonical is [`verify`]'s check.
pub fn decode(canonical: &str) -> Result<Decoded, IntegrityError> {
    fn read<T, E: std::fmt::Display>(what: &str, value: Result<T, E>) -> Result<T, IntegrityError> {
        value.map_err(|e| IntegrityError::Unreadable(format!("{what}: {e}")))
    }
    let stored: CanonicalPayload = read("json", serde_json::from_str(canonical))?;
    if stored.schema != SCHEMA {
        return Err(IntegrityError::Unreadable(format!(
            "schema `{}` is not {SCHEMA}",
            stored.schema
        )));
    }
    let lines = stored
        .lines
        .into_iter()
        .map(|line| {
            Ok(PayloadLine {
                quantity: read("quantity", Quantity::parse(&line.quantity))?,
                unit_amount_minor: read(
                    "unit_amount_minor",
                    MinorAmount::parse_minor(&line.unit_amount_minor),
                )?,
                description: line.description,
            })
        })
        .collect::<Result<_, IntegrityError>>()?;
    Ok(Decoded {
        payload: Payload {
            customer_id: stored.customer_id,
            destination: PayloadDestination {
                id: stored.destination.id,
                network: read("network", stored.destination.network.parse::<Network>())?,
                address: stored.destination.address,
            },
            currency: read("currency", stored.currency.parse::<Currency>())?,
            due_date: stored.due_date,
            lines,
        },
        total_minor: read("total_minor", MinorAmount::parse_minor(&stored.total_minor))?,
    })
}

/// Checks a stored revision: its canonical payload reads back, seals to exactly those bytes and
/// to the stored hash, and every query column is a true copy of what it seals.
pub fn verify(
    columns: &StoredRevision<'_>,
    canonical_payload: &str,
    payload_hash: &str,
) -> Result<Seal, IntegrityError> {
    let decoded = decode(canonical_payload)?;
    let sealed = seal(&decoded.payload).map_err(|e| IntegrityError::Unreadable(e.to_string()))?;
    // The stated total is part of the bytes: equal bytes mean it is the sum of the lines.
    if sealed.canonical != canonical_payload {
        return Err(IntegrityError::CanonicalMismatch);
    }
    if sealed.hash != payload_hash {
        return Err(IntegrityError::HashMismatch {
            stored: payload_hash.to_owned(),
            computed: sealed.hash,
        });
    }
    let p = &decoded.payload;
    let copies = [
        ("customer_id", columns.customer_id == p.customer_id),
        (
            "payment_destination_id",
            columns.destination_id == p.destination.id,
        ),
        (
            "destination_network",
            columns.network == p.destination.network.name(),
        ),
        // Written NFC-normalised, as every string of the payload.
        (
            "destination_address",
            crate::text::nfc(columns.address) == p.destination.address,
        ),
        ("currency", columns.currency == p.currency.code()),
        ("due_date", columns.due_date == p.due_date),
        (
            "total_minor",
            columns.total_minor == sealed.total_minor.to_string(),
        ),
    ];
    match copies.into_iter().find(|(_, same)| !same) {
        Some((column, _)) => Err(IntegrityError::ColumnMismatch(column)),
        None => Ok(sealed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lines::{LineInput, validate_lines};
    use proptest::prelude::*;
    use rust_decimal::Decimal;
    use serde_json::{Value, json};
    use unicode_normalization::UnicodeNormalization;

    const GOLDEN: &str = include_str!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../fixtures/golden/payload_v1.json"
    ));

    fn payload_from_vector(input: &Value) -> Payload {
        let text = |v: &Value| v.as_str().unwrap().to_owned();
        let destination = &input["destination"];
        Payload {
            customer_id: text(&input["customer_id"]).parse().unwrap(),
            destination: PayloadDestination {
                id: text(&destination["id"]).parse().unwrap(),
                network: text(&destination["network"]).parse().unwrap(),
                address: text(&destination["address"]),
            },
            currency: text(&input["currency"]).parse().unwrap(),
            due_date: text(&input["due_date"]).parse().unwrap(),
            lines: input["lines"]
                .as_array()
                .unwrap()
                .iter()
                .map(|line| PayloadLine {
                    description: text(&line["description"]),
                    quantity: Quantity::parse(line["quantity"].as_str().unwrap()).unwrap(),
                    unit_amount_minor: MinorAmount::parse_minor(
                        line["unit_amount_minor"].as_str().unwrap(),
                    )
                    .unwrap(),
                })
                .collect(),
        }
    }

    fn stored<'a>(payload: &'a Payload, total: &'a str) -> StoredRevision<'a> {
        StoredRevision {
            customer_id: payload.customer_id,
            destination_id: payload.destination.id,
            network: payload.destination.network.name(),
            address: &payload.destination.address,
            currency: payload.currency.code(),
            due_date: payload.due_date,
            total_minor: total,
        }
    }

    #[test]
    fn golden_vectors() {
        let document: Value = serde_json::from_str(GOLDEN).unwrap();
        assert_eq!(document["schema"], SCHEMA);
        let cases = document["cases"].as_array().unwrap();
        assert!(cases.len() >= 12);
        let mut networks = std::collections::BTreeSet::new();
        let mut currencies = std::collections::BTreeSet::new();
        for case in cases {
            let name = case["name"].as_str().unwrap();
            let payload = payload_from_vector(&case["input"]);
            let sealed = seal(&payload).unwrap();
            assert_eq!(
                sealed.canonical,
                case["canonical"].as_str().unwrap(),
                "{name}"
            );
            assert_eq!(sealed.hash, case["sha256"].as_str().unwrap(), "{name}");

            // The vectors are realistic: valid addresses on networks that carry the currency.
            let destination = &payload.destination;
            destination.network.check_carries(payload.currency).unwrap();
            destination
                .network
                .validate_address(&destination.address)
                .unwrap();
            networks.insert(destination.network);
            currencies.insert(payload.currency);

            // The stored bytes read back to the same content and verify.
            let total = sealed.total_minor.to_string();
            let decoded = decode(&sealed.canonical).unwrap();
            assert_eq!(seal(&decoded.payload).as_ref(), Ok(&sealed), "{name}");
            assert_eq!(decoded.total_minor, sealed.total_minor, "{name}");
            let back = verify(&stored(&payload, &total), &sealed.canonical, &sealed.hash);
            assert_eq!(back, Ok(sealed), "{name}");
        }
        assert_eq!(networks.len(), Network::ALL.len());
        for currency in [
            Currency::Eur,
            Currency::Jpy,
            Currency::Bhd,
            Currency::Btc,
            Currency::Usdc,
            Currency::Eth,
        ] {
            assert!(currencies.contains(&currency), "{currency}");
        }
    }

    fn base_payload() -> Payload {
        Payload {
            customer_id: "5c2b9d3e-1f4a-4b6c-8d7e-9f0a1b2c3d4e".parse().unwrap(),
            destination: PayloadDestination {
                id: "8a0f2c1e-6a43-4f2b-9d0e-0c6f1d2b3a4e".parse().unwrap(),
                network: Network::Iban,
                address: "CH9300762011623852957".into(),
            },
            currency: Currency::Eur,
            due_date: "2030-01-31".parse().unwrap(),
            lines: Vec::new(),
        }
    }

    #[test]
    fn the_two_input_forms_give_one_hash() {
        let hash_of = |line: Value| {
            let lines: Vec<LineInput> = serde_json::from_value(json!([line])).unwrap();
            let valid = validate_lines(Currency::Eur, &lines).unwrap();
            seal(&Payload {
                lines: valid.payload_lines(),
                ..base_payload()
            })
            .unwrap()
            .hash
        };
        let reference =
            hash_of(json!({"description": "Design", "quantity": "1", "unit_amount": "400"}));
        for line in [
            json!({"description": "Design", "quantity": "1", "unit_amount": "400.00"}),
            json!({"description": "Design", "quantity": "1.000", "unit_amount": "400.0"}),
            json!({"description": "Design", "quantity": "1", "unit_amount_minor": 40000}),
            json!({"description": " Design\t", "quantity": "1", "unit_amount_minor": "40000"}),
        ] {
            assert_eq!(hash_of(line), reference);
        }
        assert_ne!(
            hash_of(json!({"description": "Design", "quantity": "1", "unit_amount": "400.01"})),
            reference
        );
    }

    #[test]
    fn a_stored_payload_reads_back_normalised_and_strictly() {
        let payload = Payload {
            lines: vec![PayloadLine {
                description: "Cafe\u{301} \"x\"".into(),
                quantity: Quantity::parse("1.50").unwrap(),
                unit_amount_minor: MinorAmount::new(12_050).unwrap(),
            }],
            ..base_payload()
        };
        let sealed = seal(&payload).unwrap();
        let line = r#"[{"description":"Café \"x\"","quantity":"1.5","unit_amount_minor":"12050"}]"#;
        assert!(sealed.canonical.contains(line), "{}", sealed.canonical);
        let back = decode(&sealed.canonical).unwrap();
        assert_eq!(back.payload.lines[0].description, "Caf\u{e9} \"x\"");
        assert_eq!(back.payload.lines[0].quantity, payload.lines[0].quantity);
        assert_eq!(back.total_minor, sealed.total_minor);
        for altered in [
            sealed.canonical.replace(SCHEMA, "tauros.invoice.v0"),
            sealed.canonical.replace("\"quantity\"", "\"qty\""),
            sealed.canonical.replace("\"1.5\"", "\"1,5\""),
            sealed.canonical.replace("\"EUR\"", "\"EURO\""),
            sealed.canonical.replacen('{', "{\"extra\":1,", 1),
            sealed.canonical[1..].to_owned(),
        ] {
            let err = decode(&altered).unwrap_err();
            assert!(
                matches!(err, IntegrityError::Unreadable(_)),
                "{altered}: {err}"
            );
        }
    }

    #[test]
    fn tampering_is_detected() {
        let payload = Payload {
            lines: vec![PayloadLine {
                description: "Build".into(),
                quantity: Quantity::parse("2").unwrap(),
                unit_amount_minor: MinorAmount::new(40_000).unwrap(),
            }],
            ..base_payload()
        };
        let sealed = seal(&payload).unwrap();
        let good = stored(&payload, "80000");
        assert!(verify(&good, &sealed.canonical, &sealed.hash).is_ok());

        let cases = [
            verify(&stored(&payload, "80001"), &sealed.canonical, &sealed.hash),
            verify(
                &StoredRevision {
                    address: "DE89370400440532013000",
                    ..good
                },
                &sealed.canonical,
                &sealed.hash,
            ),
            verify(
                &StoredRevision {
                    currency: "CHF",
                    ..good
                },
                &sealed.canonical,
                &sealed.hash,
            ),
            verify(
                &StoredRevision {
                    due_date: "2099-12-31".parse().unwrap(),
                    ..good
                },
                &sealed.canonical,
                &sealed.hash,
            ),
            verify(
                &good,
                &sealed.canonical.replace("Build", "Bui1d"),
                &sealed.hash,
            ),
            // A total other than the lines' sum, and spaces: neither is the canonical text.
            verify(
                &good,
                &sealed.canonical.replace("\"80000\"", "\"80001\""),
                &sealed.hash,
            ),
            verify(&good, &sealed.canonical.replace(',', ", "), &sealed.hash),
            verify(&good, &sealed.canonical, &sealed.hash.replace('a', "b")),
        ];
        for result in cases {
            let err = result.unwrap_err();
            assert_eq!(err.code(), "payload_integrity");
            assert!(err.to_string().contains("altered outside Tauros"), "{err}");
        }
    }

    #[test]
    fn seal_refuses_inexact_lines_and_unwritable_dates() {
        let inexact = Payload {
            lines: vec![PayloadLine {
                description: "x".into(),
                quantity: Quantity::parse("1.5").unwrap(),
                unit_amount_minor: MinorAmount::new(5).unwrap(),
            }],
            ..base_payload()
        };
        assert_eq!(seal(&inexact).unwrap_err().code(), "amount_not_exact");
        let far = Payload {
            due_date: NaiveDate::from_ymd_opt(10_000, 1, 1).unwrap(),
            ..base_payload()
        };
        assert_eq!(seal(&far).unwrap_err().code(), "invalid_date");
    }

    fn arb_description() -> impl Strategy<Value = String> {
        prop_oneof![
            "\\PC{1,24}",
            "[\\x00-\\x1f\"\\\\/a-z\\x7f\u{2028}]{1,12}",
            "(e\u{301}|\u{e9}|A\u{30a}|\u{c5}|\u{1100}\u{1161}| ){1,8}",
        ]
    }

    fn arb_line() -> impl Strategy<Value = PayloadLine> {
        (
            arb_description(),
            1_u32..=1000,
            "[0-9]{0,5}",
            0_i128..=1_000_000_000_000_000,
        )
            .prop_map(|(description, int, frac, units)| PayloadLine {
                description,
                quantity: Quantity::parse(&format!("{int}.{frac}0")).unwrap(),
                // A multiple of 10^6 is exact for every quantity with at most 6 decimals.
                unit_amount_minor: MinorAmount::new(units * 1_000_000).unwrap(),
            })
    }

    fn arb_payload() -> impl Strategy<Value = Payload> {
        (
            any::<u128>(),
            any::<u128>(),
            proptest::sample::select(Network::ALL.to_vec()),
            "\\PC{1,40}",
            proptest::sample::select(Currency::ALL.to_vec()),
            700_000_i32..800_000,
            proptest::collection::vec(arb_line(), 2..6),
        )
            .prop_map(
                |(customer, destination, network, address, currency, day, mut lines)| {
                    // Two distinct first lines, so that swapping them is a real change of order.
                    lines[1].description = format!("{} #2", lines[1].description);
                    Payload {
                        customer_id: Uuid::from_u128(customer),
                        destination: PayloadDestination {
                            id: Uuid::from_u128(destination),
                            network,
                            address,
                        },
                        currency,
                        due_date: NaiveDate::from_num_days_from_ce_opt(day).unwrap(),
                        lines,
                    }
                },
            )
    }

    fn other<T: Copy + PartialEq>(all: &[T], current: T) -> T {
        let index = all.iter().position(|x| *x == current).unwrap();
        all[(index + 1) % all.len()]
    }

    fn mutate(payload: &mut Payload, which: u8) {
        let first = &mut payload.lines[0];
        match which {
            0 => {
                let more = first.unit_amount_minor.get() + 1_000_000;
                first.unit_amount_minor = MinorAmount::new(more).unwrap();
            }
            1 => {
                let more = first.quantity.as_decimal() + Decimal::ONE;
                first.quantity = Quantity::parse(&more.to_string()).unwrap();
            }
            2 => first.description.push('x'),
            3 => payload.lines.swap(0, 1),
            4 => payload.currency = other(&Currency::ALL, payload.currency),
            5 => payload.customer_id = Uuid::from_u128(payload.customer_id.as_u128() ^ 1),
            6 => payload.due_date = payload.due_date.succ_opt().unwrap(),
            7 => payload.destination.id = Uuid::from_u128(payload.destination.id.as_u128() ^ 1),
            8 => payload.destination.network = other(&Network::ALL, payload.destination.network),
            9 => payload.destination.address.push('0'),
            10 => {
                let copy = payload.lines[0].clone();
                payload.lines.push(copy);
            }
            _ => {
                payload.lines.pop();
            }
        }
    }

    proptest! {
        #[test]
        fn any_single_change_changes_the_hash(payload in arb_payload(), which in 0_u8..12) {
            let before = seal(&payload).unwrap();
            let mut changed = payload;
            mutate(&mut changed, which);
            let after = seal(&changed).unwrap();
            prop_assert_ne!(before.hash, after.hash);
        }

        #[test]
        fn every_spelling_of_an_amount_gives_one_hash(
            currency in proptest::sample::select(Currency::ALL.to_vec()),
            minor in 1_i128..=1_000_000_000_000_000_000_000,
        ) {
            let amount = MinorAmount::new(minor).unwrap();
            let padded = amount.to_major_string(currency);
            let trimmed = if padded.contains('.') {
                padded.trim_end_matches('0').trim_end_matches('.').to_owned()
            } else {
                padded.clone()
            };
            let hash_of = |line: Value| {
                let lines: Vec<LineInput> = serde_json::from_value(json!([line])).unwrap();
                let valid = validate_lines(currency, &lines).unwrap();
                seal(&Payload { currency, lines: valid.payload_lines(), ..base_payload() }).unwrap().hash
            };
            let reference = hash_of(json!({"description": "x", "quantity": "1", "unit_amount": padded}));
            prop_assert_eq!(&hash_of(json!({"description": "x", "quantity": "1", "unit_amount": trimmed})), &reference);
            prop_assert_eq!(&hash_of(json!({"description": "x", "quantity": "1.0", "unit_amount_minor": minor.to_string()})), &reference);
            // A JSON integer up to 2^53; beyond, digits are the only spelling.
            if minor <= crate::money::MAX_JSON_INTEGER {
                let small = u64::try_from(minor).unwrap();
                prop_assert_eq!(&hash_of(json!({"description": "x", "quantity": "1", "unit_amount_minor": small})), &reference);
            }
        }

        #[test]
        fn canonical_text_is_sorted_compact_json(payload in arb_payload()) {
            // serde_json's Value sorts keys, no whitespace: re-encoding must round-trip exactly.
            let sealed = seal(&payload).unwrap();
            let parsed: Value = serde_json::from_str(&sealed.canonical).unwrap();
            prop_assert_eq!(&parsed.to_string(), &sealed.canonical);
            prop_assert_eq!(sealed.hash.len(), 64);
            prop_assert!(sealed.hash.bytes().all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
        }

        #[test]
        fn canonically_equivalent_text_gives_one_hash(payload in arb_payload()) {
            let mut decomposed = payload.clone();
            for line in &mut decomposed.lines {
                line.description = line.description.nfd().collect();
            }
            prop_assert_eq!(seal(&payload).unwrap().hash, seal(&decomposed).unwrap().hash);
        }

        #[test]
        fn stored_fields_reseal_to_the_same_seal(payload in arb_payload()) {
            let sealed = seal(&payload).unwrap();
            let total = sealed.total_minor.to_string();
            let revision = stored(&payload, &total);
            prop_assert_eq!(verify(&revision, &sealed.canonical, &sealed.hash), Ok(sealed));
        }
    }
}
