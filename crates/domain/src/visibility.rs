//! Who sees whose records (docs/contract/domain.md §1): the one rule behind every read, list
//! and "unknown or foreign" 404. A record's check ([`Scope::includes`]) and a list's filter
//! come from the same [`Scope`], so a list can never show what a read would refuse.

use uuid::Uuid;

use crate::identity::Role;

/// The authenticated caller, as the visibility and access rules need it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller {
    /// An agent, authenticated by its API key.
    Agent { id: Uuid },
    /// A human with a session.
    Human {
        id: Uuid,
        /// Fixed at creation; decides whether they may decide.
        role: Role,
    },
}

/// Whose records a read may return.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// The records made by this agent.
    Agent(Uuid),
    /// The records made by any agent this human owns.
    Owner(Uuid),
    /// Every record of the organisation.
    Org,
}

impl Scope {
    /// Customers and payment destinations: an agent's own, or those of a human's agents.
    pub fn of_parties(caller: Caller) -> Scope {
        match caller {
            Caller::Agent { id } => Scope::Agent(id),
            Caller::Human { id, .. } => Scope::Owner(id),
        }
    }

    /// Invoices: as parties, widened to the whole org for an approver under `shared_review`.
    pub fn of_invoices(caller: Caller, shared_review: bool) -> Scope {
        match caller {
            Caller::Human {
                role: Role::Approver,
                ..
            } if shared_review => Scope::Org,
            _ => Scope::of_parties(caller),
        }
    }

    /// Whether a record made by `agent_id`, an agent owned by `owner_id`, is in this scope.
    pub fn includes(self, agent_id: Uuid, owner_id: Uuid) -> bool {
        match self {
            Scope::Agent(id) => id == agent_id,
            Scope::Owner(id) => id == owner_id,
            Scope::Org => true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const AGENT: Uuid = Uuid::from_u128(10);
    const OWNER: Uuid = Uuid::from_u128(1);
    const OTHER: Uuid = Uuid::from_u128(2);

    fn human(id: Uuid, role: Role) -> Caller {
        Caller::Human { id, role }
    }

    #[test]
    fn parties_stay_with_their_agent_and_its_owner_whatever_the_settings() {
        assert!(Scope::of_parties(Caller::Agent { id: AGENT }).includes(AGENT, OWNER));
        assert!(!Scope::of_parties(Caller::Agent { id: OTHER }).includes(AGENT, OWNER));
        assert!(Scope::of_parties(human(OWNER, Role::Operator)).includes(AGENT, OWNER));
        assert!(!Scope::of_parties(human(OTHER, Role::Approver)).includes(AGENT, OWNER));
    }

    #[test]
    fn shared_review_widens_invoices_for_approvers_only() {
        for shared in [false, true] {
            let approver = Scope::of_invoices(human(OTHER, Role::Approver), shared);
            let operator = Scope::of_invoices(human(OTHER, Role::Operator), shared);
            let agent = Scope::of_invoices(Caller::Agent { id: OTHER }, shared);
            assert_eq!(approver.includes(AGENT, OWNER), shared);
            assert!(!operator.includes(AGENT, OWNER));
            assert!(!agent.includes(AGENT, OWNER));
        }
    }
}
