//! The tools' input schemas, made from the same utoipa schemas as the REST document: a tool
//! that takes a REST body publishes that body's schema (its descriptions, patterns and limits),
//! plus its extra members. References are inlined, since a tool's schema must stand alone.

use serde_json::{Map, Value, json};
use utoipa::ToSchema;

/// Every named schema a tool schema may refer to: the REST document's and MCP-only ones.
pub(super) struct Pool(Map<String, Value>);

/// Deeper than any of our schemas nest; a reference cycle stops here instead of looping.
const MAX_DEPTH: usize = 16;

impl Pool {
    /// The REST document's schemas.
    pub(super) fn new() -> Pool {
        let doc = crate::http::document();
        let schemas = serde_json::to_value(doc)
            .ok()
            .and_then(|d| d.pointer("/components/schemas").cloned())
            .and_then(|s| match s {
                Value::Object(map) => Some(map),
                _ => None,
            })
            .unwrap_or_default();
        Pool(schemas)
    }

    /// The schema of an MCP-only argument type (and the schemas it refers to), by its name.
    pub(super) fn add<T: ToSchema>(&mut self) -> String {
        let mut named = Vec::new();
        T::schemas(&mut named);
        named.push((T::name().into_owned(), T::schema()));
        for (name, schema) in named {
            if let Ok(value) = serde_json::to_value(schema) {
                self.0.entry(name).or_insert(value);
            }
        }
        T::name().into_owned()
    }

    /// The object schema `name`, inlined, with `extra` (name, schema, required) in front.
    pub(super) fn object(&self, name: &str, extra: &[(&str, Value, bool)]) -> Map<String, Value> {
        let mut schema = self.inline(&json!({ "$ref": reference(name) }), 0);
        if let Value::Object(object) = &mut schema {
            // What the document says about the body's role in a request is not for a tool.
            object.remove("description");
            object.insert("type".into(), json!("object"));
            object.insert("additionalProperties".into(), json!(false));
            let mut properties = Map::new();
            let mut required = Vec::new();
            for (member, member_schema, is_required) in extra {
                properties.insert((*member).to_owned(), member_schema.clone());
                if *is_required {
                    required.push(json!(member));
                }
            }
            if let Some(Value::Object(own)) = object.remove("properties") {
                properties.extend(own);
            }
            if let Some(Value::Array(own)) = object.remove("required") {
                required.extend(own);
            }
            object.insert("properties".into(), Value::Object(properties));
            if !required.is_empty() {
                object.insert("required".into(), Value::Array(required));
            }
            return object.clone();
        }
        Map::new()
    }

    /// `value` with every reference replaced by the schema it names; members beside a
    /// reference (a description) win over the referenced schema's.
    fn inline(&self, value: &Value, depth: usize) -> Value {
        match value {
            Value::Object(object) => {
                let target = object
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                    .and_then(|name| self.0.get(name));
                match target {
                    Some(target) if depth < MAX_DEPTH => {
                        let mut merged = match self.inline(target, depth + 1) {
                            Value::Object(m) => m,
                            other => return other,
                        };
                        for (k, v) in object.iter().filter(|(k, _)| *k != "$ref") {
                            merged.insert(k.clone(), self.inline(v, depth + 1));
                        }
                        Value::Object(merged)
                    }
                    _ => Value::Object(
                        object
                            .iter()
                            .map(|(k, v)| (k.clone(), self.inline(v, depth + 1)))
                            .collect(),
                    ),
                }
            }
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.inline(v, depth + 1)).collect())
            }
            other => other.clone(),
        }
    }
}

fn reference(name: &str) -> String {
    format!("#/components/schemas/{name}")
}

/// Whether any schema inside `value` still names another (a tool schema must not).
#[cfg(test)]
pub(super) fn has_reference(value: &Value) -> bool {
    match value {
        Value::Object(o) => o.contains_key("$ref") || o.values().any(has_reference),
        Value::Array(a) => a.iter().any(has_reference),
        _ => false,
    }
}
