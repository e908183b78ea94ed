//! Invoices: facts for `domain::invoice`'s rules, loaded under the right locks; decisions written.

mod chain;
mod commands;
mod content;
mod issuing;
mod miss;
mod preview;
mod queries;
mod settling;
mod views;

pub(crate) use issuing::{CLAIM_KIND as ISSUE_CLAIM_KIND, issue_job};
pub use issuing::{
    ISSUE_JOB, IssueAnswer, IssueClaim, IssueRequest, IssueStart, IssueStop, issue_business_key,
};
pub use preview::{PreviewView, WarningView};
pub use queries::InvoiceQuery;
pub(crate) use settling::{invoice_facts, reconcile_invoice, reconcile_payment, stored_amount};
pub use tauros_domain::invoice::DraftInput;
pub(crate) use views::joined_view;
pub use views::{
    DecisionView, EventView, InvoiceView, IssuingView, LatestDecision, RevisionView, VerifyReport,
};

use crate::actor::Actor;
use crate::error::{AppError, AppResult};
use tauros_domain::error::Coded;
use tauros_domain::invoice::{self as rules, AccessError, Caller, InvoiceAccess, OrgSettings};
use tauros_store::{InvoiceJoined, Reader};
use uuid::Uuid;

pub(crate) fn caller(actor: &Actor) -> Caller {
    match actor {
        Actor::Agent(a) => Caller::Agent { id: a.id },
        Actor::Human(h) => Caller::Human {
            id: h.id,
            role: h.role,
        },
    }
}

/// The visibility facts of a joined read. A key's own reads skip the org (no agent's read
/// depends on its settings); a read that depends on them and lacks them is a bug.
fn joined_access(actor: &Actor, j: &InvoiceJoined) -> AppResult<(InvoiceAccess, OrgSettings)> {
    let settings = match j.settings {
        Some(settings) => settings,
        None if !rules::reads_depend_on_settings(caller(actor)) => OrgSettings::default(),
        None => {
            return Err(AppError::Internal(
                "a read that depends on the org's settings came without them".into(),
            ));
        }
    };
    let access = InvoiceAccess {
        agent_id: j.agent_id,
        agent_owner_id: j.agent_owner_id,
    };
    Ok((access, settings))
}

/// The invoice, if `actor` may read it.
fn check_readable(actor: &Actor, joined: InvoiceJoined) -> AppResult<InvoiceJoined> {
    let (access, settings) = joined_access(actor, &joined)?;
    rules::authorize_read(caller(actor), access, settings).map_err(access_error)?;
    Ok(joined)
}

/// The visibility facts of a locked invoice row: its agent's owner and the org's settings.
async fn access_facts(
    conn: &mut dyn Reader,
    org_id: Uuid,
    agent_id: Uuid,
) -> AppResult<(InvoiceAccess, OrgSettings)> {
    let owner = conn
        .agent_by_id(org_id, agent_id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice without agent".into()))?
        .owner_id;
    failpoint!(org_id, AgentRead);
    let org = conn
        .org_by_id(org_id)
        .await?
        .ok_or_else(|| AppError::Internal("invoice without org".into()))?;
    failpoint!(org_id, OrgRead);
    Ok((
        InvoiceAccess {
            agent_id,
            agent_owner_id: owner,
        },
        OrgSettings {
            four_eyes: org.four_eyes,
            shared_review: org.shared_review,
        },
    ))
}

fn access_error(e: AccessError) -> AppError {
    match e {
        AccessError::NotFound => AppError::NotFound,
        AccessError::Forbidden(why) => AppError::Forbidden(why),
        AccessError::FourEyesRequired => AppError::FourEyesRequired(e.to_string()),
    }
}

fn invalid(e: rules::InvalidTransition) -> AppError {
    AppError::InvalidTransition {
        from: e.from.as_str(),
        action: e.action.as_str(),
        detail: e.to_string(),
    }
}

fn conflict<E: Coded>(e: &E) -> AppError {
    AppError::Conflict {
        code: e.code(),
        detail: e.to_string(),
    }
}
