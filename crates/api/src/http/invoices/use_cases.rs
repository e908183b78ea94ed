//! The invoice use cases as both surfaces call them: typed input in, the wire answer out. REST
//! adds status and headers, MCP serializes the answer; replays are counted here, once.

use super::types::{
    CancelRequest, CommandResponse, CreateInvoiceRequest, DecideRequest, DecisionList, EventList,
    InvoiceList, ReviseRequest, RevisionList,
};
use crate::http::extract::ListParams;
use crate::http::jobs::JobResponse;
use crate::http::problem::ApiError;
use tauros_app::{
    Actor, App, AppResult, Caller, FieldError, InvoiceQuery, InvoiceView, IssueAnswer, PreviewView,
    Replayed,
};
use tauros_domain::invoice::DecisionKind;
use uuid::Uuid;

/// What every invoice command answers, over REST and MCP alike; replays are counted.
pub(crate) fn command(
    result: AppResult<Replayed<InvoiceView>>,
) -> Result<CommandResponse, ApiError> {
    let Replayed {
        value: view,
        replayed,
    } = result?;
    if replayed {
        metrics::counter!("tauros_replays_total", "resource" => "invoice").increment(1);
    }
    Ok(CommandResponse {
        invoice: view,
        replayed,
    })
}

/// A create as both surfaces take it: the key from a header (REST) or `None`, and the body.
/// Without any key, nothing is written: the key is reported missing (`missing_key` says how to
/// send it on this surface) with every other missing field (a complete body without a key must
/// not create an invoice behind a 422), and a human gets the 403 a keyed request would get.
/// The credential is checked before the keys.
pub(crate) async fn create(
    app: &App,
    caller: Caller<'_>,
    header_key: Option<String>,
    mut body: CreateInvoiceRequest,
    missing_key: &'static str,
) -> Result<CommandResponse, ApiError> {
    let Some(key) = sent_key(app, caller, header_key, &mut body).await? else {
        let actor = app.actor_of(caller).await?;
        let mut errors = vec![FieldError::plain(
            "idempotency_key",
            "required",
            missing_key,
        )];
        errors.extend(app.draft_field_errors(&actor, &(&body).into())?);
        return Err(ApiError::validation(errors));
    };
    command(app.create_draft(caller, &key, (&body).into()).await)
}

/// The idempotency key a create's request carries, from the header or the body: when both are
/// sent and differ, the caller is authenticated and the request refused (400).
async fn sent_key(
    app: &App,
    caller: Caller<'_>,
    header_key: Option<String>,
    body: &mut CreateInvoiceRequest,
) -> Result<Option<String>, ApiError> {
    match (header_key, body.idempotency_key.take()) {
        (Some(h), Some(b)) if h != b => {
            app.actor_of(caller).await?;
            Err(ApiError::bad_request(
                "idempotency_key_mismatch",
                "the Idempotency-Key header and the body's idempotency_key differ; send one, or the same value in both",
            )
            .with_field("idempotency_key"))
        }
        (h, b) => Ok(h.or(b)),
    }
}

/// A create's dry run, as both surfaces take it: a key sent is checked as a create checks it,
/// then ignored (nothing is written, so nothing needs making safe to retry). The rest is a
/// create's path up to the seal (`App::preview_draft`).
pub(crate) async fn preview(
    app: &App,
    caller: Caller<'_>,
    header_key: Option<String>,
    mut body: CreateInvoiceRequest,
) -> Result<PreviewView, ApiError> {
    let key = sent_key(app, caller, header_key, &mut body).await?;
    Ok(app
        .preview_draft(caller, key.as_deref(), (&body).into())
        .await?)
}

/// A page of the invoices the caller may see.
pub(crate) async fn list(
    app: &App,
    caller: Caller<'_>,
    query: InvoiceQuery,
    params: ListParams,
) -> Result<InvoiceList, ApiError> {
    let rows = app.list_invoices(caller, query, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |i| i.id);
    Ok(InvoiceList { items, next_cursor })
}

/// One invoice the caller may see.
pub(crate) async fn get(app: &App, caller: Caller<'_>, id: Uuid) -> Result<InvoiceView, ApiError> {
    Ok(app.get_invoice(caller, id).await?)
}

/// A page of an invoice's revisions, oldest first.
pub(crate) async fn revisions(
    app: &App,
    actor: &Actor,
    id: Uuid,
    params: ListParams,
) -> Result<RevisionList, ApiError> {
    let rows = app.list_revisions(actor, id, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |r| r.id);
    Ok(RevisionList { items, next_cursor })
}

/// Every decision on an invoice, oldest first.
pub(crate) async fn decisions(
    app: &App,
    actor: &Actor,
    id: Uuid,
) -> Result<DecisionList, ApiError> {
    Ok(DecisionList {
        items: app.list_decisions(actor, id).await?,
    })
}

/// A page of an invoice's audit trail, in order.
pub(crate) async fn events(
    app: &App,
    actor: &Actor,
    id: Uuid,
    params: ListParams,
) -> Result<EventList, ApiError> {
    let rows = app.list_events(actor, id, params.page()).await?;
    let (items, next_cursor) = params.split(rows, |e| e.id);
    Ok(EventList { items, next_cursor })
}

/// A new revision by the proposing agent.
pub(crate) async fn revise(
    app: &App,
    actor: &Actor,
    id: Uuid,
    body: ReviseRequest,
) -> Result<CommandResponse, ApiError> {
    command(app.revise(actor, id, (&body).into()).await)
}

/// Into the approvers' inbox.
pub(crate) async fn submit(
    app: &App,
    actor: &Actor,
    id: Uuid,
) -> Result<CommandResponse, ApiError> {
    command(app.submit(actor, id).await)
}

/// Taken back by the proposing agent (or a human who sees it).
pub(crate) async fn withdraw(
    app: &App,
    actor: &Actor,
    id: Uuid,
) -> Result<CommandResponse, ApiError> {
    command(app.withdraw(actor, id).await)
}

/// An approver's decision on one exact revision and hash.
pub(crate) async fn decide(
    app: &App,
    actor: &Actor,
    id: Uuid,
    kind: DecisionKind,
    body: DecideRequest,
) -> Result<CommandResponse, ApiError> {
    let (revision_id, hash, reason) = (body.revision_id, body.payload_hash, body.reason);
    let result = app.decide(
        actor,
        id,
        kind,
        revision_id,
        hash.as_deref(),
        reason.as_deref(),
    );
    command(result.await)
}

/// An approved invoice cancelled by an approver, with a reason.
pub(crate) async fn cancel(
    app: &App,
    actor: &Actor,
    id: Uuid,
    body: CancelRequest,
) -> Result<CommandResponse, ApiError> {
    command(app.cancel(actor, id, body.reason.as_deref()).await)
}

/// An approved invoice issued: within the request without an issuer, else its job enqueued.
pub(crate) async fn issue(app: &App, actor: &Actor, id: Uuid) -> Result<Issued, ApiError> {
    Ok(match app.issue(actor, id).await? {
        IssueAnswer::Issued(issued) => Issued::Invoice(command(Ok(*issued))?),
        IssueAnswer::Enqueued(job) => Issued::Job {
            job: JobResponse::from(job.value),
            replayed: job.replayed,
        },
    })
}

/// What an issue answers (built once per request and answered at once: its size costs
/// nothing worth a box).
#[allow(clippy::large_enum_variant)]
pub(crate) enum Issued {
    /// Issued, or already issued.
    Invoice(CommandResponse),
    /// With an issuer: its job, enqueued or re-driven (`replayed` when it was pending already).
    Job { job: JobResponse, replayed: bool },
}
