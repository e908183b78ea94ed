//! The OpenAPI document against the server it describes: clients are generated from the
//! document, so a member the server requires must be required there too, and the other way
//! round.

use crate::helpers::{TestApp, both_backends};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::collections::BTreeSet;

both_backends!(members_the_server_requires_are_required_in_the_document);

/// `{}` sent to every operation that takes a body: each member the server then names as
/// `required` (422) is required in the document (an idempotency key may be the required
/// header instead). Bodies checked only after the record is found (404 for the nil id used
/// here) are skipped; `scripts/fuzz` sends them real ids.
async fn members_the_server_requires_are_required_in_the_document(app: TestApp) {
    let org = app.org().await;
    let doc = serde_json::to_value(tauros_api::http::document()).unwrap();
    let schemas = &doc["components"]["schemas"];
    let mut checked = 0;
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let Some(schema) = op["requestBody"]["content"]["application/json"]["schema"]
                .get("$ref")
                .and_then(Value::as_str)
            else {
                continue;
            };
            let schema = &schemas[schema.trim_start_matches("#/components/schemas/")];
            let mut documented: BTreeSet<&str> = schema["required"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .collect();
            let header_key = op["parameters"].as_array().is_some_and(|ps| {
                ps.iter()
                    .any(|p| p["name"] == "Idempotency-Key" && p["required"] == json!(true))
            });
            if header_key {
                documented.insert("idempotency_key");
            }
            let url = app.url(&path.replace("{id}", "00000000-0000-0000-0000-000000000000"));
            let mut problem = Value::Null;
            for token in [&org.approver_token, &org.agent_key] {
                let request = match method.as_str() {
                    "post" => app.client.post(&url),
                    "patch" => app.client.patch(&url),
                    other => panic!("{other} {path} takes a body"),
                };
                let res = request
                    .bearer_auth(token)
                    .json(&json!({}))
                    .send()
                    .await
                    .unwrap();
                if res.status() != StatusCode::FORBIDDEN {
                    if res.status() == StatusCode::UNPROCESSABLE_ENTITY {
                        problem = res.json().await.unwrap();
                    }
                    break;
                }
            }
            let Some(errors) = problem["errors"].as_array() else {
                continue;
            };
            checked += 1;
            let reported: BTreeSet<&str> = errors
                .iter()
                .filter(|e| e["code"] == "required")
                .map(|e| e["field"].as_str().unwrap())
                .collect();
            for field in &reported {
                assert!(
                    documented.contains(field),
                    "{method} {path}: the server requires `{field}`, the document does not \
                     (it requires {documented:?})"
                );
            }
            // And the other way: `{}` hears about every member the document requires.
            assert_eq!(
                reported, documented,
                "{method} {path}: the document requires members the server did not report"
            );
        }
    }
    assert!(
        checked >= 5,
        "only {checked} operations reported missing members"
    );
}
