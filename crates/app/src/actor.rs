//! Who is calling, as authentication established them: a human or an agent.

use crate::error::{AppError, AppResult};
use tauros_domain::identity::{Capabilities, Capability, Interface, Role};
use tauros_store::{AgentRow, Lock, Tx};
use uuid::Uuid;

/// A signed-in human, as established by their session token.
#[derive(Clone, Debug)]
pub struct Human {
    pub id: Uuid,
    pub org_id: Uuid,
    pub email: String,
    pub role: Role,
    /// The session this request came with (ended by sign-out).
    pub session_id: Uuid,
    /// The entry point the request came through, recorded in the audit trail.
    pub interface: Interface,
}

/// An agent, as established by its API key.
#[derive(Clone, Debug)]
pub struct Agent {
    pub id: Uuid,
    pub org_id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub capabilities: Capabilities,
    /// The entry point the request came through, recorded in the audit trail.
    pub interface: Interface,
}

/// Whoever is calling.
#[derive(Clone, Debug)]
pub enum Actor {
    /// A human with a session.
    Human(Human),
    /// An agent with a key.
    Agent(Agent),
}

impl Actor {
    /// The caller's organisation.
    pub fn org_id(&self) -> Uuid {
        match self {
            Actor::Human(h) => h.org_id,
            Actor::Agent(a) => a.org_id,
        }
    }

    /// Whose work the caller's units of work are: its organisation's ([`tauros_store::Lane`]).
    pub fn lane(&self) -> tauros_store::Lane {
        tauros_store::Lane::Org(self.org_id())
    }

    /// The caller's own id (the agent's or the human's).
    pub fn id(&self) -> Uuid {
        match self {
            Actor::Human(h) => h.id,
            Actor::Agent(a) => a.id,
        }
    }

    /// The entry point (`api`, `mcp`, …), set by Tauros; never used for authorisation.
    pub fn interface(&self) -> Interface {
        match self {
            Actor::Human(h) => h.interface,
            Actor::Agent(a) => a.interface,
        }
    }

    /// Checks a capability (docs/contract/domain.md §1); a human's role decides for them. A key
    /// holding both is refused on settlement routes until split (docs/DECISIONS.md).
    pub fn require(&self, capability: Capability) -> AppResult<()> {
        match self {
            Actor::Agent(a) if !a.capabilities.has(capability) => {
                Err(AppError::MissingCapability(capability.as_str()))
            }
            Actor::Agent(a)
                if capability == Capability::Settlement
                    && a.capabilities.mixes_money_with_invoicing() =>
            {
                Err(AppError::Forbidden(
                    "this key holds `settlement` together with `invoicing`, which settlement \
                     refuses: an agent that proposes invoices must not report their payments; \
                     ask an approver to create a separate agent with only `settlement` and \
                     report with its key",
                ))
            }
            _ => Ok(()),
        }
    }

    /// The human, or 403 for an agent.
    pub fn human(&self) -> AppResult<&Human> {
        match self {
            Actor::Human(h) => Ok(h),
            Actor::Agent(_) => Err(AppError::Forbidden(
                "this route is for humans; agents may not call it",
            )),
        }
    }
}

impl Agent {
    /// Share-locks this agent's row so it outlives the agent's writes (a deleted one gets 401).
    pub(crate) async fn hold(&self, tx: &mut dyn Tx) -> AppResult<()> {
        let row = tx.lock_agent(self.org_id, self.id, Lock::Share).await?;
        self.held(row.as_ref())
    }

    /// [`Agent::hold`]'s answer for the row a share-locking read found (`locked_parties`).
    pub(crate) fn held(&self, row: Option<&AgentRow>) -> AppResult<()> {
        match row {
            Some(_) => {
                failpoint!(self.org_id, AgentHeld);
                Ok(())
            }
            None => Err(AppError::Unauthorized),
        }
    }
}

impl Human {
    /// The human if an approver, else 403.
    pub fn approver(&self) -> AppResult<&Human> {
        match self.role {
            Role::Approver => Ok(self),
            Role::Operator => Err(AppError::Forbidden("only an approver may do this")),
        }
    }
}
