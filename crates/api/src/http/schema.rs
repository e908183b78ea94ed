//! Schemas of the OpenAPI document that no request or response type derives: the domain's
//! enums (markers from tauros-app), the kinds of caller and the spellings of minor units.

use utoipa::IntoParams;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};

use tauros_domain::identity::ActorKind;

pub use tauros_app::schema::*;
use tauros_app::schema_enum;

/// `kind` of `GET /v1/me`: the two kinds of caller that hold a credential.
pub struct CallerKind;

schema_enum!(
    CallerKind,
    "CallerKind",
    string_enum(
        "Who is calling.",
        &[ActorKind::Human, ActorKind::Agent],
        ActorKind::as_str,
        |k| match k {
            ActorKind::Human => "a human with a session token",
            ActorKind::Agent | ActorKind::System => "an agent with an API key",
        },
    )
);

/// Minor units as a request may send them: a JSON integer, or a string of digits.
pub struct MinorUnitsInput;

schema_enum!(
    MinorUnitsInput,
    "MinorUnitsInput",
    OneOfBuilder::new()
        .item(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0))
                // JSON integers beyond 2^64 - 1 reach the parser only as floats (refused).
                .maximum(Some(u64::MAX))
                .description(Some(
                    "A JSON integer up to 2^64 - 1 (JSON numbers with a fraction or an \
                     exponent are refused)",
                )),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9]+$"))
                .description(Some(
                    "A string of digits: exact at any size; use it beyond 2^53 from JavaScript",
                )),
        )
        .description(Some(
            "Minor units (cents for EUR): a non-negative JSON integer, or the same number as a \
             string of digits. JavaScript numbers are exact only up to 2^53 (9007199254740992); \
             send larger amounts as strings (beyond 2^64 - 1 a string is the only way).",
        ))
        .into()
);

/// `?limit=` and `?cursor=`, read by every list (`extract::ListParams`).
#[derive(IntoParams)]
#[into_params(parameter_in = Query)]
#[allow(dead_code)]
pub struct Page {
    /// How many items to return: 1–100 (default 50). Fewer items than asked, and a `null`
    /// `next_cursor`, mean this is the last page.
    #[param(minimum = 1, maximum = 100, default = 50)]
    limit: Option<i64>,
    /// Opaque: the `next_cursor` of the previous page, sent back unchanged. Omit it for the
    /// first page.
    cursor: Option<String>,
}

#[cfg(test)]
mod tests {
    use serde_json::Value;
    /// Every enum the document uses is a component with its values explained.
    #[test]
    fn every_value_is_explained() {
        let doc = serde_json::to_value(crate::http::document()).unwrap();
        for name in [
            "InvoiceState",
            "InvoiceAction",
            "DecisionKind",
            "DestinationState",
            "Network",
            "Capability",
            "Role",
            "ActorKind",
            "Interface",
            "CallerKind",
            "JobState",
            "WebhookEventType",
        ] {
            let schema = &doc["components"]["schemas"][name];
            let description = schema["description"].as_str().unwrap_or_default();
            let values = schema["enum"].as_array();
            assert!(
                values.is_some_and(|v| !v.is_empty()),
                "{name} is not in the document"
            );
            for value in values.into_iter().flatten().filter_map(Value::as_str) {
                assert!(
                    description.contains(&format!("`{value}`: ")),
                    "{name}: `{value}` is not explained"
                );
            }
        }
    }
}
