//! The approver console: a web page for humans, served from assets embedded in the binary. It
//! talks only to the public REST API (`/v1/…`), so it knows nothing of `app`, `store` or
//! `domain`: whatever it does, any other frontend can do.
//!
//! Plain HTML, CSS and ES modules, no build step; the page lives at `/console/`.

use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;
use sha2::{Digest, Sha256};

/// Where the console lives.
pub const PATH: &str = "/console/";

/// The console page's policy: its own scripts, styles and images only; no inline script or
/// style, no `eval`, no plugins, no framing; requests to its own origin only (the API);
/// forms that never submit anywhere (the scripts handle them, so a page whose scripts failed
/// cannot send a password in a URL); and DOM sinks such as `innerHTML` refused outright (the
/// scripts build every node with `textContent`).
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
    style-src 'self'; img-src 'self'; connect-src 'self'; manifest-src 'none'; \
    base-uri 'none'; form-action 'none'; frame-ancestors 'none'; \
    require-trusted-types-for 'script'; trusted-types 'none'";

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

/// Every file of the console: its path under `/console/`, its media type and its bytes.
pub const ASSETS: &[(&str, &str, &str)] = &[
    ("", HTML, include_str!("assets/index.html")),
    ("app.css", CSS, include_str!("assets/app.css")),
    ("icon.svg", SVG, include_str!("assets/icon.svg")),
    ("app.js", JS, include_str!("assets/app.js")),
    ("api.js", JS, include_str!("assets/api.js")),
    ("dom.js", JS, include_str!("assets/dom.js")),
    ("format.js", JS, include_str!("assets/format.js")),
    ("diff.js", JS, include_str!("assets/diff.js")),
    ("signin.js", JS, include_str!("assets/signin.js")),
    ("inbox.js", JS, include_str!("assets/inbox.js")),
    ("review.js", JS, include_str!("assets/review.js")),
    ("settings.js", JS, include_str!("assets/settings.js")),
    ("agents.js", JS, include_str!("assets/agents.js")),
    ("customers.js", JS, include_str!("assets/customers.js")),
    ("payments.js", JS, include_str!("assets/payments.js")),
    ("jobs.js", JS, include_str!("assets/jobs.js")),
    ("webhooks.js", JS, include_str!("assets/webhooks.js")),
];

/// The console's routes: each asset under `/console/`, and redirects from `/` and `/console`.
pub fn router<S: Clone + Send + Sync + 'static>() -> Router<S> {
    let mut router = Router::new()
        .route("/", get(|| async { Redirect::to(PATH) }))
        .route("/console", get(|| async { Redirect::to(PATH) }));
    for &(name, media_type, body) in ASSETS {
        let etag = etag(body);
        router = router.route(
            &format!("{PATH}{name}"),
            get(move |headers: HeaderMap| async move { serve(&headers, media_type, body, &etag) }),
        );
    }
    router
}

/// A strong validator: the first 16 bytes of the content's SHA-256, quoted.
fn etag(body: &str) -> String {
    let digest = Sha256::digest(body.as_bytes());
    format!("\"{}\"", tauros_domain::hex::lower(&digest[..16]))
}

fn serve(
    headers: &HeaderMap,
    media_type: &'static str,
    body: &'static str,
    etag: &str,
) -> Response {
    let unchanged = headers
        .get(header::IF_NONE_MATCH)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
    let mut response = if unchanged {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        ([(header::CONTENT_TYPE, media_type)], body).into_response()
    };
    let out = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(etag) {
        out.insert(header::ETAG, value);
    }
    // Revalidate every time: a 304 costs a round trip, a stale script after an upgrade costs
    // an approver a page that speaks an older API.
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    out.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    if media_type == HTML {
        out.insert(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY),
        );
    }
    response
}
