//! RFC 9457 problem details: the one shape every error leaving Tauros has, and the one place
//! where app errors become HTTP statuses and codes.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use tauros_app::{AppError, FieldError, KeyHolder, OtherKind};
use utoipa::ToSchema;

pub const PROBLEM_JSON: &str = "application/problem+json";

/// The most entries `errors[]` holds (docs/contract/api.md Conventions, resource bounds).
pub const MAX_ERRORS: usize = 100;

/// One offending field of a 422.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProblemField {
    /// The request's own name for the field (`lines[1].quantity`).
    pub field: String,
    /// Stable machine-readable code.
    pub code: String,
    /// What to send instead.
    pub detail: String,
}

/// An error response (RFC 9457).
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// A URI naming the problem type.
    #[serde(rename = "type")]
    pub type_: String,
    /// Short summary of the problem type.
    pub title: String,
    /// The response's HTTP status code, repeated for clients that only keep the body.
    pub status: u16,
    /// Stable machine-readable name; clients match on this.
    pub code: String,
    /// A sentence saying what was wrong and what to do instead.
    pub detail: String,
    /// Every offending field (validation errors only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ProblemField>,
    /// The request id, as in the `X-Request-Id` header.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(nullable = false)]
    pub request_id: Option<String>,
    /// Facts a client needs for some codes (`from` and `action` of `invalid_transition`).
    #[serde(flatten)]
    #[schema(ignore)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// An error on its way out: status, code and sentence, rendered as problem+json.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    code: &'static str,
    title: &'static str,
    detail: String,
    members: Vec<(&'static str, String)>,
    errors: Vec<FieldError>,
    /// Seconds a client should wait before retrying (`Retry-After`).
    retry_after: Option<u32>,
}

impl ApiError {
    /// The title comes from the code; unknown codes get "Bad request".
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            title: title_for(code),
            detail: detail.into(),
            members: Vec::new(),
            errors: Vec::new(),
            retry_after: None,
        }
    }

    /// 400 with a stable code (`invalid_json`, `unknown_field`, `invalid_type`, …).
    pub fn bad_request(code: &'static str, detail: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, code, detail)
    }

    /// 422 listing every offending field (at most [`MAX_ERRORS`]).
    pub fn validation(mut errors: Vec<FieldError>) -> ApiError {
        errors.truncate(MAX_ERRORS);
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        let detail = format!(
            "fix these fields and send the request again: {}",
            fields.join(", ")
        );
        ApiError {
            errors,
            ..ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "validation_failed",
                detail,
            )
        }
    }

    /// Tells the client when to retry, in whole seconds.
    pub fn retry_after(mut self, seconds: u32) -> ApiError {
        self.retry_after = Some(seconds);
        self
    }

    /// Lists every offending field (a 400 about several members of one body).
    pub fn with_errors(mut self, mut errors: Vec<FieldError>) -> ApiError {
        errors.truncate(MAX_ERRORS);
        self.errors = errors;
        self
    }

    /// Names the one field a 400 is about (a top-level `field` member of the problem).
    pub fn with_field(self, field: impl Into<String>) -> ApiError {
        self.with_member("field", field)
    }

    /// Adds a top-level member with a fact the client needs (`from`, `action`, …).
    pub fn with_member(mut self, name: &'static str, value: impl Into<String>) -> ApiError {
        self.members.push((name, value.into()));
        self
    }

    /// The stable code (`not_found`, `validation_failed`, …).
    pub fn code(&self) -> &'static str {
        self.code
    }

    /// Calls a field by another name, in `errors[]` and in the top-level `field` (the MCP
    /// surface takes as an argument what REST takes as a header).
    pub fn rename_field(mut self, from: &str, to: &str) -> ApiError {
        for e in &mut self.errors {
            if e.field == from {
                e.field = to.to_owned();
            }
        }
        for (name, value) in &mut self.members {
            if *name == "field" && value == from {
                *value = to.to_owned();
            }
        }
        if self.code == "validation_failed" {
            self.detail = self.detail.replace(from, to);
        }
        self
    }

    /// The problem body.
    pub fn problem(&self) -> Problem {
        Problem {
            type_: format!(
                "https://tauros.dev/problems/{}",
                self.code.replace('_', "-")
            ),
            title: self.title.to_owned(),
            status: self.status.as_u16(),
            code: self.code.to_owned(),
            detail: self.detail.clone(),
            errors: self
                .errors
                .iter()
                .map(|e| ProblemField {
                    field: e.field.clone(),
                    code: e.code.to_owned(),
                    detail: e.detail.clone(),
                })
                .collect(),
            request_id: None,
            extra: self
                .members
                .iter()
                .map(|(k, v)| ((*k).to_owned(), serde_json::Value::String(v.clone())))
                .collect(),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut response = (self.status, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
        if self.status == StatusCode::UNAUTHORIZED {
            headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

impl From<AppError> for ApiError {
    fn from(err: AppError) -> Self {
        use StatusCode as S;
        match err {
            AppError::Unauthorized => ApiError::new(
                S::UNAUTHORIZED,
                "unauthorized",
                "send `Authorization: Bearer <credential>` with a valid agent API key or session token",
            ),
            AppError::InvalidCredentials => ApiError::new(
                S::UNAUTHORIZED,
                "invalid_credentials",
                "the email, password or token is not valid; check them and try again",
            ),
            AppError::Forbidden(why) => ApiError::new(S::FORBIDDEN, "forbidden", why),
            AppError::MissingCapability(cap) => ApiError::new(
                S::FORBIDDEN,
                "missing_capability",
                format!(
                    "this key lacks the `{cap}` capability; ask the agent's owner for one that has it"
                ),
            ),
            AppError::SourceOwned => ApiError::new(
                S::FORBIDDEN,
                "source_owned",
                "this settlement source belongs to the agent that first reported under it; report \
                 under a source of your own (another `source` name) or with that agent's key",
            ),
            AppError::NotFound => ApiError::new(
                S::NOT_FOUND,
                "not_found",
                "no such resource (or it is not visible to you); check the id",
            ),
            AppError::NotAnInvoice(other) => {
                let (kind, detail) = other_kind(other);
                let problem =
                    ApiError::new(S::NOT_FOUND, "not_found", detail).with_member("id_kind", kind);
                match other.invoice_id() {
                    Some(id) => problem.with_member("invoice_id", id.to_string()),
                    None => problem,
                }
            }
            AppError::Validation(errors) => ApiError::validation(errors),
            AppError::ApproverExists => ApiError::new(
                S::CONFLICT,
                "approver_exists",
                "this organisation already has an approver; ask them to invite you",
            ),
            AppError::FourEyesRequired(detail) => {
                ApiError::new(S::FORBIDDEN, "four_eyes_required", detail)
            }
            AppError::InvalidTransition {
                from,
                action,
                detail,
            } => ApiError::new(S::CONFLICT, "invalid_transition", detail)
                .with_member("from", from)
                .with_member("action", action),
            AppError::Conflict { code, detail } => ApiError::new(S::CONFLICT, code, detail),
            AppError::IdempotencyConflict(holder) => {
                metrics::counter!("tauros_idempotency_conflicts_total").increment(1);
                let (member, id) = match holder {
                    KeyHolder::Invoice(id) => ("invoice_id", id),
                    KeyHolder::Destination(id) => ("payment_destination_id", id),
                    KeyHolder::SettlementEvent(id) => ("settlement_event_id", id),
                    KeyHolder::PaymentResolution(id) => ("payment_resolution_id", id),
                    KeyHolder::WebhookEndpoint(id) => ("webhook_endpoint_id", id),
                };
                let detail = match holder {
                    KeyHolder::SettlementEvent(_) => format!(
                        "this source already reported this event_id with a different body \
                         (settlement event {id}); nothing was written. An event never changes: \
                         send the original body again, or report what changed as a new event \
                         with a new event_id"
                    ),
                    _ => format!(
                        "this idempotency key was already used with a different payload for your \
                         {member} {id}; nothing was written. Send the original payload to get the \
                         original result, or use a new key for a new request"
                    ),
                };
                ApiError::new(S::CONFLICT, "idempotency_conflict", detail)
                    .with_member(member, id.to_string())
            }
            AppError::HasDependents => ApiError::new(
                S::CONFLICT,
                "has_dependents",
                "this record still owns other records; remove those first",
            ),
            AppError::RateLimited { retry_after, limit } => {
                let (name, what) = rate_limit_words(limit);
                ApiError::new(
                    S::TOO_MANY_REQUESTS,
                    "rate_limited",
                    format!("{what}; retry after {retry_after} seconds"),
                )
                .with_member("limit", name)
                .retry_after(retry_after)
            }
            AppError::Busy => ApiError::new(
                S::SERVICE_UNAVAILABLE,
                "unavailable",
                "too many sign-ins are being checked right now; retry the same request in a second",
            )
            .retry_after(1),
            AppError::Unavailable(e) => {
                tracing::warn!(error = %e, "database unavailable");
                ApiError::new(
                    S::SERVICE_UNAVAILABLE,
                    "unavailable",
                    "the database is unavailable; retry the same request (with the same idempotency key) shortly",
                )
            }
            AppError::Internal(e) => {
                tracing::error!(error = %e, "internal error");
                internal()
            }
        }
    }
}

/// The 500 answer: never a stack trace, SQL text or module name.
pub fn internal() -> ApiError {
    ApiError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "internal",
        "an unexpected error occurred; it has been logged with this request id",
    )
}

/// The problem for a bare status answered below the handlers (routing, a layer).
pub fn for_status(status: StatusCode) -> ApiError {
    use StatusCode as S;
    match status {
        S::NOT_FOUND => ApiError::new(
            status,
            "not_found",
            "no route matches this path; see /openapi.json",
        ),
        S::METHOD_NOT_ALLOWED => ApiError::new(
            status,
            "method_not_allowed",
            "this route does not accept this method; see /openapi.json",
        ),
        S::PAYLOAD_TOO_LARGE => too_large(),
        S::UNSUPPORTED_MEDIA_TYPE => unsupported_media_type(),
        S::REQUEST_TIMEOUT => {
            ApiError::new(status, "timeout", "the request took too long; retry it")
        }
        S::UNAUTHORIZED => AppError::Unauthorized.into(),
        S::FORBIDDEN => ApiError::new(status, "forbidden", "you may not do this"),
        // Another client error keeps its status (a 422 stays a 422).
        s if s.is_client_error() => ApiError::new(s, "bad_request", "the request was malformed"),
        S::SERVICE_UNAVAILABLE => ApiError::new(status, "unavailable", "retry shortly"),
        _ => internal(),
    }
}

/// 413: the body is over [`super::state::BODY_LIMIT`].
pub fn too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
        "the request body is over 1 MiB; send a smaller body",
    )
}

/// 415: the body is not declared as JSON.
pub fn unsupported_media_type() -> ApiError {
    ApiError::new(
        StatusCode::UNSUPPORTED_MEDIA_TYPE,
        "unsupported_media_type",
        "send the body as JSON with `Content-Type: application/json`",
    )
}

fn title_for(code: &str) -> &'static str {
    match code {
        "invalid_json" => "Body is not JSON",
        "unknown_field" => "Unknown field",
        "invalid_type" => "Wrong type",
        "float_not_allowed" => "Floating-point number not allowed",
        "idempotency_key_mismatch" => "Idempotency keys differ",
        "unauthorized" => "Authentication required",
        "invalid_credentials" => "Invalid credentials",
        "forbidden" => "Forbidden",
        "four_eyes_required" => "Another approver must decide",
        "missing_capability" => "Missing capability",
        "source_owned" => "Settlement source owned by another agent",
        "not_found" => "Not found",
        "method_not_allowed" => "Method not allowed",
        "idempotency_conflict" => "Idempotency key reused",
        "invalid_transition" => "Invalid transition",
        "approver_exists" => "Approver exists",
        "stale_revision" => "Stale revision",
        "payload_mismatch" => "Payload mismatch",
        "already_decided" => "Already decided",
        "destination_inactive" => "Destination inactive",
        "payload_integrity" => "Payload integrity violated",
        "revision_already_decided" => "Revision already decided",
        "has_dependents" => "Record has dependents",
        "submission_conflict" => "Submission id reused",
        "job_running" => "Job is running",
        "job_finished" => "Job already finished",
        "issue_in_progress" => "Issue in progress",
        "too_many_endpoints" => "Too many webhook endpoints",
        "revision_limit" => "Revision limit reached",
        "limit_reached" => "Limit reached",
        "payload_too_large" => "Payload too large",
        "unsupported_media_type" => "Unsupported media type",
        "not_acceptable" => "Not acceptable",
        "validation_failed" => "Validation failed",
        "rate_limited" => "Too many requests",
        "unavailable" => "Service unavailable",
        "timeout" => "Request timeout",
        "internal" => "Internal error",
        _ => "Bad request",
    }
}

/// An id passed where an invoice's belongs, named for a caller who may see it: the 404's
/// `id_kind` and its `detail` (what the id is and what to pass instead).
fn other_kind(other: OtherKind) -> (&'static str, String) {
    match other {
        OtherKind::Revision { invoice_id, number } => (
            "revision",
            format!(
                "no invoice has this id: that id is revision {number} of invoice {invoice_id}; \
                 pass the invoice id (`id`, not `current_revision.id`)"
            ),
        ),
        OtherKind::Event { invoice_id, seq } => (
            "event",
            format!(
                "no invoice has this id: that id is event {seq} of the audit trail of invoice \
                 {invoice_id}; pass the invoice id"
            ),
        ),
        OtherKind::Customer => (
            "customer",
            "no invoice has this id: that id is a customer's; pass an invoice id \
             (`?customer_id=` lists the customer's invoices)"
                .to_owned(),
        ),
        OtherKind::PaymentDestination => (
            "payment_destination",
            "no invoice has this id: that id is a payment destination's; pass an invoice id"
                .to_owned(),
        ),
    }
}

/// A limit's name in a 429 (`limit`), and what it says, truthfully: only the limit that refused.
fn rate_limit_words(limit: tauros_app::Limit) -> (&'static str, &'static str) {
    use tauros_app::Limit;
    match limit {
        Limit::Credential => ("credential", "too many requests with this credential"),
        Limit::Email => (
            "email",
            "too many failed sign-ins for this email, from one or more addresses; a device that \
             signed in to this account before can still sign in (send its device_token), or an \
             operator can clear the count (tauros user unlock --email)",
        ),
        Limit::Device => (
            "device",
            "too many failed sign-ins from this device (its device_token, or the session that \
             changes its password)",
        ),
        Limit::AddressAndEmail => (
            "address_and_email",
            "too many failed sign-ins for this email from this address",
        ),
        Limit::AddressInFlight => (
            "address_in_flight",
            "too many sign-ins from this address are being checked at once",
        ),
    }
}
