//! The peer's HTTP routes: the wire format of Tauros' `http` issuer and the control routes tests
//! use. docs/PEER.md is the reference for every status and body.

use super::faults::{ArmRequest, Faults, Mode};
use super::op_key::is_op_key;
use super::server::Hangup;
use super::store::{Call, Outcome, Store};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, Path, State};
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Extension, Json, Router};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use std::sync::Arc;
use std::time::Duration;

/// The largest invoice body the peer accepts.
pub const BODY_LIMIT: usize = 1024 * 1024;

const IDEMPOTENCY_KEY: &str = "idempotency-key";
const REPLAYED: HeaderName = HeaderName::from_static("idempotent-replayed");

#[derive(Clone)]
struct Peer {
    store: Store,
    faults: Arc<Faults>,
}

pub fn router(store: Store, faults: Arc<Faults>) -> Router {
    Router::new()
        .route("/invoices", post(execute))
        .route("/invoices/{op_key}", get(recover))
        .route("/stats", get(stats))
        .route(
            "/faults",
            get(list_faults).post(arm_fault).delete(clear_faults),
        )
        .route("/faults/release", post(release))
        .route("/records/{op_key}", axum::routing::put(plant))
        .fallback(|| async { error(StatusCode::NOT_FOUND, "no_route") })
        .method_not_allowed_fallback(|| async {
            error(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed")
        })
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .with_state(Peer { store, faults })
}

fn error(status: StatusCode, code: &str) -> Response {
    (status, Json(json!({ "error": code }))).into_response()
}

fn storage_error(e: &sqlx::Error) -> Response {
    tracing::error!(error = %e, "the peer's database failed");
    error(StatusCode::INTERNAL_SERVER_ERROR, "storage")
}

fn idempotency_key(headers: &HeaderMap) -> Result<String, &'static str> {
    let mut values = headers.get_all(IDEMPOTENCY_KEY).iter();
    let value = values.next().ok_or("missing_idempotency_key")?;
    if values.next().is_some() || !is_op_key(value.as_bytes()) {
        return Err("malformed_idempotency_key");
    }
    // Visible ASCII is UTF-8.
    Ok(String::from_utf8_lossy(value.as_bytes()).into_owned())
}

/// Writes `value` as canonical JSON (sorted members, no whitespace): equal bytes, same body.
fn canonical(value: &Value, out: &mut Vec<u8>) -> serde_json::Result<()> {
    match value {
        Value::Object(map) => {
            let mut members: Vec<_> = map.iter().collect();
            members.sort_by(|a, b| a.0.cmp(b.0));
            out.push(b'{');
            for (i, (key, member)) in members.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                serde_json::to_writer(&mut *out, key)?;
                out.push(b':');
                canonical(member, out)?;
            }
            out.push(b'}');
        }
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                canonical(item, out)?;
            }
            out.push(b']');
        }
        scalar => serde_json::to_writer(&mut *out, scalar)?,
    }
    Ok(())
}

/// SHA-256 of the canonical bytes of a JSON object body.
#[cfg(test)]
fn body_digest(body: &[u8]) -> Result<[u8; 32], &'static str> {
    canonical_body(body).map(|(digest, _)| digest)
}

/// The canonical text of a JSON object body and its SHA-256.
fn canonical_body(body: &[u8]) -> Result<([u8; 32], String), &'static str> {
    let value: Value = serde_json::from_slice(body).map_err(|_| "body_not_json")?;
    if !value.is_object() {
        return Err("body_not_an_object");
    }
    let mut bytes = Vec::with_capacity(body.len());
    canonical(&value, &mut bytes).map_err(|_| "body_not_json")?;
    let digest = Sha256::digest(&bytes).into();
    let text = String::from_utf8(bytes).map_err(|_| "body_not_json")?;
    Ok((digest, text))
}

/// `POST /invoices`: commit the operation under its key, exactly once.
async fn execute(
    State(peer): State<Peer>,
    hangup: Option<Extension<Hangup>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let key = idempotency_key(&headers);
    if let Err(e) = peer
        .store
        .record_call(Call::Execute, key.as_deref().ok())
        .await
    {
        return storage_error(&e);
    }
    let key = match key {
        Ok(key) => key,
        Err(code) => return error(StatusCode::BAD_REQUEST, code),
    };
    let body = match body {
        Ok(body) => body,
        Err(rejection) if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE => {
            return error(StatusCode::PAYLOAD_TOO_LARGE, "body_too_large");
        }
        Err(_) => return error(StatusCode::BAD_REQUEST, "body_unreadable"),
    };
    let (digest, text) = match canonical_body(&body) {
        Ok(done) => done,
        Err(code) => return error(StatusCode::BAD_REQUEST, code),
    };
    if let Some(fault) = peer.faults.take(Mode::Refuse422, Some(&key)) {
        tracing::info!("refused an invoice (refuse_422)");
        let reason = fault
            .reason
            .unwrap_or_else(|| super::faults::DEFAULT_REFUSAL.to_owned());
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({ "error": "refused", "reason": reason })),
        )
            .into_response();
    }
    // The work is its own task: like a real peer's, it goes on to its commit when the client
    // leaves (a client that disconnects while the request is slow or paused).
    let work = tokio::spawn(commit(peer, key, digest, text));
    let (outcome, after) = match work.await {
        Ok(Ok(done)) => done,
        Ok(Err(e)) => return storage_error(&e),
        Err(_) => return error(StatusCode::INTERNAL_SERVER_ERROR, "internal"),
    };
    let (status, answer) = match outcome {
        Outcome::KeyReused => {
            return error(
                StatusCode::UNPROCESSABLE_ENTITY,
                "key_reused_with_different_request",
            );
        }
        Outcome::Created(answer) => (StatusCode::CREATED, answer),
        Outcome::Replayed(answer) => (StatusCode::OK, answer),
    };
    match after {
        Some(AfterCommit::DropReply) => {
            if let Some(Extension(hangup)) = hangup {
                tracing::info!("committed; closing the connection unanswered");
                match hangup.now().await {}
            }
            // Only the peer's own accept loop can hang up; never answer as if it had.
            return error(StatusCode::INTERNAL_SERVER_ERROR, "cannot_hang_up");
        }
        Some(AfterCommit::Garbage) => {
            tracing::info!("committed; answering a body that is not JSON (garbage_after_commit)");
            return (
                status,
                [(axum::http::header::CONTENT_TYPE, "text/html")],
                "<html>issued</html>",
            )
                .into_response();
        }
        Some(AfterCommit::Error) => {
            tracing::info!("committed; answering 500 (error_after_commit)");
            return error(
                StatusCode::INTERNAL_SERVER_ERROR,
                "injected_error_after_commit",
            );
        }
        None => {}
    }
    let mut response = (status, Json(answer)).into_response();
    if status == StatusCode::OK {
        response
            .headers_mut()
            .insert(REPLAYED, HeaderValue::from_static("true"));
    }
    response
}

/// What an armed after-commit fault does to the answer of a committed (or replayed) request.
enum AfterCommit {
    DropReply,
    Error,
    Garbage,
}

/// Slow, pause, commit; then which after-commit fault applies, if any.
async fn commit(
    peer: Peer,
    key: String,
    digest: [u8; 32],
    text: String,
) -> sqlx::Result<(Outcome, Option<AfterCommit>)> {
    let faults = &peer.faults;
    if let Some(slow) = faults.take(Mode::Slow, Some(&key)) {
        tokio::time::sleep(Duration::from_millis(slow.millis.unwrap_or(0))).await;
    }
    if faults.take(Mode::PauseBeforeCommit, Some(&key)).is_some() {
        let released = faults.pause(&key);
        super::say::say(&format!("peer paused before commit {key}"));
        // Released by `POST /faults/release` or `DELETE /faults`, never by a timer.
        let _ = released.await;
    }
    let outcome = peer
        .store
        .commit(&key, &digest, &text, || {
            faults.take(Mode::NoDedupe, Some(&key)).is_some()
        })
        .await?;
    let after = match outcome {
        Outcome::KeyReused => None,
        Outcome::Created(_) | Outcome::Replayed(_) => {
            if faults
                .take(Mode::DropReplyAfterCommit, Some(&key))
                .is_some()
            {
                Some(AfterCommit::DropReply)
            } else if faults.take(Mode::ErrorAfterCommit, Some(&key)).is_some() {
                Some(AfterCommit::Error)
            } else if faults.take(Mode::GarbageAfterCommit, Some(&key)).is_some() {
                Some(AfterCommit::Garbage)
            } else {
                None
            }
        }
    };
    Ok((outcome, after))
}

/// `GET /invoices/{op_key}`, the recovery query: 404 `absent` only for a key never committed.
async fn recover(State(peer): State<Peer>, key: Result<Path<String>, PathRejection>) -> Response {
    let key = key
        .ok()
        .map(|Path(key)| key)
        .filter(|key| is_op_key(key.as_bytes()));
    if let Err(e) = peer.store.record_call(Call::Recover, key.as_deref()).await {
        return storage_error(&e);
    }
    let Some(key) = key else {
        return error(StatusCode::BAD_REQUEST, "malformed_op_key");
    };
    let faults = &peer.faults;
    if let Some(slow) = faults.take(Mode::Slow, Some(&key)) {
        tokio::time::sleep(Duration::from_millis(slow.millis.unwrap_or(0))).await;
    }
    if faults.take(Mode::RecoverUnknown, Some(&key)).is_some() {
        return error(StatusCode::SERVICE_UNAVAILABLE, "injected_recover_unknown");
    }
    if faults.take(Mode::LieAbsent, Some(&key)).is_some() {
        return error(StatusCode::NOT_FOUND, "absent");
    }
    match peer.store.find(&key).await {
        Ok(Some(answer)) => (StatusCode::OK, Json(answer)).into_response(),
        Ok(None) => error(StatusCode::NOT_FOUND, "absent"),
        Err(e) => storage_error(&e),
    }
}

/// `PUT /records/{op_key}`: a drill planting a record (one a restored Tauros forgot); no call.
async fn plant(
    State(peer): State<Peer>,
    key: Result<Path<String>, PathRejection>,
    body: Bytes,
) -> Response {
    let Some(key) = key
        .ok()
        .map(|Path(key)| key)
        .filter(|key| is_op_key(key.as_bytes()))
    else {
        return error(StatusCode::BAD_REQUEST, "malformed_op_key");
    };
    let (digest, text) = match canonical_body(&body) {
        Ok(done) => done,
        Err(code) => return error(StatusCode::BAD_REQUEST, code),
    };
    match peer.store.plant(&key, &digest, &text).await {
        Ok(answer) => (StatusCode::OK, Json(answer)).into_response(),
        Err(e) => storage_error(&e),
    }
}

async fn stats(State(peer): State<Peer>) -> Response {
    match peer.store.stats().await {
        Ok(stats) => Json(stats).into_response(),
        Err(e) => storage_error(&e),
    }
}

fn faults_view(faults: &Faults) -> Value {
    let (armed, paused) = faults.list();
    json!({ "armed": armed, "paused": paused })
}

async fn list_faults(State(peer): State<Peer>) -> Response {
    Json(faults_view(&peer.faults)).into_response()
}

async fn arm_fault(State(peer): State<Peer>, body: Bytes) -> Response {
    let armed = serde_json::from_slice::<ArmRequest>(&body)
        .map_err(|e| e.to_string())
        .and_then(ArmRequest::validate);
    match armed {
        Ok(fault) => {
            tracing::info!(mode = ?fault.mode, times = fault.times, "fault armed");
            peer.faults.arm(fault);
            (StatusCode::CREATED, Json(faults_view(&peer.faults))).into_response()
        }
        Err(detail) => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(json!({ "error": "invalid_fault", "detail": detail })),
        )
            .into_response(),
    }
}

async fn clear_faults(State(peer): State<Peer>) -> Response {
    let (cleared, released) = peer.faults.clear();
    Json(json!({ "cleared": cleared, "released": released })).into_response()
}

async fn release(State(peer): State<Peer>) -> Response {
    Json(json!({ "released": peer.faults.release() })).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_object_in_another_order_or_spacing_has_the_same_digest() {
        let a = body_digest(br#"{"b": [1, {"y": 2, "x": "\u00e9"}], "a": null}"#).unwrap();
        let b = body_digest("{\"a\":null,\"b\":[1,{\"x\":\"é\",\"y\":2}]}".as_bytes()).unwrap();
        assert_eq!(a, b);
        let c = body_digest(br#"{"a": null, "b": [{"x": "e", "y": 2}, 1]}"#).unwrap();
        assert_ne!(a, c);
        assert_eq!(body_digest(b"[1]"), Err("body_not_an_object"));
        assert_eq!(body_digest(b"{"), Err("body_not_json"));
    }

    #[test]
    fn an_op_key_is_1_to_255_visible_ascii_characters() {
        assert!(is_op_key(b"inv-2026/000042:v1"));
        assert!(is_op_key(&[b'k'; 255]));
        assert!(!is_op_key(&[b'k'; 256]));
        assert!(!is_op_key(b""));
        assert!(!is_op_key(b"two words"));
        assert!(!is_op_key("cl\u{e9}".as_bytes()));
    }
}
