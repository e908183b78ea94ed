//! The `/v1/invoices` handlers.

use super::types::{
    CancelRequest, CommandResponse, CreateInvoiceRequest, DecideRequest, DecisionList,
    EmptyRequest, EventList, InvoiceList, ReviseRequest, RevisionList, VerifyResponse,
};
use super::use_cases::{self, Issued};
use crate::http::extract::{
    Auth, IdPath, IdempotencyKeyHeader, ListParams, OptionalJson, Presented, QueryParams,
    StrictJson,
};
use crate::http::headers::REPLAYED;
use crate::http::jobs::JobResponse;
use crate::http::problem::{ApiError, Problem};
use crate::http::schema::{DecisionKindSchema, InvoiceStateSchema, IssuingStatusSchema};
use crate::http::state::AppState;
use axum::Json;
use axum::extract::{FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{HeaderName, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use tauros_app::{Actor, InvoiceQuery, InvoiceView, PreviewView};
use tauros_domain::invoice::DecisionKind;
use uuid::Uuid;

type CommandAnswer = (
    StatusCode,
    [(HeaderName, HeaderValue); 1],
    Json<CommandResponse>,
);

/// A command's answer over REST: `created` for a fresh create, 200 for a replay (and every
/// other command), with the `Idempotent-Replayed` header.
fn answer(result: CommandResponse, created: StatusCode) -> CommandAnswer {
    let status = if result.replayed {
        StatusCode::OK
    } else {
        created
    };
    let header = HeaderValue::from_static(if result.replayed { "true" } else { "false" });
    (status, [(REPLAYED, header)], Json(result))
}

/// How a REST client sends the missing key.
const SEND_A_KEY: &str =
    "send an Idempotency-Key header (or idempotency_key in the body) so retries are safe";

/// Propose an invoice (agents). The same key and payload again answers 200 with the invoice as
/// it is now and `replayed: true`; the same key with another payload is 409.
#[utoipa::path(post, path = "/v1/invoices", tag = "invoices", security(("bearer" = [])),
    params(("Idempotency-Key" = String, Header, min_length = 1, max_length = 200, pattern = r"^[!-~](?:[ -~]{0,198}[!-~])?$",
        description = "Makes retries safe: the same key and body again answers the same invoice (200, `replayed: true`); the same key with another body is 409 `idempotency_conflict`. 1–200 visible ASCII characters, no leading or trailing space (a UUID makes a good key). The key may instead travel as `idempotency_key` in the body (both sent: they must be equal); one of the two is required.")),
    request_body = CreateInvoiceRequest,
    responses(
        (status = 201, description = "Created", body = CommandResponse),
        (status = 200, description = "Replay: the invoice as it is now", body = CommandResponse),
        (status = 403, description = "`forbidden`: humans may not propose invoices", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`idempotency_conflict`: the key was used with another payload", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn create_invoice(
    State(state): State<AppState>,
    Presented(credential, (IdempotencyKeyHeader(header_key), StrictJson(body))): Presented<(
        IdempotencyKeyHeader,
        StrictJson<CreateInvoiceRequest>,
    )>,
) -> Result<CommandAnswer, ApiError> {
    // The credential is checked where the key is looked up: one round trip for a replay.
    let result = use_cases::create(
        &state.app,
        credential.caller(),
        header_key,
        body,
        SEND_A_KEY,
    )
    .await?;
    Ok(answer(result, StatusCode::CREATED))
}

/// Check a proposal before making it (agents): the body of a create, no `Idempotency-Key`
/// needed (one that is sent is checked as a create checks it, then ignored). A body a create
/// would refuse is refused with the same problem, every mistake listed; a valid one answers
/// what a create would seal now (lines, totals, canonical payload, `payload_hash`) and the
/// warnings an approver would notice. Writes nothing, audits nothing; counts against the rate
/// limit like any request.
#[utoipa::path(post, path = "/v1/invoices/preview", tag = "invoices", security(("bearer" = [])),
    request_body = CreateInvoiceRequest,
    responses(
        (status = 200, description = "What a create of this body would seal, and warnings", body = PreviewView),
        (status = 400, description = "`invalid_json` and the other shape problems a create answers, every mistake listed in `errors`; `idempotency_key_mismatch`", body = Problem, content_type = "application/problem+json"),
        (status = 403, description = "`forbidden`: humans may not propose invoices", body = Problem, content_type = "application/problem+json"),
        (status = 422, description = "`validation_failed`: every rule the body breaks, in `errors`, exactly as a create answers", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn preview_invoice(
    State(state): State<AppState>,
    Presented(credential, (IdempotencyKeyHeader(header_key), StrictJson(body))): Presented<(
        IdempotencyKeyHeader,
        StrictJson<CreateInvoiceRequest>,
    )>,
) -> Result<Json<PreviewView>, ApiError> {
    let preview = use_cases::preview(&state.app, credential.caller(), header_key, body).await?;
    Ok(Json(preview))
}

/// The invoices you may see. `?state=pending_approval` is the approver's inbox, oldest first.
#[utoipa::path(get, path = "/v1/invoices", tag = "invoices", security(("bearer" = [])),
    params(
        ("state" = Option<InvoiceStateSchema>, Query, description = "Only invoices in this state; `pending_approval` is the approver's inbox, listed oldest first"),
        ("customer_id" = Option<Uuid>, Query, description = "Only this customer's"),
        ("agent_id" = Option<Uuid>, Query, description = "Only this agent's"),
        ("decision" = Option<DecisionKindSchema>, Query, description = "Only invoices whose latest decision is this one and is about the current revision: `changes_requested` lists the drafts waiting for their agent (off the list once revised); `approved` and `rejected` are always about the current revision"),
        ("idempotency_key" = Option<String>, Query, description = "Only the invoice you created with this key (the one a `409 idempotency_conflict` names)"),
        ("overdue" = Option<bool>, Query, description = "`true`: only overdue invoices (issued or partially paid, due before today in UTC, a balance open); `false`: only the others. Computed when asked, never stored"),
        ("issuing" = Option<IssuingStatusSchema>, Query, description = "Only approved invoices whose issuing stands here: `pending`, `blocked`, `rejected`, `conflict`, `needs_review` (the last three wait for an approver: issue again or cancel)"),
        crate::http::schema::Page,
    ),
    responses((status = 200, description = "A page of invoices", body = InvoiceList)))]
pub(super) async fn list_invoices(
    State(state): State<AppState>,
    Presented(credential, (params, InvoiceFilter(filter))): Presented<(ListParams, InvoiceFilter)>,
) -> Result<Json<InvoiceList>, ApiError> {
    let page = use_cases::list(&state.app, credential.caller(), filter, params).await?;
    Ok(Json(page))
}

/// One invoice.
#[utoipa::path(get, path = "/v1/invoices/{id}", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The invoice", body = InvoiceView),
    ))]
pub(super) async fn get_invoice(
    State(state): State<AppState>,
    Presented(credential, IdPath(id)): Presented<IdPath>,
) -> Result<Json<InvoiceView>, ApiError> {
    Ok(Json(
        use_cases::get(&state.app, credential.caller(), id).await?,
    ))
}

/// A page of the revisions, oldest first (an invoice has at most 100).
#[utoipa::path(get, path = "/v1/invoices/{id}/revisions", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id"), crate::http::schema::Page),
    responses(
        (status = 200, description = "A page of revisions", body = RevisionList),
        (status = 422, description = "`validation_failed`: `limit` outside 1–100 or a `cursor` that is not a `next_cursor`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list_revisions(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    params: ListParams,
) -> Result<Json<RevisionList>, ApiError> {
    Ok(Json(
        use_cases::revisions(&state.app, &actor, id, params).await?,
    ))
}

/// Every decision, oldest first (the proposing agent reads them too).
#[utoipa::path(get, path = "/v1/invoices/{id}/decisions", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The decisions", body = DecisionList),
    ))]
pub(super) async fn list_decisions(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<DecisionList>, ApiError> {
    Ok(Json(use_cases::decisions(&state.app, &actor, id).await?))
}

/// A page of the audit trail, in order; each event hash-chained to the one before.
#[utoipa::path(get, path = "/v1/invoices/{id}/events", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id"), crate::http::schema::Page),
    responses(
        (status = 200, description = "A page of events", body = EventList),
        (status = 422, description = "`validation_failed`: `limit` outside 1–100 or a `cursor` that is not a `next_cursor`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn list_events(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    params: ListParams,
) -> Result<Json<EventList>, ApiError> {
    Ok(Json(
        use_cases::events(&state.app, &actor, id, params).await?,
    ))
}

/// Re-seal every revision and re-walk the event chain (humans).
#[utoipa::path(get, path = "/v1/invoices/{id}/verify", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    responses(
        (status = 200, description = "The report", body = VerifyResponse),
        (status = 403, description = "`forbidden`: agents may not verify", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn verify_invoice(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
) -> Result<Json<VerifyResponse>, ApiError> {
    Ok(Json(state.app.verify_invoice(&actor, id).await?.into()))
}

/// Revise (the proposing agent): a new revision, the invoice back to `draft`; an identical
/// payload writes nothing and answers `replayed: true`.
#[utoipa::path(post, path = "/v1/invoices/{id}/revise", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = ReviseRequest,
    responses(
        (status = 200, description = "Revised, or unchanged (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden`: only the proposing agent revises", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`; `revision_limit`: the invoice has its 100 revisions (submit it as it is, or cancel it and create a new invoice); nothing written", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn revise(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<ReviseRequest>,
) -> Result<CommandAnswer, ApiError> {
    Ok(answer(
        use_cases::revise(&state.app, &actor, id, body).await?,
        StatusCode::OK,
    ))
}

/// Submit for approval (the proposing agent).
#[utoipa::path(post, path = "/v1/invoices/{id}/submit", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body(content = Option<EmptyRequest>, description = "`{}` or no body"),
    responses(
        (status = 200, description = "Submitted, or already pending (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`, `revision_already_decided` or `destination_inactive`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn submit(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    OptionalJson(_empty): OptionalJson<EmptyRequest>,
) -> Result<CommandAnswer, ApiError> {
    Ok(answer(
        use_cases::submit(&state.app, &actor, id).await?,
        StatusCode::OK,
    ))
}

/// Withdraw (the proposing agent, or a human who sees it): draft or pending → cancelled.
#[utoipa::path(post, path = "/v1/invoices/{id}/withdraw", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body(content = Option<EmptyRequest>, description = "`{}` or no body"),
    responses(
        (status = 200, description = "Withdrawn, or already withdrawn (`replayed`)", body = CommandResponse),
        (status = 409, description = "`invalid_transition`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn withdraw(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    OptionalJson(_empty): OptionalJson<EmptyRequest>,
) -> Result<CommandAnswer, ApiError> {
    Ok(answer(
        use_cases::withdraw(&state.app, &actor, id).await?,
        StatusCode::OK,
    ))
}

async fn decide(
    state: AppState,
    actor: Actor,
    id: Uuid,
    kind: DecisionKind,
    body: DecideRequest,
) -> Result<CommandAnswer, ApiError> {
    let decided = use_cases::decide(&state.app, &actor, id, kind, body).await?;
    Ok(answer(decided, StatusCode::OK))
}

/// Approve one exact revision (approvers who see it).
#[utoipa::path(post, path = "/v1/invoices/{id}/approve", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Approved, or the same approval again (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` (agents, operators) or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_decided`, `invalid_transition`, `stale_revision`, `payload_mismatch`, `payload_integrity` or `destination_inactive`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn approve(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<DecideRequest>,
) -> Result<CommandAnswer, ApiError> {
    decide(state, actor, id, DecisionKind::Approved, body).await
}

/// Reject one exact revision (approvers); a reason is required.
#[utoipa::path(post, path = "/v1/invoices/{id}/reject", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Rejected, or the same rejection again (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_decided`, `invalid_transition`, `stale_revision`, `payload_mismatch` or `payload_integrity`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn reject(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<DecideRequest>,
) -> Result<CommandAnswer, ApiError> {
    decide(state, actor, id, DecisionKind::Rejected, body).await
}

/// Send one exact revision back to the agent (approvers); a reason is required.
#[utoipa::path(post, path = "/v1/invoices/{id}/request-changes", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = DecideRequest,
    responses(
        (status = 200, description = "Back to draft, or the same request again (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`already_decided`, `invalid_transition`, `stale_revision`, `payload_mismatch` or `payload_integrity`", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn request_changes(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<DecideRequest>,
) -> Result<CommandAnswer, ApiError> {
    decide(state, actor, id, DecisionKind::ChangesRequested, body).await
}

/// Cancel an approved invoice (approvers); a reason is required.
#[utoipa::path(post, path = "/v1/invoices/{id}/cancel", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body = CancelRequest,
    responses(
        (status = 200, description = "Cancelled, or already cancelled by cancel (`replayed`)", body = CommandResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition`, or `issue_in_progress` (issuing has started: the invoice has its number and its issuing has not stopped for a human; wait for the issue job, `issuing.job_id`)", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn cancel(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    StrictJson(body): StrictJson<CancelRequest>,
) -> Result<CommandAnswer, ApiError> {
    let cancelled = use_cases::cancel(&state.app, &actor, id, body).await?;
    Ok(answer(cancelled, StatusCode::OK))
}

/// Issue an approved invoice (approvers). Without an issuer, within the request: it is
/// numbered (`INV-2026-000042`, gapless per organisation and year) and moves to `issued`, one
/// event (200). With an issuer configured (`TAUROS_ISSUER`), the invoice is numbered and its
/// claim admitted within the request, and the issue job is enqueued or re-driven: 202 with the
/// job (a replay while it is pending writes nothing). On an invoice whose issuing stopped for a
/// human (`issuing.status` rejected, conflict or needs_review) this issues it again: the same
/// number under a new operation version. Repeating it on an issued invoice is a replay (200).
#[utoipa::path(post, path = "/v1/invoices/{id}/issue", tag = "invoices", security(("bearer" = [])),
    params(("id" = Uuid, Path, description = "Invoice id")),
    request_body(content = Option<EmptyRequest>, description = "`{}` or no body"),
    responses(
        (status = 200, description = "Issued, or already issued (`replayed`)", body = CommandResponse),
        (status = 202, description = "With an issuer: the issue job, enqueued or re-driven (`Idempotent-Replayed: true` when it was already pending)", body = JobResponse),
        (status = 403, description = "`forbidden` or `four_eyes_required`", body = Problem, content_type = "application/problem+json"),
        (status = 409, description = "`invalid_transition` (not approved, e.g. cancelled), or `destination_inactive` (an `issue_blocked` event was recorded once)", body = Problem, content_type = "application/problem+json"),
    ))]
pub(super) async fn issue(
    State(state): State<AppState>,
    Auth(actor): Auth,
    IdPath(id): IdPath,
    OptionalJson(_empty): OptionalJson<EmptyRequest>,
) -> Result<Response, ApiError> {
    match use_cases::issue(&state.app, &actor, id).await? {
        Issued::Invoice(issued) => Ok(answer(issued, StatusCode::OK).into_response()),
        Issued::Job { job, replayed } => {
            let header = HeaderValue::from_static(if replayed { "true" } else { "false" });
            Ok((StatusCode::ACCEPTED, [(REPLAYED, header)], Json(job)).into_response())
        }
    }
}

/// The invoice list's filters beyond paging; a malformed id is a 422 naming it.
pub(super) struct InvoiceFilter(InvoiceQuery);

impl<S: Send + Sync> FromRequestParts<S> for InvoiceFilter {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        let query = QueryParams::from_request_parts(parts, state).await?;
        Ok(InvoiceFilter(InvoiceQuery {
            state: query.get("state").map(str::to_owned),
            customer_id: query.uuid("customer_id")?,
            agent_id: query.uuid("agent_id")?,
            decision: query.get("decision").map(str::to_owned),
            idempotency_key: query.get("idempotency_key").map(str::to_owned),
            overdue: query.get("overdue").map(str::to_owned),
            issuing: query.get("issuing").map(str::to_owned),
        }))
    }
}
