//! Schemas of the OpenAPI document that no request or response type derives: the domain's
//! enums (markers from tauros-app), the kinds of caller and the spellings of minor units.

use utoipa::IntoParams;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Type};

use tauros_domain::identity::ActorKind;
use tauros_domain::money::MAX_JSON_INTEGER;

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
                .maximum(Some(MAX_JSON_INTEGER as u64))
                .description(Some(
                    "A JSON integer up to 2^53 (9007199254740992), which every JSON parser reads \
                     exactly; a larger one is 422 `amount_out_of_range`, and a number with a \
                     fraction or an exponent 400 `float_not_allowed`",
                )),
        )
        .item(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .pattern(Some("^[0-9]+$"))
                .description(Some(
                    "A string of digits: exact up to 2^127 - 1, the form for amounts beyond 2^53",
                )),
        )
        .description(Some(
            "Minor units (cents for EUR): a non-negative JSON integer up to 2^53, or the same \
             number as a string of digits at any size up to 2^127 - 1. Beyond 2^53 JSON \
             parsers round numbers silently, so a larger amount is sent as a string.",
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
