//! What a request must pass before the MCP server sees it, and how its refusals look.
//!
//! In order: a browser `Origin` that is not configured is refused (DNS-rebinding protection;
//! non-browser clients send no `Origin` and pass); the bearer credential is authenticated as
//! REST does it (same 401, same rate limit); a human's session is refused with 403. The agent,
//! marked as coming through `mcp`, reaches the tools in the request's extensions.
//!
//! Afterwards, the transport's plain-text refusals become problem details like every other
//! error; its JSON-RPC answers are left as they are, whatever their status: MCP clients read
//! them.

use crate::http::extract::{bearer, read_body};
use crate::http::json::saturate_wide_integers;
use crate::http::middleware::OwnErrorBody;
use crate::http::problem::ApiError;
use axum::body::{Body, Bytes, to_bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::borrow::Cow;
use std::sync::Arc;
use tauros_app::{Actor, App, AppError};
use tauros_domain::identity::Interface;

#[derive(Clone)]
pub(super) struct Guard {
    pub(super) app: App,
    /// Browser origins allowed to call `/mcp` (exact `scheme://host[:port]`).
    pub(super) origins: Arc<[String]>,
}

/// The transport's plain-text refusals are short; this bounds what is read back.
const MAX_REFUSAL_BYTES: usize = 4096;

/// The Origin check and the agent's authentication, then the MCP server, then [`shape`].
pub(super) async fn check_origin_and_agent(
    State(guard): State<Guard>,
    mut request: Request,
    next: Next,
) -> Response {
    if let Some(origin) = request.headers().get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .is_ok_and(|o| guard.origins.iter().any(|a| a == o));
        if !allowed {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "requests to /mcp from this browser origin are refused; an operator may allow \
                 it with TAUROS_MCP_ORIGINS (agents that are not browsers send no Origin)",
            )
            .into_response();
        }
    }
    let Some(token) = bearer(request.headers()) else {
        return unauthorized();
    };
    let actor = match guard.app.authenticate(token, Interface::Mcp).await {
        Ok(actor @ Actor::Agent(_)) => actor,
        Ok(Actor::Human(_)) => {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "/mcp is for agents, with an agent API key (`tauros_…`); humans use the REST \
                 API, where approvals happen",
            )
            .into_response();
        }
        Err(AppError::Unauthorized) => return unauthorized(),
        Err(e) => return ApiError::from(e).into_response(),
    };
    request.extensions_mut().insert(actor);
    let request = match with_integers_read_as_rest_reads_them(request).await {
        Ok(request) => request,
        Err(refused) => return refused.into_response(),
    };
    let declared_json = request
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| {
            v.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json"))
        });
    shape(next.run(request).await, declared_json).await
}

/// A JSON-RPC message's integer literals beyond 64 bits saturated, as REST's body reader does
/// ([`saturate_wide_integers`]): the transport parses the message before a tool sees its
/// arguments, and would read such an integer as a float.
async fn with_integers_read_as_rest_reads_them(request: Request) -> Result<Request, ApiError> {
    if request.method() != Method::POST {
        return Ok(request);
    }
    let (mut parts, body) = request.into_parts();
    let bytes = read_body(Request::from_parts(parts.clone(), body), &()).await?;
    let bytes = match saturate_wide_integers(&bytes) {
        Cow::Borrowed(_) => bytes,
        Cow::Owned(saturated) => {
            parts
                .headers
                .insert(header::CONTENT_LENGTH, HeaderValue::from(saturated.len()));
            Bytes::from(saturated)
        }
    };
    Ok(Request::from_parts(parts, Body::from(bytes)))
}

fn unauthorized() -> Response {
    ApiError::new(
        StatusCode::UNAUTHORIZED,
        "unauthorized",
        "send `Authorization: Bearer <key>` with a valid agent API key (`tauros_…`)",
    )
    .into_response()
}

/// Turns a plain-text refusal of the transport into a problem with the same status and its
/// sentence as the detail. A body declared as JSON that is no JSON-RPC message is 400
/// `invalid_json`, as for REST, not the transport's 415.
async fn shape(response: Response, declared_json: bool) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error()) {
        return response;
    }
    let json = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if json {
        let mut response = response;
        response.extensions_mut().insert(OwnErrorBody);
        return response;
    }
    let (parts, body) = response.into_parts();
    let text = to_bytes(body, MAX_REFUSAL_BYTES)
        .await
        .map(|b| String::from_utf8_lossy(&b).trim().to_owned())
        .unwrap_or_default();
    let (status, code) = match status {
        StatusCode::UNSUPPORTED_MEDIA_TYPE if declared_json => {
            (StatusCode::BAD_REQUEST, "invalid_json")
        }
        s => (s, refusal_code(s)),
    };
    let detail = if text.is_empty() || status.is_server_error() {
        crate::http::problem::for_status(status).problem().detail
    } else if code == "invalid_json" {
        format!(
            "the body is not a JSON-RPC 2.0 message ({}); send one object such as \
             {{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}}",
            text.chars().take(200).collect::<String>()
        )
    } else {
        text.chars().take(300).collect()
    };
    let mut answer = ApiError::new(status, code, detail).into_response();
    // `Allow` of a 405, and whatever else the transport said in headers.
    for (name, value) in parts.headers.iter() {
        if name != header::CONTENT_TYPE && name != header::CONTENT_LENGTH {
            answer.headers_mut().insert(name, value.clone());
        }
    }
    answer
}

fn refusal_code(status: StatusCode) -> &'static str {
    match status {
        StatusCode::NOT_ACCEPTABLE => "not_acceptable",
        StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported_media_type",
        StatusCode::PAYLOAD_TOO_LARGE => "payload_too_large",
        StatusCode::METHOD_NOT_ALLOWED => "method_not_allowed",
        StatusCode::NOT_FOUND => "not_found",
        StatusCode::FORBIDDEN => "forbidden",
        s if s.is_server_error() => "internal",
        _ => "bad_request",
    }
}
