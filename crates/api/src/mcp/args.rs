//! A tool's arguments: the REST request body it shares, plus what REST reads from elsewhere
//! (the path's `id`, the `Idempotency-Key` header), all members of one flat JSON object.
//!
//! They are parsed by the REST body parser ([`crate::http::json::parse_value`]), so an MCP call
//! and a REST request are refused alike. [`WithExtras`] splits the extras out inside serde, so
//! error paths stay the request's own and an unknown member's refusal names the extras too.

use serde::de::{
    self, Deserialize, DeserializeSeed, Deserializer, IntoDeserializer, MapAccess, Visitor,
    value::StringDeserializer,
};
use std::fmt;
use std::marker::PhantomData;
use uuid::Uuid;

/// Members a tool takes besides its REST body.
pub(super) trait Extras: Default {
    const NAMES: &'static [&'static str];
    /// Reads the value of member `name` (one of `NAMES`) from `map`.
    fn read<'de, A: MapAccess<'de>>(&mut self, name: &str, map: &mut A) -> Result<(), A::Error>;
    /// After the last member: a required one that did not come is `missing field`.
    fn finish<E: de::Error>(&self) -> Result<(), E>;
}

/// The record a tool acts on (REST's `{id}` in the path); required.
#[derive(Debug, Default)]
pub(super) struct Id(pub Option<Uuid>);

impl Id {
    /// The id; `finish` made sure there is one.
    pub(super) fn get(&self) -> Uuid {
        self.0.unwrap_or_default()
    }
}

impl Extras for Id {
    const NAMES: &'static [&'static str] = &["id"];

    fn read<'de, A: MapAccess<'de>>(&mut self, _: &str, map: &mut A) -> Result<(), A::Error> {
        self.0 = map.next_value::<Option<Uuid>>()?;
        Ok(())
    }

    fn finish<E: de::Error>(&self) -> Result<(), E> {
        match self.0 {
            Some(_) => Ok(()),
            None => Err(E::missing_field("id")),
        }
    }
}

/// REST's optional `Idempotency-Key` header, as the argument `idempotency_key`.
#[derive(Debug, Default)]
pub(super) struct Key(pub Option<String>);

impl Extras for Key {
    const NAMES: &'static [&'static str] = &["idempotency_key"];

    fn read<'de, A: MapAccess<'de>>(&mut self, _: &str, map: &mut A) -> Result<(), A::Error> {
        self.0 = map.next_value::<Option<String>>()?;
        Ok(())
    }

    fn finish<E: de::Error>(&self) -> Result<(), E> {
        Ok(())
    }
}

/// The arguments of a tool: `X`'s members, and every other member read as the body `T`.
#[derive(Debug)]
pub(super) struct WithExtras<X, T> {
    pub extras: X,
    pub body: T,
}

/// The body's value rules are the tool's (the extras are typed; a missing `id` is `required`).
impl<X, T: crate::http::rules::BodyRules> crate::http::rules::BodyRules for WithExtras<X, T> {
    fn field_rules(&self) -> Result<(), validator::ValidationErrors> {
        self.body.field_rules()
    }

    fn completing_rules(&self) -> Vec<tauros_app::FieldError> {
        self.body.completing_rules()
    }
}

impl<'de, X: Extras, T: Deserialize<'de>> Deserialize<'de> for WithExtras<X, T> {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        de.deserialize_map(ExtrasVisitor(PhantomData))
    }
}

struct ExtrasVisitor<X, T>(PhantomData<(X, T)>);

impl<'de, X: Extras, T: Deserialize<'de>> Visitor<'de> for ExtrasVisitor<X, T> {
    type Value = WithExtras<X, T>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of the tool's arguments")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        let mut rest = Rest {
            map,
            extras: X::default(),
            fields: None,
        };
        let body = T::deserialize(RestDeserializer(&mut rest))?;
        rest.extras.finish()?;
        Ok(WithExtras {
            extras: rest.extras,
            body,
        })
    }
}

/// The members left for the body once the extras are taken out. It refuses an unknown member
/// itself, so the refusal lists the extras among the accepted names.
struct Rest<A, X> {
    map: A,
    extras: X,
    /// The body's members, once it said them (a derived struct always does).
    fields: Option<&'static [&'static str]>,
}

impl<'de, A: MapAccess<'de>, X: Extras> MapAccess<'de> for Rest<A, X> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        loop {
            let Some(key) = self.map.next_key::<String>()? else {
                return Ok(None);
            };
            if X::NAMES.contains(&key.as_str()) {
                self.extras.read(&key, &mut self.map)?;
                continue;
            }
            if let Some(fields) = self.fields
                && !fields.contains(&key.as_str())
            {
                return Err(de::Error::custom(format_args!(
                    "unknown field `{key}`, expected {}",
                    expected(X::NAMES.iter().chain(fields))
                )));
            }
            let key: StringDeserializer<A::Error> = key.into_deserializer();
            return seed.deserialize(key).map(Some);
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.map.next_value_seed(seed)
    }
}

/// The accepted names as serde words them (`` `a` ``, `` `a` or `b` ``,
/// `` one of `a`, `b`, `c` ``), so the body parser reads the refusal as serde's own.
fn expected<'a>(names: impl Iterator<Item = &'a &'static str>) -> String {
    let names: Vec<String> = names.map(|n| format!("`{n}`")).collect();
    match names.as_slice() {
        [] => "there are no fields".to_owned(),
        [one] => one.clone(),
        [a, b] => format!("{a} or {b}"),
        many => format!("one of {}", many.join(", ")),
    }
}

/// Hands the remaining members to the body as a map.
struct RestDeserializer<'a, A, X>(&'a mut Rest<A, X>);

impl<'de, A: MapAccess<'de>, X: Extras> Deserializer<'de> for RestDeserializer<'_, A, X> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_map(self.0)
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        _name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        self.0.fields = Some(fields);
        visitor.visit_map(self.0)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
        ignored_any
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::json::parse_value;
    use serde::Deserialize;
    use serde_json::{Value, json};

    #[derive(Debug, Deserialize, validator::Validate)]
    #[serde(deny_unknown_fields)]
    struct Body {
        reasoning: Option<String>,
        count: Option<u32>,
    }
    crate::body_rules!(Body);

    fn problem(args: Value) -> Value {
        let size = args.to_string().len();
        let err = parse_value::<WithExtras<Id, Body>>(args, size).unwrap_err();
        serde_json::to_value(err.problem()).unwrap()
    }

    #[test]
    fn extras_and_body_members_are_split() {
        let id = Uuid::now_v7();
        let args = json!({"reasoning": "why", "id": id, "count": 2});
        let parsed = parse_value::<WithExtras<Id, Body>>(args, 64).unwrap();
        assert_eq!(parsed.extras.get(), id);
        assert_eq!(parsed.body.reasoning.as_deref(), Some("why"));
        assert_eq!(parsed.body.count, Some(2));
    }

    #[test]
    fn an_unknown_member_lists_the_extras_among_the_accepted_names() {
        let p = problem(json!({"id": Uuid::now_v7(), "state": "approved"}));
        assert_eq!(p["code"], "unknown_field");
        assert_eq!(p["field"], "state");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains("expected one of `id`, `reasoning`, `count`"),
            "{detail}"
        );
    }

    #[test]
    fn a_missing_id_is_a_rule_violation_and_a_bad_one_a_type_error() {
        let p = problem(json!({"reasoning": "why"}));
        assert_eq!(p["status"], 422);
        assert_eq!(p["errors"][0]["field"], "id");
        assert_eq!(p["errors"][0]["code"], "required");
        let p = problem(json!({"id": "not-a-uuid", "count": "x"}));
        assert_eq!(p["status"], 400);
        assert_eq!(p["code"], "invalid_type");
        let fields: Vec<&str> = p["errors"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["field"].as_str().unwrap())
            .collect();
        // Once each: the id taken out for its type is not reported missing as well.
        assert_eq!(fields, ["count", "id"]);
    }

    #[test]
    fn a_float_keeps_its_path_through_the_split() {
        #[derive(Debug, Deserialize, validator::Validate)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Money {
            unit_amount: Option<tauros_domain::input::MajorAmountInput>,
        }
        crate::body_rules!(Money);
        let args = json!({"id": Uuid::now_v7(), "unit_amount": 12.5});
        let err = parse_value::<WithExtras<Id, Money>>(args, 64).unwrap_err();
        let p = serde_json::to_value(err.problem()).unwrap();
        assert_eq!(p["code"], "float_not_allowed");
        assert_eq!(p["field"], "unit_amount");
    }
}
