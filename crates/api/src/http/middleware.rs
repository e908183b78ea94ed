//! Cross-cutting layers: every error becomes problem+json carrying the request id, and every
//! request is counted and timed by route template.

use super::body_timeout::{BodyClock, with_body_clock};
use super::problem::{PROBLEM_JSON, for_status};
use axum::body::{Body, to_bytes};
use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::HashMap;
use std::time::Instant;
use tracing::{Instrument, Span};

pub const REQUEST_ID: &str = "x-request-id";

/// The longest request id a client may choose.
const MAX_REQUEST_ID: usize = 128;

/// The request's id: the client's `X-Request-Id` if it is 1–128 safe characters (letters,
/// digits, `-_.:`), so that ids echoed into headers, bodies and logs stay small and inert;
/// otherwise a fresh UUID. Set on the request for every layer and handler inside.
fn request_id(request: &mut Request) -> HeaderValue {
    let acceptable = request.headers().get(REQUEST_ID).filter(|v| {
        let bytes = v.as_bytes();
        (1..=MAX_REQUEST_ID).contains(&bytes.len())
            && bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b':'))
    });
    if let Some(id) = acceptable {
        return id.clone();
    }
    let mut buffer = uuid::Uuid::encode_buffer();
    let fresh = uuid::Uuid::new_v4().hyphenated().encode_lower(&mut buffer);
    // A UUID's hex and hyphens are always a header value.
    let id = HeaderValue::from_str(fresh).unwrap_or(HeaderValue::from_static("unknown"));
    request.headers_mut().insert(REQUEST_ID, id.clone());
    id
}

/// The outer edge of every request: the request id ([`request_id`], echoed as `X-Request-Id`
/// unless the answer set its own), problem+json error bodies ([`problem_details`]) and the
/// security headers ([`security_headers`]). One layer, not one per job: each layer costs every
/// request a boxed future and a clone of the service inside (docs/PERFORMANCE.md).
pub async fn edge(mut request: Request, next: Next) -> Response {
    let id = request_id(&mut request);
    let api = is_api(request.uri().path());
    let response = next.run(request).await;
    let mut response = problem_details(response, &id).await;
    security_headers(&mut response, api);
    if !response.headers().contains_key(REQUEST_ID) {
        response.headers_mut().insert(REQUEST_ID, id);
    }
    response
}

/// The inner edge, just outside the handlers, from the outside in: requests counted and timed
/// by route ([`metrics`]), their log span ([`request_span`]) and the body's progress clocks
/// ([`with_body_clock`]). The span is made here, where route and method are at hand, not by
/// tower-http's trace layer: a layer fewer, and no wrapper around the answer's body.
pub async fn inner(State(clock): State<BodyClock>, request: Request, next: Next) -> Response {
    let start = Instant::now();
    let method = method_label(request.method());
    let route = request.extensions().get::<MatchedPath>().cloned();
    let span = request_span(method, route.as_ref(), &request);
    let response = with_body_clock(clock, request, |request| next.run(request))
        .instrument(span)
        .await;
    let route = route.as_ref().map_or("unmatched", MatchedPath::as_str);
    let (count, duration) = request_metrics(method, route, response.status().as_u16());
    count.increment(1);
    duration.record(start.elapsed().as_secs_f64());
    response
}

/// The span every log line of a request is written in: its method, route template and id, each
/// recorded with `Display`: escaping a `Debug` string is costly and none of the three needs it
/// (a [`method_label`], a route template of ours, an id of [`request_id`]'s safe characters).
fn request_span(method: &'static str, route: Option<&MatchedPath>, request: &Request) -> Span {
    let route = route.map_or("unmatched", MatchedPath::as_str);
    let request_id = request
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    tracing::info_span!("request", method = %method, route = %route, request_id = %request_id)
}

fn is_api(path: &str) -> bool {
    path.starts_with("/v1/") || path == "/mcp"
}

/// The policy of an HTML page that sets none (the Swagger UI at `/docs`): its own scripts and
/// styles only (`'unsafe-inline'` for Swagger UI's inline styles), no plugins, no framing.
const CONTENT_SECURITY_POLICY: &str = "default-src 'self'; script-src 'self'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data:; font-src 'self' data:; \
    connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; \
    frame-ancestors 'none'";

/// Headers every response carries: `nosniff`; `Cache-Control: no-store` on REST and MCP answers
/// (some carry session tokens, API keys or invitation tokens); on HTML pages
/// `X-Frame-Options: DENY` and a strict Content-Security-Policy, unless the page set its own
/// (the console's, chosen in this crate and stricter).
fn security_headers(response: &mut Response, api: bool) {
    let html = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("text/html"));
    let headers = response.headers_mut();
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    if api {
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    }
    if html {
        if !headers.contains_key(header::CONTENT_SECURITY_POLICY) {
            headers.insert(
                header::CONTENT_SECURITY_POLICY,
                HeaderValue::from_static(CONTENT_SECURITY_POLICY),
            );
        }
        headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    }
}

/// [`security_headers`] alone, for `/metrics` on its own listener.
pub async fn only_security_headers(request: Request, next: Next) -> Response {
    let api = is_api(request.uri().path());
    let mut response = next.run(request).await;
    security_headers(&mut response, api);
    response
}

/// Marks an error response whose body is its protocol's own answer (a JSON-RPC error from
/// `/mcp`, which MCP clients read): [`problem_details`] leaves it as it is.
#[derive(Clone, Copy, Debug)]
pub struct OwnErrorBody;

/// Bounds what this layer reads back; our problem bodies stay far below it.
const MAX_PROBLEM_BYTES: usize = 1024 * 1024;

/// Makes sure every error response is problem+json with the request id in its body, whoever
/// produced it (a handler, an extractor, the router's 404/405, a layer's 413).
async fn problem_details(response: Response, request_id: &HeaderValue) -> Response {
    let status = response.status();
    if !(status.is_client_error() || status.is_server_error())
        || response.extensions().get::<OwnErrorBody>().is_some()
    {
        return response;
    }
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|v| v.as_bytes() == PROBLEM_JSON.as_bytes());
    let (mut parts, body) = response.into_parts();
    let mut problem = if is_problem {
        match to_bytes(body, MAX_PROBLEM_BYTES).await.ok().and_then(|b| {
            serde_json::from_slice::<serde_json::Map<String, serde_json::Value>>(&b).ok()
        }) {
            Some(map) => map,
            None => to_map(&for_status(status).problem()),
        }
    } else {
        // Not ours: replace the body, keep the status and the headers that matter.
        let fresh = for_status(status).into_response();
        for (name, value) in fresh.headers() {
            parts.headers.insert(name, value.clone());
        }
        to_map(&for_status(status).problem())
    };
    if let Ok(id) = request_id.to_str() {
        problem.insert(
            "request_id".into(),
            serde_json::Value::String(id.to_owned()),
        );
    }
    let bytes = serde_json::to_vec(&problem).unwrap_or_default();
    parts
        .headers
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(PROBLEM_JSON));
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(bytes))
}

fn to_map(problem: &super::problem::Problem) -> serde_json::Map<String, serde_json::Value> {
    match serde_json::to_value(problem) {
        Ok(serde_json::Value::Object(map)) => map,
        _ => serde_json::Map::new(),
    }
}

/// The `method` label: one of a fixed set, so that made-up methods cannot grow `/metrics`
/// (routes are templates, and one `unmatched` label covers every unknown path).
fn method_label(method: &axum::http::Method) -> &'static str {
    use axum::http::Method;
    match *method {
        Method::GET => "GET",
        Method::POST => "POST",
        Method::PUT => "PUT",
        Method::PATCH => "PATCH",
        Method::DELETE => "DELETE",
        Method::HEAD => "HEAD",
        Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// The counter and histogram of one (method, route template, status), registered once so a
/// request neither builds labels nor searches the registry; the map stays as small as `/metrics`.
fn request_metrics(
    method: &'static str,
    route: &str,
    status: u16,
) -> (metrics::Counter, metrics::Histogram) {
    type Handles = (metrics::Counter, metrics::Histogram);
    type ByRoute = HashMap<Box<str>, Handles>;
    static KNOWN: std::sync::LazyLock<std::sync::RwLock<HashMap<(&'static str, u16), ByRoute>>> =
        std::sync::LazyLock::new(Default::default);
    if let Some(found) = KNOWN
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&(method, status))
        .and_then(|routes| routes.get(route))
    {
        return found.clone();
    }
    let labels = [
        ("method", method.to_owned()),
        ("route", route.to_owned()),
        ("status", status.to_string()),
    ];
    let handles = (
        metrics::counter!("http_requests_total", &labels),
        metrics::histogram!("http_request_duration_seconds", &labels),
    );
    KNOWN
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .entry((method, status))
        .or_default()
        .insert(route.into(), handles.clone());
    handles
}
