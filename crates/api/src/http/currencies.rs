//! `/v1/currencies`: the currencies Tauros accepts, their exponents and the networks that carry
//! each, so a client (or an LLM agent) need not learn them from error messages.

use super::extract::Auth;
use super::problem::{ApiError, Problem};
use crate::http::state::AppState;
use axum::Json;
use serde::Serialize;
use tauros_domain::address::Network;
use tauros_domain::currency::Currency;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(list_currencies))
}

/// A currency invoices and destinations may use.
#[derive(Serialize, ToSchema)]
pub struct CurrencyResponse {
    /// The code to send in `currency` (ISO 4217 for fiat).
    #[schema(example = "EUR")]
    pub code: &'static str,
    /// Decimals of its minor unit: an amount has at most this many, and `*_minor` integers
    /// count units of 10^-exponent.
    #[schema(example = 2)]
    pub exponent: u8,
    /// `fiat`, `stablecoin` or `crypto`.
    pub kind: &'static str,
    /// The payment destination networks that carry it.
    #[schema(example = json!(["iban"]))]
    pub networks: Vec<&'static str>,
}

/// Every currency.
#[derive(Serialize, ToSchema)]
pub struct CurrencyList {
    pub items: Vec<CurrencyResponse>,
}

/// The currencies Tauros accepts, with their exponents and networks (any caller).
#[utoipa::path(get, path = "/v1/currencies", tag = "currencies", security(("bearer" = [])),
    responses(
        (status = 200, description = "Every currency", body = CurrencyList),
        (status = 401, description = "`unauthorized`", body = Problem, content_type = "application/problem+json"),
    ))]
async fn list_currencies(Auth(_caller): Auth) -> Result<Json<CurrencyList>, ApiError> {
    let items = Currency::ALL
        .into_iter()
        .map(|c| CurrencyResponse {
            code: c.code(),
            exponent: c.exponent(),
            kind: c.kind(),
            networks: Network::for_currency(c)
                .into_iter()
                .map(Network::name)
                .collect(),
        })
        .collect();
    Ok(Json(CurrencyList { items }))
}
