//! The invoice commands' bodies are read in one pass ([`BodyRules::READ_IN_ONE_PASS`]): each
//! must get the answer the three steps give, for any body. Bodies are generated as text, so
//! that they can repeat a member, carry `-0`, exponents, integers past 64 bits, whitespace
//! before the object, or be no object at all.

use super::types::{CancelRequest, CreateInvoiceRequest, DecideRequest, ReviseRequest};
use crate::http::json::{parse_in_three_steps, parse_json, read_in_one_pass};
use crate::http::rules::BodyRules;
use proptest::prelude::*;
use serde::de::DeserializeOwned;
use std::fmt::Debug;

/// Values any member may get instead of a right one: wrong types, floats in every spelling,
/// numbers past every integer type, text that needs escapes.
const ANY: &[&str] = &[
    "null",
    "true",
    "0",
    "-0",
    "-5",
    "40000",
    "1.5",
    "1e2",
    "-0.0",
    "18446744073709551616",
    "-9223372036854775809",
    "9007199254740993",
    "\"\"",
    "\" a\"",
    "\"a\\\"b\\u00e9\"",
    "\"1.5\"",
    "\"40000\"",
    "[]",
    "{}",
    "[{}]",
];

/// A member's name and the values that are right for it.
type Member = (&'static str, &'static [&'static str]);

const UUIDS: &[&str] = &[
    "\"7d4f3a8e-1c2b-4d5e-8f90-a1b2c3d4e5f6\"",
    "\"00000000-0000-0000-0000-000000000000\"",
];
const TEXT: &[&str] = &["\"Discovery workshop\"", "\"why \\u00e9\\n\""];

const LINE: &[Member] = &[
    ("description", TEXT),
    ("quantity", &["\"1\"", "\"1.5\"", "\"0.000001\""]),
    ("unit_amount", &["\"400.00\"", "\"1200.5\""]),
    ("unit_amount_minor", &["40000", "\"40000\"", "0"]),
];

const CREATE: &[Member] = &[
    ("idempotency_key", &["\"k-1\"", "\"order 7\""]),
    ("customer_id", UUIDS),
    ("payment_destination_id", UUIDS),
    ("currency", &["\"EUR\"", "\"JPY\""]),
    ("due_date", &["\"2030-01-31\""]),
    ("lines", &[]),
    ("reasoning", TEXT),
];

const REVISE: &[Member] = &[
    ("reasoning", TEXT),
    ("customer_id", UUIDS),
    ("payment_destination_id", UUIDS),
    ("currency", &["\"EUR\""]),
    ("due_date", &["\"2030-01-31\""]),
    ("lines", &[]),
];

const DECIDE: &[Member] = &[
    ("revision_id", UUIDS),
    (
        "payload_hash",
        &["\"8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4\""],
    ),
    ("reason", TEXT),
];

const CANCEL: &[Member] = &[("reason", TEXT)];

/// One member's value: mostly a right one, sometimes any value at all.
fn value(right: &'static [&'static str], lines: bool) -> BoxedStrategy<String> {
    let wrong = proptest::sample::select(ANY).prop_map(str::to_owned);
    if lines {
        let line = object(LINE);
        let lines = prop::collection::vec(line, 0..4).prop_map(|l| format!("[{}]", l.join(",")));
        prop_oneof![8 => lines, 1 => wrong].boxed()
    } else {
        let right = proptest::sample::select(right).prop_map(str::to_owned);
        prop_oneof![8 => right, 1 => wrong].boxed()
    }
}

/// An object of `members`: each present or not, in any order, sometimes one or two more that
/// repeat a member or that the type does not know.
fn object(members: &'static [Member]) -> BoxedStrategy<String> {
    let each = members
        .iter()
        .map(|(name, right)| {
            let value = value(right, *name == "lines");
            (prop::bool::weighted(0.85), value)
                .prop_map(move |(present, v)| present.then(|| format!("\"{name}\":{v}")))
        })
        .collect::<Vec<_>>();
    let names = members.iter().map(|(name, _)| *name).collect::<Vec<_>>();
    (
        each,
        prop_oneof![
            6 => Just(Vec::new()),
            3 => prop::collection::vec(
                (
                    prop_oneof![proptest::sample::select(names), Just("unknown")],
                    proptest::sample::select(ANY),
                ),
                1..3,
            ),
        ],
        any::<prop::sample::Index>(),
        prop::bool::weighted(0.1),
    )
        .prop_map(|(members, extras, at, shuffle)| {
            let mut out: Vec<String> = members.into_iter().flatten().collect();
            // A repeated or unknown member, at some place among the others.
            for (name, v) in extras {
                let i = at.index(out.len() + 1);
                out.insert(i, format!("\"{name}\":{v}"));
            }
            if shuffle {
                out.reverse();
            }
            format!("{{{}}}", out.join(","))
        })
        .boxed()
}

/// The members' values in order, as an array: what serde's derive would read as the struct.
fn in_order(members: &'static [Member]) -> BoxedStrategy<String> {
    members
        .iter()
        .map(|(name, right)| value(right, *name == "lines"))
        .collect::<Vec<_>>()
        .prop_map(|values| format!("[{}]", values.join(",")))
        .boxed()
}

/// A body of `members`: mostly the object, sometimes padded, an array or a scalar.
fn body(members: &'static [Member]) -> impl Strategy<Value = String> {
    prop_oneof![
        8 => object(members),
        1 => object(members).prop_map(|o| format!(" \n\t{o}\r\n")),
        1 => object(members).prop_map(|o| format!("[{o}]")),
        1 => in_order(members),
        1 => proptest::sample::select(ANY).prop_map(str::to_owned),
    ]
}

/// Both ways give the same answer: the same value, or the same problem.
fn same_answer<T: DeserializeOwned + BodyRules + Debug>(body: &str) -> Result<(), TestCaseError> {
    prop_assert!(T::READ_IN_ONE_PASS);
    let one = parse_json::<T>(body.as_bytes());
    let three = parse_in_three_steps::<T>(body.as_bytes());
    match (one, three) {
        (Ok(one), Ok(three)) => prop_assert_eq!(format!("{one:?}"), format!("{three:?}")),
        (Err(one), Err(three)) => prop_assert_eq!(
            serde_json::to_value(one.problem()).unwrap(),
            serde_json::to_value(three.problem()).unwrap()
        ),
        (one, three) => prop_assert!(
            false,
            "one pass: {:?}; three steps: {:?}",
            one.map(|v| format!("{v:?}"))
                .map_err(|e| e.problem().detail),
            three
                .map(|v| format!("{v:?}"))
                .map_err(|e| e.problem().detail)
        ),
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn a_create_gets_the_three_steps_answer(body in body(CREATE)) {
        same_answer::<CreateInvoiceRequest>(&body)?;
    }

    #[test]
    fn a_revise_gets_the_three_steps_answer(body in body(REVISE)) {
        same_answer::<ReviseRequest>(&body)?;
    }

    #[test]
    fn a_decision_gets_the_three_steps_answer(body in body(DECIDE)) {
        same_answer::<DecideRequest>(&body)?;
    }

    #[test]
    fn a_cancel_gets_the_three_steps_answer(body in body(CANCEL)) {
        same_answer::<CancelRequest>(&body)?;
    }
}

const A_CREATE: &str = r#"{"customer_id":"7d4f3a8e-1c2b-4d5e-8f90-a1b2c3d4e5f6",
    "payment_destination_id":"7d4f3a8e-1c2b-4d5e-8f90-a1b2c3d4e5f6","currency":"EUR",
    "due_date":"2030-01-31","reasoning":"r",
    "lines":[{"description":"a","quantity":"1","unit_amount_minor":40000}]}"#;

/// The generated bodies above would pass if one pass never answered; these say that it does
/// answer a right body, and leaves every body the three steps refuse to them.
#[test]
fn a_right_body_is_read_in_one_pass_and_a_wrong_one_is_not() {
    assert!(read_in_one_pass::<CreateInvoiceRequest>(A_CREATE.as_bytes()).is_some());
    assert!(
        read_in_one_pass::<CreateInvoiceRequest>(format!(" \n{A_CREATE}\n").as_bytes()).is_some()
    );
    let wrong = [
        // A member twice, at the top and in a line.
        A_CREATE.replace(
            r#""currency":"EUR","#,
            r#""currency":"EUR","currency":"EUR","#,
        ),
        A_CREATE.replace(r#""quantity":"1","#, r#""quantity":"1","quantity":"1","#),
        // Not an object, an unknown member, a float in money (serde reads -0 as one).
        format!("[{A_CREATE}]"),
        A_CREATE.replace(r#""reasoning""#, r#""note":1,"reasoning""#),
        A_CREATE.replace("40000", "-0"),
        A_CREATE.replace("40000", "400.0"),
    ];
    for body in wrong {
        assert!(
            read_in_one_pass::<CreateInvoiceRequest>(body.as_bytes()).is_none(),
            "{body}"
        );
        assert!(
            parse_json::<CreateInvoiceRequest>(body.as_bytes()).is_err(),
            "{body}"
        );
    }
}
