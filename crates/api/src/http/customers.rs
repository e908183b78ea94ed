//! `/v1/customers`: human-managed, agent-readable.

use super::extract::{Auth, IdPath, ListParams, StrictJson};
use super::problem::{ApiError, Problem};
use crate::http::rules;
use crate::http::state::AppState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use tauros_app::{Actor, App, CustomerChange, CustomerView, NewCustomer};
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};
use uuid::Uuid;

pub(super) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(create_customer, list_customers))
        .routes(routes!(get_customer, update_customer, delete_customer))
}

/// A new customer of one of the caller's agents.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct CreateCustomerRequest {
    /// An agent the calling human owns.
    #[schema(value_type = Uuid, required = true)]
    #[validate(required)]
    pub agent_id: Option<Uuid>,
    /// 1–160 characters.
    #[schema(value_type = String, required = true, example = "Acme Inc", min_length = 1, max_length = 160)]
    #[validate(required, custom(function = rules::name_or_label))]
    pub name: Option<String>,
    /// 1–254 characters, one `@`, no spaces inside (surrounding ones are trimmed).
    #[schema(
        value_type = String,
        required = true,
        example = "billing@acme.example",
        min_length = 3,
        max_length = 254,
        pattern = r"^[\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^@\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+@[^@\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+[\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
    )]
    #[validate(required, custom(function = rules::email_address))]
    pub email: Option<String>,
}

/// Fields to change; `agent_id` is immutable.
#[derive(Deserialize, ToSchema, validator::Validate)]
#[serde(deny_unknown_fields)]
pub struct UpdateCustomerRequest {
    /// Replaces the name; 1–160 characters.
    #[schema(min_length = 1, max_length = 160)]
    #[validate(custom(function = rules::name_or_label))]
    pub name: Option<String>,
    /// Replaces the email; 1–254 characters, one `@`, no spaces inside.
    #[schema(
        min_length = 3,
        max_length = 254,
        pattern = r"^[\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*[^@\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+@[^@\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]+[\x09-\x0d\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*$"
    )]
    #[validate(custom(function = rules::email_address))]
    pub email: Option<String>,
}

/// A page of customers, newest first.
#[derive(Serialize, ToSchema)]
pub struct CustomerList {
    /// The customers.
    pub items: Vec<CustomerView>,
    /// `?cursor=` for the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// Create a customer (the human who owns `agent_id`).
#[utoipa::path(post, path = "/v1/customers", tag = "customers", security(("bearer" = [])),
    request_body = CreateCustomerRequest,
    responses(
        (status = 201, description = "Created", body = CustomerView),
        (status = 403, description = "`forbidden`: agents may not create customers", body = Problem, content_type = "application/problem+json"),
    ))]
async fn create_customer(
    State(state): State<AppState>,
    Auth(actor): Auth,
    StrictJson(body): StrictJson<CreateCustomerRequest>,
) -> Result<(StatusCode, Json<CustomerView>), ApiError> {
    // All present: `CreateCustomerRequest`'s rules required them.
    let (Some(agent_id), Some(name), Some(email)) = (body.agent_id, body.name, body.email) else {
        return Err(crate::http::problem::internal());
    };
    let customer = state
        .app
        .create_customer(
            &actor,
            NewCustomer {
                agent_id,
                name,
                email,
            },
        )
        .await?;
    Ok((StatusCode::CREATED, Json(customer)))
}

/// The customers the caller may see: an agent its own, a human those of their agents.
#[utoipa::path(get, path = "/v1/customers", tag = "customers", security(("bearer" = [])),
    params(super::schema::Page),
    responses((status = 200, description = "A page of customers", body = CustomerList)))]
async fn list_customers(
    State(state): State<AppState>,
    Auth(actor): Auth,
    params: ListParams,
) -> Result<Json<CustomerList>, ApiError> {
    Ok(Json(list(&state.app, &actor, params).await?))
}

/// A page of the customers the caller may see (REST and the list_customers tool).
pub(crate) async fn list(
    app: &App,
    actor: &Actor,
    params: ListParams,
) -> Result<CustomerList, ApiError> {
    let rows = app.list_customers(actor, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |c| c.id);
    Ok(CustomerList { items, next_cursor })
}

/// One customer.
#[utoipa::path(get, path = "/v1/customers/{id}", tag = "customers", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Customer id")),
    responses(
        (status = 200, description = "The customer", body = CustomerView),
    ))]
async fn get_customer(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<CustomerView>, ApiError> {
    Ok(Json(state.app.get_customer(&actor, id).await?))
}

/// Change a customer's name or email (the owning human).
#[utoipa::path(patch, path = "/v1/customers/{id}", tag = "customers", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Customer id")),
    request_body = UpdateCustomerRequest,
    responses(
        (status = 200, description = "Updated", body = CustomerView),
        (status = 403, description = "`forbidden`: agents may not change customers", body = Problem, content_type = "application/problem+json"),
    ))]
async fn update_customer(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<UpdateCustomerRequest>,
) -> Result<Json<CustomerView>, ApiError> {
    let change = CustomerChange {
        name: body.name,
        email: body.email,
    };
    Ok(Json(state.app.update_customer(&actor, id, change).await?))
}

/// Delete a customer that no invoice revision references (the owning human).
#[utoipa::path(delete, path = "/v1/customers/{id}", tag = "customers", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Customer id")),
    responses(
        (status = 204, description = "Deleted"),
        (status = 403, description = "`forbidden`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`has_dependents`: a revision references it", body = Problem, content_type = "application/problem+json"),
    ))]
async fn delete_customer(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<StatusCode, ApiError> {
    state.app.delete_customer(&actor, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

crate::body_rules!(UpdateCustomerRequest, CreateCustomerRequest);
