//! The OpenAPI 3.1 document: generated from the handlers' annotations, completed here with the
//! error statuses every route shares, committed at `openapi/openapi.json` and drift-checked.

use super::problem::{PROBLEM_JSON, Problem, ProblemField};
use crate::http::schema::{ActionSchema, InvoiceStateSchema};
use crate::http::state::AppState;
use axum::Router;
use std::collections::BTreeMap;
use tauros_domain::invoice::{Action, InvoiceState};
use utoipa::openapi::header::{Header, HeaderBuilder};
use utoipa::openapi::path::Operation;
use utoipa::openapi::schema::{ObjectBuilder, OneOfBuilder, Schema, SchemaType, Type};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::openapi::{ContentBuilder, Ref, RefOr, Required, ResponseBuilder};
use utoipa::{OpenApi, PartialSchema, ToSchema};
use utoipa_swagger_ui::SwaggerUi;

#[derive(OpenApi)]
#[openapi(
    info(
        title = "Tauros",
        description = "AI agents propose invoices; humans approve them. Every financial command is safe to repeat.",
        license(name = "Apache-2.0", identifier = "Apache-2.0"),
    ),
    servers((url = "/", description = "The server this document was fetched from")),
    components(schemas(
        Problem,
        ProblemField,
        super::schema::InvoiceStateSchema,
        super::schema::ActionSchema,
        super::schema::DestinationStateSchema,
        super::schema::JobStateSchema
    )),
    tags(
        (name = "sessions", description = "Humans: sign-in, sign-out, invitations"),
        (name = "organisation", description = "The organisation and its settings"),
        (name = "agents", description = "Agents and their API keys"),
        (name = "customers", description = "Customers: managed by humans, read by their agents"),
        (name = "payment destinations", description = "Where invoices are paid: registered by agents"),
        (name = "invoices", description = "Proposals by agents, decisions by humans"),
        (name = "settlement", description = "Payments: reported by settlement agents, reconciled by Tauros, read by humans"),
        (name = "currencies", description = "The currencies, exponents and networks Tauros accepts"),
        (name = "jobs", description = "The background job queue: what approvers see and do"),
        (name = "webhooks", description = "Signed notifications of invoice events to your endpoints (Standard Webhooks)"),
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

/// Adds what shared machinery answers rather than a handler (the statuses of bad bodies and
/// path parameters, missing credentials, rate limits, an unreachable database; the headers of
/// replays and rate limits) and the schema rules no derive can state.
pub fn finish(mut doc: utoipa::openapi::OpenApi) -> utoipa::openapi::OpenApi {
    for (path, item) in doc.paths.paths.iter_mut() {
        let ops = [
            ("get", &mut item.get),
            ("post", &mut item.post),
            ("put", &mut item.put),
            ("patch", &mut item.patch),
            ("delete", &mut item.delete),
        ];
        for (method, op) in ops {
            if let Some(op) = op {
                let hashing = HASHES_PASSWORDS.contains(&(method, path.as_str()));
                complete(path, op, hashing);
            }
        }
    }
    if let Some(components) = doc.components.as_mut() {
        for shared in Shared::ALL {
            components
                .responses
                .insert(shared.name().to_owned(), RefOr::T(shared.response()));
        }
        exactly_one_amount(&mut components.schemas);
        exactly_one_invoice_and_amount(&mut components.schemas);
        problem_members(&mut components.schemas);
    }
    doc
}

fn problem(description: &str) -> ResponseBuilder {
    ResponseBuilder::new().description(description).content(
        PROBLEM_JSON,
        ContentBuilder::new()
            .schema(Some(Ref::from_schema_name("Problem")))
            .build(),
    )
}

/// A refusal many operations share: written once under `components/responses`, referenced by
/// each (`complete`); its name is what a generated client calls it.
#[derive(Clone, Copy)]
enum Shared {
    InvalidBody,
    InvalidPathParameter,
    PayloadTooLarge,
    UnsupportedMediaType,
    ValidationFailed,
    InvalidPage,
    Unauthorized,
    RateLimited,
    NotFound,
    Unavailable,
    UnavailableOrHashing,
}

impl Shared {
    const ALL: [Shared; 11] = [
        Shared::InvalidBody,
        Shared::InvalidPathParameter,
        Shared::PayloadTooLarge,
        Shared::UnsupportedMediaType,
        Shared::ValidationFailed,
        Shared::InvalidPage,
        Shared::Unauthorized,
        Shared::RateLimited,
        Shared::NotFound,
        Shared::Unavailable,
        Shared::UnavailableOrHashing,
    ];

    fn name(self) -> &'static str {
        match self {
            Shared::InvalidBody => "InvalidBody",
            Shared::InvalidPathParameter => "InvalidPathParameter",
            Shared::PayloadTooLarge => "PayloadTooLarge",
            Shared::UnsupportedMediaType => "UnsupportedMediaType",
            Shared::ValidationFailed => "ValidationFailed",
            Shared::InvalidPage => "InvalidPage",
            Shared::Unauthorized => "Unauthorized",
            Shared::RateLimited => "RateLimited",
            Shared::NotFound => "NotFound",
            Shared::Unavailable => "Unavailable",
            Shared::UnavailableOrHashing => "UnavailableOrHashing",
        }
    }

    fn description(self) -> &'static str {
        match self {
            Shared::InvalidBody => {
                "`invalid_json`, `unknown_field`, `invalid_type` or `float_not_allowed`"
            }
            Shared::InvalidPathParameter => "`invalid_type`: a path parameter is not a UUID",
            Shared::PayloadTooLarge => "`payload_too_large`: the body is over 1 MiB",
            Shared::UnsupportedMediaType => {
                "`unsupported_media_type`: send `Content-Type: application/json`"
            }
            Shared::ValidationFailed => {
                "`validation_failed`: every offending field is in `errors[]`"
            }
            Shared::InvalidPage => "`validation_failed`: `limit` or `cursor` is invalid",
            Shared::Unauthorized => {
                "`unauthorized`: missing, malformed, expired or revoked credential"
            }
            Shared::RateLimited => {
                "`rate_limited`: this credential sent too many requests; retry after \
                 `Retry-After` seconds"
            }
            Shared::NotFound => {
                "`not_found`: unknown, or not visible to you (the two answer alike)"
            }
            Shared::Unavailable => {
                "`unavailable`: the database is unreachable; retry the same request"
            }
            Shared::UnavailableOrHashing => {
                "`unavailable`: too many sign-ins wait for password hashing (retry after \
                 `Retry-After` seconds), or the database is unreachable; retry the same request"
            }
        }
    }

    fn response(self) -> utoipa::openapi::Response {
        let mut response = problem(self.description()).build();
        match self {
            Shared::Unauthorized => insert_header(
                &mut response.headers,
                "WWW-Authenticate",
                HeaderBuilder::new()
                    .schema(string_enum(["Bearer"]))
                    .description(Some(
                        "Always `Bearer`: send `Authorization: Bearer <credential>`",
                    ))
                    .build(),
            ),
            Shared::RateLimited | Shared::UnavailableOrHashing => {
                insert_header(&mut response.headers, "Retry-After", retry_after());
            }
            _ => {}
        }
        response
    }
}

/// The operations that hash a password: 503 with `Retry-After` when the hashing queue is full.
const HASHES_PASSWORDS: [(&str, &str); 3] = [
    ("post", "/v1/sessions"),
    ("post", "/v1/invitations/accept"),
    ("post", "/v1/me/password"),
];

fn complete(path: &str, op: &mut Operation, hashes_passwords: bool) {
    let v1 = path.starts_with("/v1/");
    let secured = op.security.as_ref().is_some_and(|s| !s.is_empty());
    let has_body = op.request_body.is_some();
    let has_list_params = op
        .parameters
        .as_ref()
        .is_some_and(|ps| ps.iter().any(|p| p.name == "limit"));
    let idempotent = op
        .parameters
        .as_ref()
        .is_some_and(|ps| ps.iter().any(|p| p.name == IDEMPOTENCY_KEY));
    let command = idempotent
        || answers_with(op, "CommandResponse")
        || answers_with(op, "SettlementEventRecorded");
    // A status the route documents itself keeps its own answer.
    let mut add = |status: &str, shared: Shared| {
        op.responses
            .responses
            .entry(status.to_owned())
            .or_insert_with(|| {
                RefOr::Ref(Ref::new(format!(
                    "#/components/responses/{}",
                    shared.name()
                )))
            });
    };
    if has_body {
        add("400", Shared::InvalidBody);
        add("413", Shared::PayloadTooLarge);
        add("415", Shared::UnsupportedMediaType);
        add("422", Shared::ValidationFailed);
    }
    if path.contains('{') {
        add("400", Shared::InvalidPathParameter);
        add("404", Shared::NotFound);
    }
    if has_list_params {
        add("422", Shared::InvalidPage);
    }
    if secured {
        add("401", Shared::Unauthorized);
        add("429", Shared::RateLimited);
    }
    if v1 && hashes_passwords {
        add("503", Shared::UnavailableOrHashing);
    } else if v1 {
        add("503", Shared::Unavailable);
    }
    let invoicing = ["/v1/invoices", "/v1/customers", "/v1/payment-destinations"]
        .iter()
        .any(|prefix| path.starts_with(prefix));
    let capability = if invoicing {
        Some("invoicing")
    } else if path.starts_with("/v1/settlement-events") {
        Some("settlement")
    } else {
        None
    };
    if let Some(capability) = capability {
        let missing =
            format!("`missing_capability`: an agent key without the `{capability}` capability");
        // Added to a 403 the route documents already, or as the route's only 403.
        let forbidden = op
            .responses
            .responses
            .entry("403".to_owned())
            .or_insert_with(|| problem(&missing).build().into());
        if let RefOr::T(response) = forbidden
            && !response.description.contains("missing_capability")
        {
            response.description.push_str("; ");
            response.description.push_str(&missing);
        }
    }
    for (status, response) in op.responses.responses.iter_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        // A route's own 401, 429 or 503 carries the headers its shared one does.
        match status.as_str() {
            "401" => response
                .headers
                .extend(Shared::Unauthorized.response().headers),
            "429" => response
                .headers
                .extend(Shared::RateLimited.response().headers),
            "503" if hashes_passwords => response
                .headers
                .extend(Shared::UnavailableOrHashing.response().headers),
            s if command && s.starts_with('2') => insert_header(
                &mut response.headers,
                REPLAYED,
                HeaderBuilder::new()
                    .schema(string_enum(["true", "false"]))
                    .description(Some(
                        "`true` when the command's goal already held (a retry) and nothing was \
                         written; `false` when this request did the work",
                    ))
                    .build(),
            ),
            _ => {}
        }
    }
    optional_body_without_null(op);
}

/// `Retry-After` in whole seconds (429, and 503 when the password queue is full).
fn retry_after() -> Header {
    HeaderBuilder::new()
        .schema(
            ObjectBuilder::new()
                .schema_type(Type::Integer)
                .minimum(Some(0)),
        )
        .description(Some("Whole seconds to wait before retrying"))
        .build()
}

use super::headers::IDEMPOTENCY_KEY_HEADER as IDEMPOTENCY_KEY;
const REPLAYED: &str = "Idempotent-Replayed";

fn insert_header(headers: &mut BTreeMap<String, Header>, name: &str, header: Header) {
    headers.insert(name.to_owned(), header);
}

fn string_enum<const N: usize>(values: [&str; N]) -> ObjectBuilder {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(values))
}

/// Whether a success of `op` answers with the component `schema`.
fn answers_with(op: &Operation, schema: &str) -> bool {
    let wanted = format!("#/components/schemas/{schema}");
    op.responses.responses.iter().any(|(status, response)| {
        status.starts_with('2')
            && matches!(response, RefOr::T(r) if r.content.values().any(|c| {
                matches!(&c.schema, Some(RefOr::Ref(r)) if r.ref_location == wanted)
            }))
    })
}

/// `request_body(content = Option<T>)` reads as "T or null"; the server means "T or no body"
/// (a JSON `null` is refused). Say so: the body is optional and never null.
fn optional_body_without_null(op: &mut Operation) {
    let Some(body) = op.request_body.as_mut() else {
        return;
    };
    let mut optional = false;
    for content in body.content.values_mut() {
        if let Some(RefOr::T(Schema::OneOf(one_of))) = &content.schema {
            let mut rest = one_of.items.iter().filter(|s| !is_null(s));
            if let (Some(only), None) = (rest.next(), rest.next()) {
                content.schema = Some(only.clone());
                optional = true;
            }
        }
    }
    if optional {
        body.required = Some(Required::False);
    }
}

fn is_null(schema: &RefOr<Schema>) -> bool {
    matches!(schema, RefOr::T(Schema::Object(o)) if o.schema_type == SchemaType::Type(Type::Null))
}

/// A request line names its price in exactly one of `unit_amount` and `unit_amount_minor`,
/// which the derive cannot say: `LineRequest` becomes one of two shapes.
fn exactly_one_amount(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    one_of_shapes(
        schemas,
        "LineRequest",
        &[
            (
                "LineWithUnitAmount",
                &["unit_amount"],
                "A request line priced in major units (`unit_amount`, a decimal string).",
            ),
            (
                "LineWithUnitAmountMinor",
                &["unit_amount_minor"],
                "A request line priced in minor units (`unit_amount_minor`).",
            ),
        ],
        &["unit_amount", "unit_amount_minor"],
    );
}

/// A settlement event names exactly one of `invoice_id` and `invoice_number`, and one of
/// `amount` and `amount_minor`: `SettlementEventRequest` becomes one of four shapes.
fn exactly_one_invoice_and_amount(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    one_of_shapes(
        schemas,
        "SettlementEventRequest",
        &[
            (
                "SettlementEventByIdWithAmount",
                &["invoice_id", "amount"],
                "An event naming the invoice by `invoice_id`, the amount in major units.",
            ),
            (
                "SettlementEventByIdWithAmountMinor",
                &["invoice_id", "amount_minor"],
                "An event naming the invoice by `invoice_id`, the amount in minor units.",
            ),
            (
                "SettlementEventByNumberWithAmount",
                &["invoice_number", "amount"],
                "An event naming the invoice by `invoice_number`, the amount in major units.",
            ),
            (
                "SettlementEventByNumberWithAmountMinor",
                &["invoice_number", "amount_minor"],
                "An event naming the invoice by `invoice_number`, the amount in minor units.",
            ),
        ],
        &["invoice_id", "invoice_number", "amount", "amount_minor"],
    );
}

/// Replaces the derived `component` by one of `shapes`: each `(name, members, description)`
/// is the component requiring `members` and without the other `alternatives`.
fn one_of_shapes(
    schemas: &mut BTreeMap<String, RefOr<Schema>>,
    component: &str,
    shapes: &[(&str, &[&str], &str)],
    alternatives: &[&str],
) {
    let Some(RefOr::T(Schema::Object(base))) = schemas.get(component).cloned() else {
        return;
    };
    let mut one_of = OneOfBuilder::new();
    for (name, members, description) in shapes {
        let mut shape = base.clone();
        for other in alternatives.iter().filter(|a| !members.contains(a)) {
            shape.properties.remove(*other);
            shape.required.retain(|r| r != other);
        }
        for member in *members {
            if !shape.required.iter().any(|r| r == member) {
                shape.required.push((*member).to_owned());
            }
        }
        shape.description = Some((*description).to_owned());
        schemas.insert((*name).to_owned(), RefOr::T(Schema::Object(shape)));
        one_of = one_of.item(Ref::from_schema_name(*name));
    }
    schemas.insert(
        component.to_owned(),
        one_of.description(base.description).into(),
    );
}

/// Members a problem carries for some codes, besides the RFC 9457 ones; `Problem` adds them
/// as a flattened map, which no derive can see.
#[derive(ToSchema)]
#[allow(dead_code)]
struct ProblemMembers {
    /// The one request member a 400 is about (`unknown_field`, `invalid_type`,
    /// `float_not_allowed`, `idempotency_key_mismatch`): a body path such as
    /// `lines[0].unit_amount`, `id` for the path, or `Idempotency-Key` for the header.
    #[schema(nullable = false)]
    field: Option<String>,
    /// `invalid_transition`: the invoice's state when the command arrived.
    #[schema(nullable = false)]
    #[schema(value_type = Option<InvoiceStateSchema>)]
    from: Option<InvoiceState>,
    /// `invalid_transition`: the command that this state does not allow.
    #[schema(nullable = false)]
    #[schema(value_type = Option<ActionSchema>)]
    action: Option<Action>,
    /// `idempotency_conflict` on a create of an invoice: the caller's own invoice that holds
    /// the key (`GET /v1/invoices/{invoice_id}`).
    #[schema(nullable = false)]
    invoice_id: Option<uuid::Uuid>,
    /// `idempotency_conflict` on a create of a payment destination: the caller's own
    /// destination that holds the key.
    #[schema(nullable = false)]
    payment_destination_id: Option<uuid::Uuid>,
}

fn problem_members(schemas: &mut BTreeMap<String, RefOr<Schema>>) {
    let (Some(RefOr::T(Schema::Object(problem))), RefOr::T(Schema::Object(members))) =
        (schemas.get_mut("Problem"), ProblemMembers::schema())
    else {
        return;
    };
    problem.properties.extend(members.properties);
}

/// `/openapi.json` and the Swagger UI at `/docs`, with its assets embedded in the binary.
pub fn docs_router(doc: utoipa::openapi::OpenApi) -> Router<AppState> {
    Router::new().merge(SwaggerUi::new("/docs").url("/openapi.json", doc))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    /// The committed document must be exactly what this build generates. To accept a change:
    /// `cargo run -- openapi > openapi/openapi.json` (or run this test with
    /// `TAUROS_UPDATE_OPENAPI=1`), then review the diff.
    #[test]
    fn committed_openapi_document_matches_the_code() {
        let generated = format!("{}\n", crate::http::document().to_pretty_json().unwrap());
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../openapi/openapi.json");
        if std::env::var_os("TAUROS_UPDATE_OPENAPI").is_some() {
            std::fs::write(path, &generated).unwrap();
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == generated,
            "openapi/openapi.json is stale: run `cargo run -- openapi > openapi/openapi.json` and review the diff"
        );
    }

    /// Every limit the document states (`maxLength`, `maxItems`, `maximum`) is the one the
    /// code enforces: the domain's constant for what is sealed or stored, the wire's own for
    /// paging. A limit added to the document must be added here, with its source.
    #[test]
    fn every_limit_the_document_states_is_the_one_the_code_enforces() {
        use tauros_domain::{address, fingerprint, identity, invoice, job, lines, settlement};
        use tauros_domain::{text, webhook};
        let n = |v: usize| v as u64;
        let name = n(text::MAX_NAME_CHARS);
        let key = n(fingerprint::MAX_KEY_CHARS);
        let event_id = n(settlement::MAX_IDENTIFIER_CHARS);
        let mut expected: std::collections::BTreeMap<String, u64> = [
            (
                "AcceptInvitationRequest.password.maxLength",
                n(identity::MAX_PASSWORD_CHARS),
            ),
            (
                "CancelRequest.reason.maxLength",
                n(invoice::MAX_REASON_CHARS),
            ),
            (
                "ChangePasswordRequest.current_password.maxLength",
                n(identity::MAX_PASSWORD_CHARS),
            ),
            (
                "ChangePasswordRequest.new_password.maxLength",
                n(identity::MAX_PASSWORD_CHARS),
            ),
            (
                "CreateAgentRequest.capabilities.maxItems",
                n(identity::MAX_CAPABILITIES),
            ),
            ("CreateAgentRequest.name.maxLength", name),
            (
                "CreateCustomerRequest.email.maxLength",
                n(identity::MAX_EMAIL_CHARS),
            ),
            ("CreateCustomerRequest.name.maxLength", name),
            (
                "CreateDestinationRequest.address.maxLength",
                n(address::MAX_ADDRESS_CHARS),
            ),
            ("CreateDestinationRequest.label.maxLength", name),
            ("CreateInvoiceRequest.idempotency_key.maxLength", key),
            ("CreateInvoiceRequest.lines.maxItems", n(lines::MAX_LINES)),
            (
                "CreateInvoiceRequest.reasoning.maxLength",
                n(invoice::MAX_REASONING_CHARS),
            ),
            (
                "CreateWebhookEndpointRequest.description.maxLength",
                n(webhook::MAX_DESCRIPTION_CHARS),
            ),
            (
                "CreateWebhookEndpointRequest.events.maxItems",
                n(webhook::MAX_EVENTS),
            ),
            (
                "CreateWebhookEndpointRequest.timeout_seconds.maximum",
                *webhook::TIMEOUT_SECONDS.end() as u64,
            ),
            (
                "CreateWebhookEndpointRequest.url.maxLength",
                n(webhook::MAX_URL_CHARS),
            ),
            (
                "InviteRequest.email.maxLength",
                n(identity::MAX_EMAIL_CHARS),
            ),
            (
                "LineWithUnitAmount.description.maxLength",
                n(lines::MAX_DESCRIPTION_CHARS),
            ),
            (
                "LineWithUnitAmountMinor.description.maxLength",
                n(lines::MAX_DESCRIPTION_CHARS),
            ),
            (
                "MinorUnitsInput.maximum",
                u64::try_from(tauros_domain::money::MAX_JSON_INTEGER).unwrap(),
            ),
            ("RenameAgentRequest.name.maxLength", name),
            ("ReviseRequest.lines.maxItems", n(lines::MAX_LINES)),
            (
                "ReviseRequest.reasoning.maxLength",
                n(invoice::MAX_REASONING_CHARS),
            ),
            (
                "SignInRequest.email.maxLength",
                n(identity::MAX_EMAIL_CHARS),
            ),
            ("SignInRequest.organisation.maxLength", name),
            (
                "SignInRequest.device_token.maxLength",
                n(identity::MAX_DEVICE_TOKEN_CHARS),
            ),
            (
                "SignInRequest.password.maxLength",
                n(identity::MAX_PASSWORD_CHARS),
            ),
            (
                "UpdateCustomerRequest.email.maxLength",
                n(identity::MAX_EMAIL_CHARS),
            ),
            ("UpdateCustomerRequest.name.maxLength", name),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        for by in ["ById", "ByNumber"] {
            for amount in ["WithAmount", "WithAmountMinor"] {
                let schema = format!("SettlementEvent{by}{amount}");
                for field in ["event_id", "payment_id", "source"] {
                    expected.insert(format!("{schema}.{field}.maxLength"), event_id);
                }
                if by == "ByNumber" {
                    expected.insert(format!("{schema}.invoice_number.maxLength"), event_id);
                }
            }
        }
        let doc = serde_json::to_value(crate::http::document()).unwrap();
        let mut stated = std::collections::BTreeMap::new();
        for (name, schema) in doc["components"]["schemas"].as_object().unwrap() {
            limits(name, schema, &mut stated);
        }
        for (path, item) in doc["paths"].as_object().unwrap() {
            for (method, op) in item.as_object().unwrap() {
                for param in op["parameters"].as_array().into_iter().flatten() {
                    let at = format!("{method} {path} {}", param["name"].as_str().unwrap());
                    limits(&at, &param["schema"], &mut stated);
                }
            }
        }
        for (at, limit) in &stated {
            let wanted = expected.get(at).copied().or_else(|| {
                // Paging, the keyed routes' header and the jobs filter, on every operation.
                let param = at.rsplit(' ').next().unwrap_or("");
                match param {
                    "limit.maximum" => Some(crate::http::extract::MAX_PAGE as u64),
                    "Idempotency-Key.maxLength" => Some(key),
                    "kind.maxLength" => Some(n(job::MAX_KIND_CHARS)),
                    _ => None,
                }
            });
            assert_eq!(wanted, Some(*limit), "{at}: the document states {limit}");
        }
        for at in expected.keys() {
            assert!(stated.contains_key(at), "{at} is no longer stated");
        }
    }

    /// The limits a schema states, as `<where>.<property>.<keyword>`.
    fn limits(at: &str, schema: &Value, out: &mut std::collections::BTreeMap<String, u64>) {
        for keyword in ["maxLength", "maxItems", "maximum"] {
            if let Some(limit) = schema[keyword].as_u64() {
                out.insert(format!("{at}.{keyword}"), limit);
            }
        }
        if let Some(properties) = schema["properties"].as_object() {
            for (name, property) in properties {
                limits(&format!("{at}.{name}"), property, out);
            }
        }
        for combined in ["allOf", "oneOf", "anyOf"] {
            for part in schema[combined].as_array().into_iter().flatten() {
                limits(at, part, out);
            }
        }
    }

    /// A response as a client reads it: a shared one from `components/responses`.
    fn resolved<'a>(doc: &'a Value, response: &'a Value) -> &'a Value {
        match response["$ref"].as_str() {
            Some(target) => {
                let name = target.trim_start_matches("#/components/responses/");
                &doc["components"]["responses"][name]
            }
            None => response,
        }
    }

    #[test]
    fn every_operation_documents_its_error_statuses() {
        let doc = serde_json::to_value(crate::http::document()).unwrap();
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
                    assert!(has("429"), "{method} {path} lacks 429");
                    let retry_after =
                        &resolved(&doc, &op["responses"]["429"])["headers"]["Retry-After"];
                    assert!(
                        retry_after.is_object(),
                        "{method} {path}: 429 lacks Retry-After"
                    );
                }
                if path.starts_with("/v1/") {
                    assert!(has("503"), "{method} {path} lacks 503");
                }
                let hashing = ["/v1/sessions", "/v1/invitations/accept", "/v1/me/password"]
                    .contains(&path.as_str())
                    && method == "post";
                assert_eq!(
                    resolved(&doc, &op["responses"]["503"])["headers"]["Retry-After"].is_object(),
                    hashing,
                    "{method} {path}: Retry-After on 503 only where the password queue can be full"
                );
                if path.contains('{') {
                    assert!(has("400") && has("404"), "{method} {path} lacks 400/404");
                }
            }
        }
    }

    fn operations(doc: &Value) -> impl Iterator<Item = (String, &Value)> {
        doc["paths"]
            .as_object()
            .unwrap()
            .iter()
            .flat_map(|(path, item)| {
                item.as_object()
                    .unwrap()
                    .iter()
                    .map(move |(method, op)| (format!("{method} {path}"), op))
            })
    }

    fn walk<'a>(value: &'a Value, visit: &mut impl FnMut(&'a Value)) {
        visit(value);
        match value {
            Value::Object(map) => map.values().for_each(|v| walk(v, visit)),
            Value::Array(items) => items.iter().for_each(|v| walk(v, visit)),
            _ => {}
        }
    }

    /// Generated clients fail on a dangling `$ref`.
    #[test]
    fn every_reference_resolves() {
        let doc = serde_json::to_value(crate::http::document()).unwrap();
        walk(&doc, &mut |value| {
            if let Some(target) = value.get("$ref").and_then(Value::as_str) {
                let (kind, name) = target
                    .trim_start_matches("#/components/")
                    .split_once('/')
                    .unwrap_or_else(|| panic!("{target} is not a component"));
                assert!(
                    doc["components"][kind].get(name).is_some(),
                    "{target} does not resolve"
                );
            }
        });
    }

    /// Every command (an invoice command, or a create that takes an idempotency key) declares
    /// `Idempotent-Replayed` on its successes; optional bodies have no `null` branch.
    #[test]
    fn commands_declare_replays_and_bodies_are_never_null() {
        let doc = serde_json::to_value(crate::http::document()).unwrap();
        for (name, op) in operations(&doc) {
            let successes = op["responses"]
                .as_object()
                .unwrap()
                .iter()
                .filter(|(status, _)| status.starts_with('2'));
            // A preview writes nothing: it is no command and replays nothing.
            let command = (name.contains("/v1/invoices") || name.contains("/v1/settlement-events"))
                && name.starts_with("post")
                && !name.contains("/v1/invoices/preview")
                || op["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == "Idempotency-Key"));
            for (status, response) in successes {
                let declared = response["headers"]["Idempotent-Replayed"].is_object();
                assert_eq!(declared, command, "{name} {status}: Idempotent-Replayed");
            }
            walk(&op["requestBody"], &mut |value| {
                assert!(
                    value.get("type") != Some(&json!("null")),
                    "{name}: a null body"
                );
            });
        }
    }

    /// A line names exactly one of its two amounts; either is its own shape.
    #[test]
    fn a_line_is_one_of_two_shapes() {
        let doc = serde_json::to_value(crate::http::document()).unwrap();
        let schemas = &doc["components"]["schemas"];
        assert_eq!(
            schemas["LineRequest"]["oneOf"],
            json!([
                {"$ref": "#/components/schemas/LineWithUnitAmount"},
                {"$ref": "#/components/schemas/LineWithUnitAmountMinor"},
            ])
        );
        for (shape, amount, other) in [
            ("LineWithUnitAmount", "unit_amount", "unit_amount_minor"),
            (
                "LineWithUnitAmountMinor",
                "unit_amount_minor",
                "unit_amount",
            ),
        ] {
            let shape = &schemas[shape];
            assert_eq!(
                shape["required"],
                json!(["description", "quantity", amount])
            );
            assert!(shape["properties"][other].is_null());
            assert_eq!(shape["additionalProperties"], json!(false));
        }
    }
}
