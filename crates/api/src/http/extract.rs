//! Extractors whose every rejection is a problem+json with a documented code: strict JSON
//! bodies, bearer authentication, UUID path parameters and list parameters.

use super::headers::{IDEMPOTENCY_KEY, IDEMPOTENCY_KEY_HEADER};
use super::json::parse_json;
use super::problem::{ApiError, too_large, unsupported_media_type};
use super::rules::BodyRules;
use crate::http::state::AppState;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::{header, request::Parts};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use tauros_app::{Actor, AppError, FieldError};
use tauros_domain::fingerprint::KEY_FIELD;
use tauros_domain::identity::Interface;
use uuid::Uuid;

/// A JSON body read strictly by [`parse_json`], every mistake named in one answer.
pub struct StrictJson<T>(pub T);

impl<T: DeserializeOwned + BodyRules, S: Send + Sync> FromRequest<S> for StrictJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        if !is_json(req.headers().get(header::CONTENT_TYPE)) {
            return Err(unsupported_media_type());
        }
        let bytes = read_body(req, state).await?;
        parse_json(&bytes).map(StrictJson)
    }
}

/// A body that may be absent: none or a blank one is `T::default()`, else as [`StrictJson`].
pub struct OptionalJson<T>(pub T);

impl<T: DeserializeOwned + Default + BodyRules, S: Send + Sync> FromRequest<S> for OptionalJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let declared_json = is_json(req.headers().get(header::CONTENT_TYPE));
        let bytes = read_body(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(OptionalJson(T::default()));
        }
        if !declared_json {
            return Err(unsupported_media_type());
        }
        parse_json(&bytes).map(OptionalJson)
    }
}

/// The whole body, within the 1 MiB limit (413 beyond it).
pub(crate) async fn read_body<S: Send + Sync>(req: Request, state: &S) -> Result<Bytes, ApiError> {
    Bytes::from_request(req, state).await.map_err(|rejection| {
        if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
            too_large()
        } else {
            ApiError::bad_request("invalid_json", "the request body could not be read")
        }
    })
}

fn is_json(content_type: Option<&axum::http::HeaderValue>) -> bool {
    let Some(value) = content_type.and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let mime = value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mime == "application/json" || (mime.starts_with("application/") && mime.ends_with("+json"))
}

/// The client's address, if the server provides connection info; for the sign-in limit only.
pub struct ClientAddr(pub Option<std::net::IpAddr>);

impl<S: Send + Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        Ok(ClientAddr(
            parts
                .extensions
                .get::<axum::extract::ConnectInfo<std::net::SocketAddr>>()
                .map(|info| info.0.ip()),
        ))
    }
}

/// The authenticated caller over REST: an agent (API key) or a human (session token).
pub struct Auth(pub Actor);

impl FromRequestParts<AppState> for Auth {
    type Rejection = ApiError;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &AppState,
    ) -> Result<Self, Self::Rejection> {
        let token = bearer(&parts.headers).ok_or(AppError::Unauthorized)?;
        Ok(Auth(state.app.authenticate(token, Interface::Api).await?))
    }
}

/// A bearer credential for a use case that checks it in its own first read (one round trip
/// for both), with the route's other extractors `T`. Answers come in [`Auth`]'s order: no
/// credential is 401 at once; when `T` refuses, the credential's own refusal comes first.
pub struct Presented<T>(pub Credential, pub T);

/// A bearer credential, not yet checked.
pub struct Credential(String);

impl Credential {
    /// The credential as the caller of a use case, which checks it.
    pub fn caller(&self) -> tauros_app::Caller<'_> {
        tauros_app::Caller::Presented {
            bearer: &self.0,
            via: Interface::Api,
        }
    }
}

impl<T, M> FromRequest<AppState, M> for Presented<T>
where
    T: FromRequest<AppState, M>,
    T::Rejection: IntoResponse,
{
    type Rejection = Response;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        let Some(token) = bearer(req.headers()).map(str::to_owned) else {
            return Err(ApiError::from(AppError::Unauthorized).into_response());
        };
        let refused = match T::from_request(req, state).await {
            Ok(rest) => return Ok(Presented(Credential(token), rest)),
            Err(refused) => refused.into_response(),
        };
        match state.app.authenticate(&token, Interface::Api).await {
            Err(e) => Err(ApiError::from(e).into_response()),
            Ok(_) => Err(refused),
        }
    }
}

/// The credential of `Authorization: Bearer <credential>` (the scheme in any case).
pub fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
}

/// A resource id from the path; anything but a UUID is a 400 naming `id`.
pub struct IdPath(pub Uuid);

impl<S: Send + Sync> FromRequestParts<S> for IdPath {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let axum::extract::Path(raw) =
            axum::extract::Path::<String>::from_request_parts(parts, state)
                .await
                .map_err(|_| {
                    ApiError::bad_request("invalid_type", "`id` is missing from the path")
                })?;
        Uuid::parse_str(&raw).map(IdPath).map_err(|_| {
            ApiError::bad_request(
                "invalid_type",
                "`id` in the path must be a UUID (e.g. 0192f6c4-…)",
            )
            .with_field("id")
        })
    }
}

/// The largest page a list answers (`?limit=`).
pub const MAX_PAGE: i64 = 100;

/// `?limit=` (1–100, default 50) and `?cursor=` (opaque).
#[derive(Clone, Copy, Debug)]
pub struct ListParams {
    /// Page size.
    pub limit: i64,
    /// Start after this id (exclusive), decoded from the cursor.
    pub before: Option<Uuid>,
}

impl<S: Send + Sync> FromRequestParts<S> for ListParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        let pairs = form_pairs(parts.uri.query().unwrap_or(""));
        ListParams::checked(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    }
}

impl ListParams {
    /// A page as asked for by `limit` and `cursor`, every offending value reported at once.
    pub fn checked<'a>(
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<ListParams, ApiError> {
        let mut params = ListParams {
            limit: 50,
            before: None,
        };
        let mut errors = Vec::new();
        for (key, value) in pairs {
            match key {
                "limit" => match value.parse::<i64>() {
                    Ok(n) if (1..=MAX_PAGE).contains(&n) => params.limit = n,
                    _ => errors.push(FieldError::plain(
                        "limit",
                        "out_of_range",
                        "`limit` must be a whole number from 1 to 100",
                    )),
                },
                "cursor" => match decode_cursor(value) {
                    Some(id) => params.before = Some(id),
                    None => errors.push(FieldError::plain(
                        "cursor",
                        "invalid_cursor",
                        "`cursor` must be a `next_cursor` value from a previous page",
                    )),
                },
                _ => {}
            }
        }
        if errors.is_empty() {
            Ok(params)
        } else {
            Err(ApiError::validation(errors))
        }
    }

    /// The page the MCP list tools' typed arguments ask for, by the same rules as REST's.
    pub fn of(limit: Option<i64>, cursor: Option<&str>) -> Result<ListParams, ApiError> {
        let limit = limit.map(|n| n.to_string());
        let pairs = limit
            .as_deref()
            .map(|l| ("limit", l))
            .into_iter()
            .chain(cursor.map(|c| ("cursor", c)));
        ListParams::checked(pairs)
    }

    /// The store page: one row more than asked, to learn whether a next page exists.
    pub fn page(&self) -> tauros_app::PageRequest {
        tauros_app::PageRequest {
            after: self.before,
            limit: self.limit + 1,
        }
    }

    /// Cuts the extra row off and turns the last id into the next cursor.
    pub fn split<T>(&self, mut rows: Vec<T>, id: impl Fn(&T) -> Uuid) -> (Vec<T>, Option<String>) {
        let limit = usize::try_from(self.limit).unwrap_or(usize::MAX);
        if rows.len() > limit {
            rows.truncate(limit);
            let next = rows.last().map(|r| encode_cursor(id(r)));
            (rows, next)
        } else {
            (rows, None)
        }
    }
}

fn form_pairs(query: &str) -> Vec<(String, String)> {
    serde_urlencoded::from_str::<Vec<(String, String)>>(query).unwrap_or_default()
}

/// Encodes the keyset position after `id` as an opaque cursor.
pub fn encode_cursor(id: Uuid) -> String {
    id.simple().to_string()
}

fn decode_cursor(cursor: &str) -> Option<Uuid> {
    if cursor.len() != 32 {
        return None;
    }
    Uuid::try_parse(cursor).ok()
}

/// The optional `Idempotency-Key` header.
pub struct IdempotencyKeyHeader(pub Option<String>);

impl IdempotencyKeyHeader {
    /// A use case's error about a key this header carried, naming the key as the header.
    pub fn named(err: AppError) -> ApiError {
        ApiError::from(err).rename_field(KEY_FIELD, IDEMPOTENCY_KEY_HEADER)
    }
}

impl<S: Send + Sync> FromRequestParts<S> for IdempotencyKeyHeader {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        match parts.headers.get(IDEMPOTENCY_KEY) {
            None => Ok(IdempotencyKeyHeader(None)),
            Some(value) => value
                .to_str()
                .map(|v| IdempotencyKeyHeader(Some(v.to_owned())))
                .map_err(|_| {
                    ApiError::bad_request(
                        "invalid_type",
                        "the Idempotency-Key header must be visible ASCII text",
                    )
                    .with_field(IDEMPOTENCY_KEY_HEADER)
                }),
        }
    }
}

/// Query parameters beyond paging, read by name.
pub struct QueryParams(pub Vec<(String, String)>);

impl QueryParams {
    /// The value of `name`, if given.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `name` as a UUID; a 422 naming it when malformed.
    pub fn uuid(&self, name: &str) -> Result<Option<Uuid>, ApiError> {
        self.get(name)
            .map(|v| {
                Uuid::parse_str(v).map_err(|_| {
                    ApiError::validation(vec![FieldError::plain(
                        name,
                        "invalid_uuid",
                        format!("`{name}` must be a UUID"),
                    )])
                })
            })
            .transpose()
    }
}

impl<S: Send + Sync> FromRequestParts<S> for QueryParams {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        Ok(QueryParams(form_pairs(parts.uri.query().unwrap_or(""))))
    }
}
