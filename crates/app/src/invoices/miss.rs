//! The miss path of an invoice id: another record the caller may see is named in the 404.

use super::check_readable;
use crate::actor::Actor;
use crate::customers::{sees_agent, visible_customer};
use crate::error::{AppError, AppResult, OtherKind};
use tauros_store::Reader;
use uuid::Uuid;

/// The error for an invoice id the org does not have: [`AppError::NotAnInvoice`] when `actor`
/// may see the id as another record, else the plain [`AppError::NotFound`].
pub(crate) async fn unknown_invoice(
    conn: &mut dyn Reader,
    actor: &Actor,
    id: Uuid,
) -> AppResult<AppError> {
    let org_id = actor.org_id();
    if let Some(revision) = conn.revision_by_id(org_id, id).await? {
        if readable_invoice(conn, actor, revision.invoice_id).await? {
            return Ok(AppError::NotAnInvoice(OtherKind::Revision {
                invoice_id: revision.invoice_id,
                number: revision.number,
            }));
        }
        return Ok(AppError::NotFound);
    }
    if let Some(event) = conn.event_by_id(org_id, id).await? {
        if readable_invoice(conn, actor, event.invoice_id).await? {
            return Ok(AppError::NotAnInvoice(OtherKind::Event {
                invoice_id: event.invoice_id,
                seq: event.seq,
            }));
        }
        return Ok(AppError::NotFound);
    }
    match visible_customer(conn, actor, id).await {
        Ok(_) => return Ok(AppError::NotAnInvoice(OtherKind::Customer)),
        Err(AppError::NotFound) => {}
        Err(other) => return Err(other),
    }
    if let Some(destination) = conn.destination_by_id(org_id, id).await?
        && sees_agent(conn, actor, destination.agent_id).await?
    {
        return Ok(AppError::NotAnInvoice(OtherKind::PaymentDestination));
    }
    Ok(AppError::NotFound)
}

/// Whether `actor` may read the invoice `id` (the rule every invoice read follows).
async fn readable_invoice(conn: &mut dyn Reader, actor: &Actor, id: Uuid) -> AppResult<bool> {
    let Some(joined) = conn.invoice_joined(actor.org_id(), id).await? else {
        return Ok(false);
    };
    match check_readable(actor, joined) {
        Ok(_) => Ok(true),
        Err(AppError::NotFound | AppError::Forbidden(_) | AppError::FourEyesRequired(_)) => {
            Ok(false)
        }
        Err(other) => Err(other),
    }
}
