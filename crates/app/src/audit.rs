//! The organisation's audit trail: who did something, and the one row each command appends.

use crate::actor::{Actor, Agent, Human};
use crate::clock::now;

use crate::error::AppResult;
use tauros_domain::identity::{ActorKind, Interface};
use tauros_store::{AuditRow, Tx};
use uuid::Uuid;

/// Who did something, for the audit trail.
#[derive(Clone, Copy, Debug)]
pub(crate) struct AuditActor {
    pub(crate) kind: ActorKind,
    pub(crate) id: Option<Uuid>,
    pub(crate) interface: Interface,
}

impl AuditActor {
    pub(crate) fn human(h: &Human) -> AuditActor {
        AuditActor {
            kind: ActorKind::Human,
            id: Some(h.id),
            interface: h.interface,
        }
    }

    pub(crate) fn agent(a: &Agent) -> AuditActor {
        AuditActor {
            kind: ActorKind::Agent,
            id: Some(a.id),
            interface: a.interface,
        }
    }

    pub(crate) fn of(actor: &Actor) -> AuditActor {
        match actor {
            Actor::Human(h) => AuditActor::human(h),
            Actor::Agent(a) => AuditActor::agent(a),
        }
    }

    pub(crate) fn job() -> AuditActor {
        AuditActor {
            kind: ActorKind::System,
            id: None,
            interface: Interface::Job,
        }
    }

    pub(crate) fn cli() -> AuditActor {
        AuditActor {
            kind: ActorKind::System,
            id: None,
            interface: Interface::Cli,
        }
    }
}

/// Appends one row to the org's audit trail, inside the caller's transaction.
pub(crate) async fn audit(
    tx: &mut dyn Tx,
    org_id: Uuid,
    actor: AuditActor,
    action: &str,
    subject: (&str, Uuid),
    detail: serde_json::Value,
) -> AppResult<()> {
    tx.insert_audit(&AuditRow {
        id: Uuid::now_v7(),
        org_id,
        actor_kind: actor.kind,
        actor_id: actor.id,
        interface: actor.interface,
        action: action.to_owned(),
        subject_type: subject.0.to_owned(),
        subject_id: subject.1,
        detail: detail.to_string(),
        occurred_at: now(),
    })
    .await?;
    Ok(())
}
