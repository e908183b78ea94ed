//! The OpenAPI 3.1 document: generated from the handlers' annotations, completed here with the
//! error statuses every route shares, committed at `openapi/openapi.json` and drift-checked.

use super::AppState;
use super::problem::{PROBLEM_JSON, Problem, ProblemField};
use axum::Router;
use utoipa::OpenApi;
use utoipa::openapi::path::Operation;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, ResponseBuilder};
use utoipa_swagger_ui::SwaggerUi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tauros",
        description = "AI agents propose invoices; humans approve them. Every financial command is safe to repeat.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    components(schemas(Problem, ProblemField)),
    tags(
        (name = "sessions", description = "Humans: sign-in, sign-out, invitations"),
        (name = "organisation", description = "The organisation and its settings"),
        (name = "agents", description = "Agents and their API keys"),
        (name = "customers", description = "Customers: managed by humans, read by their agents"),
        (name = "payment destinations", description = "Where invoices are paid: registered by agents"),
        (name = "invoices", description = "Proposals by agents, decisions by humans"),
        (name = "currencies", description = "The currencies, exponents and networks Tauros accepts"),
        (name = "operations", description = "Health, readiness, metrics"),
    )
)]
struct ApiDoc;

/// The document's fixed parts, before routes are added.
pub fn base() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    if let Some(components) = doc.components.as_mut() {
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An agent API key (`tauros_…`) or a human session token",
                    ))
                    .build(),
            ),
        );
    }
    doc
}

/// The complete document for this build.
pub fn document() -> utoipa::openapi::OpenApi {
    let (_, doc) = super::api_routes().split_for_parts();
    finish(doc)
}

/// Adds the statuses that come from shared machinery rather than from a handler: bad bodies,
/// bad path parameters, missing credentials, an unreachable database.
pub fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            &mut item.get,
            &mut item.post,
            &mut item.put,
            &mut item.patch,
            &mut item.delete,
        ];
        for op in ops.into_iter().flatten() {
            complete(path, op);
        }
    }
    doc
}

fn complete(path: &str, op: &mut Operation) {
    let v1 = path.starts_with("/v1/");
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let has_body = op.request_body.is_some();
    let has_list_params = op
        .parameters
        .as_ref()
        .is_some_and(|ps| ps.iter().any(|p| p.name == "limit"));
    let mut add = |status: &str, description: &str| {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| {
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        PROBLEM_JSON,
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("Problem")))
                            .build(),
                    )
                    .build()
                    .into()
            });
    };
    if has_body {
        add(
            "400",
            "`invalid_json`, `unknown_field`, `invalid_type` or `float_not_allowed`",
        );
        add("413", "`payload_too_large`: the body is over 1 MiB");
        add(
            "415",
            "`unsupported_media_type`: send `Content-Type: application/json`",
        );
        add(
            "422",
            "`validation_failed`: every offending field is in `errors[]`",
        );
    }
    if path.contains('{') {
        add("400", "`invalid_type`: a path parameter is not a UUID");
    }
    if has_list_params {
        add("422", "`validation_failed`: `limit` or `cursor` is invalid");
    }
    if secured {
        add(
            "401",
            "`unauthorized`: missing, malformed, expired or revoked credential",
        );
    }
    if v1 {
        add(
            "503",
            "`unavailable`: the database is unreachable; retry the same request",
        );
    }
}

/// `/openapi.json` and the Swagger UI at `/docs`, with its assets embedded in the binary.
pub fn docs_router(doc: utoipa::openapi::OpenApi) -> Router<AppState> {
    Router::new().merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
}

#[cfg(test)]
mod tests {
    /// The committed document must be exactly what this build generates. To accept a change:
    /// `cargo run -- openapi > openapi/openapi.json` (or run this test with
    /// `TAUROS_UPDATE_OPENAPI=1`), then review the diff.
    #[test]
    fn committed_openapi_document_matches_the_code() {
        let generated = format!("{}\n", super::document().to_pretty_json().unwrap());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
        if std::env::var_os("TAUROS_UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "openapi/openapi.json is stale: run `cargo run -- openapi > openapi/openapi.json` and review the diff"
        );
    }

    #[test]
    fn every_operation_documents_its_error_statuses() {
        let doc = serde_json::to_value(super::document()).unwrap();
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                let statuses: Vec<&str> = op["responses"]
                    .as_object()
                    .unwrap()
                    .keys()
                    .map(String::as_str)
                    .collect();
                let has = |s: &str| statuses.contains(&s);
                if op.get("requestBody").is_some() {
                    for s in ["400", "413", "415", "422"] {
                        assert!(has(s), "{method} {path} lacks {s}");
                    }
                }
                if op.get("security").is_some() {
                    assert!(has("401"), "{method} {path} lacks 401");
                }
                if path.starts_with("/v1/") {
                    assert!(has("503"), "{method} {path} lacks 503");
                }
                if path.contains('{') {
                    assert!(has("400") && has("404"), "{method} {path} lacks 400/404");
                }
            }
        }
    }
}
