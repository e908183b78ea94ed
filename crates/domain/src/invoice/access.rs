//! Who sees an invoice and who may run which command on it (docs/contract/domain.md §1,
//! docs/contract/api.md Invoices). Every check answers in one order, so the HTTP answer never
//! depends on which rule the code tested first:
//!
//! 1. **Visibility**: a caller who cannot see the invoice gets [`AccessError::NotFound`], as for
//!    an unknown id (no existence oracle), whatever the command or role;
//! 2. **Who**: one who sees it but may not run the command gets [`AccessError::Forbidden`];
//! 3. **Four eyes**: an approver deciding on an invoice of an agent they own gets
//!    [`AccessError::FourEyesRequired`].
//!
//! All three come before the state machine, so a refusal never reveals state. Organisations are
//! not compared: the store loads only rows of the caller's org.

use thiserror::Error;
use uuid::Uuid;

use super::state::Action;
use crate::error::Coded;
use crate::identity::Role;
pub use crate::visibility::Caller;
use crate::visibility::Scope;

/// The ownership facts of one invoice: its proposing agent and that agent's owner.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct InvoiceAccess {
    pub agent_id: Uuid,
    pub agent_owner_id: Uuid,
}

/// The organisation settings that change visibility and separation of duties.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OrgSettings {
    /// An approver must not decide on invoices of agents they own.
    pub four_eyes: bool,
    /// Approvers see (and may decide on) every invoice of the org.
    pub shared_review: bool,
}

/// Why a caller may not run a command on an invoice.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum AccessError {
    /// The caller cannot see the invoice; answered exactly as for an unknown id.
    #[error("no invoice with this id exists for you; list invoices to find the ones you can see")]
    NotFound,
    /// The caller sees the invoice but may not run this command; the text says who may.
    #[error("{0}")]
    Forbidden(&'static str),
    #[error(
        "this organisation requires four eyes: you own the agent that proposed this invoice, so \
         another approver must decide on it (or an approver turns `four_eyes` off)"
    )]
    FourEyesRequired,
}

impl Coded for AccessError {
    fn code(&self) -> &'static str {
        match self {
            AccessError::NotFound => "not_found",
            AccessError::Forbidden(_) => "forbidden",
            AccessError::FourEyesRequired => "four_eyes_required",
        }
    }
}

const AGENT_DECIDES: &str = "an agent can never approve, reject, request changes on or cancel an \
     invoice: a human approver decides. An agent may revise, submit or withdraw its own invoices";
const NOBODY_RECORDS: &str = "`issue_blocked`, `issue_rejected`, `issue_conflict` and \
     `issue_needs_review` are recorded by Tauros when issuing stops for a human; no caller can \
     record them";
const SETTLEMENT_RECORDS: &str = "`payment_applied` and `payment_reversed` are recorded by Tauros \
     from settlement events (POST /v1/settlement-events); no caller can record them";
const OPERATOR_DECIDES: &str = "only a human with role `approver` may approve, reject, request \
     changes on or cancel an invoice; an operator may withdraw it";
const HUMAN_PROPOSES: &str = "only the agent that proposed this invoice may revise or submit it; \
     a human who sees it may withdraw it, and an approver may request changes";
const HUMAN_CREATES: &str = "invoices are proposed by agents: create a draft with an agent API \
     key, not a human session";
const AGENT_VERIFIES: &str = "verify is for humans; an agent may read the invoice, its \
     revisions, decisions and events";

/// Whether the caller may see the invoice: [`Scope::of_invoices`], so lists agree with reads.
pub fn can_see(caller: Caller, access: InvoiceAccess, settings: OrgSettings) -> bool {
    Scope::of_invoices(caller, settings.shared_review)
        .includes(access.agent_id, access.agent_owner_id)
}

/// Whether the org's settings can change which invoices `caller` may read: they widen an
/// approver's scope (`shared_review`) and no one else's, so anyone else's read is decided
/// without them (a key's reads do not read the org, docs/DECISIONS.md).
pub fn reads_depend_on_settings(caller: Caller) -> bool {
    Scope::of_invoices(caller, false) != Scope::of_invoices(caller, true)
}

/// Get, list, revisions, decisions and events: anyone who can see the invoice (the proposing
/// agent reads decisions too, so it learns why changes were requested).
pub fn authorize_read(
    caller: Caller,
    access: InvoiceAccess,
    settings: OrgSettings,
) -> Result<(), AccessError> {
    visible(caller, access, settings)
}

/// `verify` (re-seal every revision, re-walk the event chain): humans who can see the invoice.
pub fn authorize_verify(
    caller: Caller,
    access: InvoiceAccess,
    settings: OrgSettings,
) -> Result<(), AccessError> {
    visible(caller, access, settings)?;
    match caller {
        Caller::Agent { .. } => Err(AccessError::Forbidden(AGENT_VERIFIES)),
        Caller::Human { .. } => Ok(()),
    }
}

/// `create_draft`, before any invoice exists: agents only, each as itself.
pub fn authorize_create_draft(caller: Caller) -> Result<(), AccessError> {
    match caller {
        Caller::Agent { .. } => Ok(()),
        Caller::Human { .. } => Err(AccessError::Forbidden(HUMAN_CREATES)),
    }
}

/// Whether the caller may run `action` on this invoice, in the order of the module doc.
pub fn authorize(
    action: Action,
    caller: Caller,
    access: InvoiceAccess,
    settings: OrgSettings,
) -> Result<(), AccessError> {
    visible(caller, access, settings)?;
    match action {
        Action::CreateDraft => authorize_create_draft(caller),
        Action::Revise | Action::Submit => match caller {
            // Visible to an agent means it is the proposer.
            Caller::Agent { .. } => Ok(()),
            Caller::Human { .. } => Err(AccessError::Forbidden(HUMAN_PROPOSES)),
        },
        // The proposer, or any human who sees it: withdrawing is not a decision.
        Action::Withdraw => Ok(()),
        // Tauros records it; no caller can.
        Action::IssueBlocked
        | Action::IssueRejected
        | Action::IssueConflict
        | Action::IssueNeedsReview => Err(AccessError::Forbidden(NOBODY_RECORDS)),
        Action::PaymentApplied | Action::PaymentReversed | Action::Paid => {
            Err(AccessError::Forbidden(SETTLEMENT_RECORDS))
        }
        Action::Approve
        | Action::Reject
        | Action::RequestChanges
        | Action::Cancel
        | Action::Issue => match caller {
            Caller::Agent { .. } => Err(AccessError::Forbidden(AGENT_DECIDES)),
            Caller::Human {
                role: Role::Operator,
                ..
            } => Err(AccessError::Forbidden(OPERATOR_DECIDES)),
            Caller::Human {
                id,
                role: Role::Approver,
            } => {
                if settings.four_eyes && id == access.agent_owner_id {
                    Err(AccessError::FourEyesRequired)
                } else {
                    Ok(())
                }
            }
        },
    }
}

fn visible(
    caller: Caller,
    access: InvoiceAccess,
    settings: OrgSettings,
) -> Result<(), AccessError> {
    if can_see(caller, access, settings) {
        Ok(())
    } else {
        Err(AccessError::NotFound)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The people around one invoice: its agent, a sibling agent of the same owner, the owner,
    /// and humans who do not own the agent.
    struct World {
        access: InvoiceAccess,
        own_agent: Caller,
        sibling_agent: Caller,
        owner_operator: Caller,
        owner_approver: Caller,
        other_approver: Caller,
        other_operator: Caller,
    }

    fn world() -> World {
        let owner = Uuid::from_u128(1);
        let agent = Uuid::from_u128(10);
        World {
            access: InvoiceAccess {
                agent_id: agent,
                agent_owner_id: owner,
            },
            own_agent: Caller::Agent { id: agent },
            sibling_agent: Caller::Agent {
                id: Uuid::from_u128(11),
            },
            owner_operator: Caller::Human {
                id: owner,
                role: Role::Operator,
            },
            owner_approver: Caller::Human {
                id: owner,
                role: Role::Approver,
            },
            other_approver: Caller::Human {
                id: Uuid::from_u128(2),
                role: Role::Approver,
            },
            other_operator: Caller::Human {
                id: Uuid::from_u128(3),
                role: Role::Operator,
            },
        }
    }

    const fn settings(four_eyes: bool, shared_review: bool) -> OrgSettings {
        OrgSettings {
            four_eyes,
            shared_review,
        }
    }

    /// Expected answers, one letter per command in the order
    /// read, verify, revise, submit, withdraw, approve, reject, request_changes, cancel:
    /// `y` allowed, `n` not_found, `f` forbidden, `4` four_eyes_required.
    fn expect(letters: &str) -> Vec<Result<(), &'static str>> {
        letters
            .chars()
            .filter(|c| !c.is_whitespace())
            .map(|c| match c {
                'y' => Ok(()),
                'n' => Err("not_found"),
                'f' => Err("forbidden"),
                '4' => Err("four_eyes_required"),
                other => panic!("bad letter {other}"),
            })
            .collect()
    }

    fn answers(
        caller: Caller,
        access: InvoiceAccess,
        s: OrgSettings,
    ) -> Vec<Result<(), &'static str>> {
        let code = |r: Result<(), AccessError>| r.map_err(|e| e.code());
        let mut out = vec![
            code(authorize_read(caller, access, s)),
            code(authorize_verify(caller, access, s)),
        ];
        for action in [
            Action::Revise,
            Action::Submit,
            Action::Withdraw,
            Action::Approve,
            Action::Reject,
            Action::RequestChanges,
            Action::Cancel,
        ] {
            out.push(code(authorize(action, caller, access, s)));
        }
        out
    }

    #[test]
    fn authorization_matrix() {
        let w = world();
        let (off, four, shared, both) = (
            settings(false, false),
            settings(true, false),
            settings(false, true),
            settings(true, true),
        );
        // Letters: read verify | revise submit | withdraw | approve reject request_changes cancel.
        #[rustfmt::skip]
        let table: [(&str, Caller, OrgSettings, &str); 16] = [
            ("own agent",                  w.own_agent,      off,    "yf yy y ffff"),
            ("own agent, both on",         w.own_agent,      both,   "yf yy y ffff"),
            ("sibling agent",              w.sibling_agent,  off,    "nn nn n nnnn"),
            ("sibling agent, both on",     w.sibling_agent,  both,   "nn nn n nnnn"),
            ("owner operator",             w.owner_operator, off,    "yy ff y ffff"),
            ("owner operator, four eyes",  w.owner_operator, four,   "yy ff y ffff"),
            ("owner approver",             w.owner_approver, off,    "yy ff y yyyy"),
            ("owner approver, four eyes",  w.owner_approver, four,   "yy ff y 4444"),
            ("owner approver, both on",    w.owner_approver, both,   "yy ff y 4444"),
            ("other approver",             w.other_approver, off,    "nn nn n nnnn"),
            ("other approver, four eyes",  w.other_approver, four,   "nn nn n nnnn"),
            ("other approver, shared",     w.other_approver, shared, "yy ff y yyyy"),
            ("other approver, both on",    w.other_approver, both,   "yy ff y yyyy"),
            ("other operator",             w.other_operator, off,    "nn nn n nnnn"),
            ("other operator, shared",     w.other_operator, shared, "nn nn n nnnn"),
            ("other operator, both on",    w.other_operator, both,   "nn nn n nnnn"),
        ];
        for (name, caller, s, letters) in table {
            assert_eq!(answers(caller, w.access, s), expect(letters), "{name}");
        }
    }

    #[test]
    fn visibility() {
        let w = world();
        for s in [
            settings(false, false),
            settings(true, false),
            settings(false, true),
            settings(true, true),
        ] {
            assert!(can_see(w.own_agent, w.access, s));
            assert!(!can_see(w.sibling_agent, w.access, s));
            assert!(can_see(w.owner_operator, w.access, s));
            assert!(can_see(w.owner_approver, w.access, s));
            assert_eq!(can_see(w.other_approver, w.access, s), s.shared_review);
            assert!(!can_see(w.other_operator, w.access, s));
        }
    }

    #[test]
    fn an_agent_never_gains_from_its_owner_role() {
        // The agent's id equals nobody's human id, and even if it did the kinds differ.
        let w = world();
        let agent_with_owner_id = Caller::Agent {
            id: w.access.agent_owner_id,
        };
        for s in [settings(false, false), settings(true, true)] {
            assert_eq!(
                authorize(Action::Approve, agent_with_owner_id, w.access, s),
                Err(AccessError::NotFound)
            );
        }
    }

    #[test]
    fn create_draft_is_for_agents_only() {
        let w = world();
        assert_eq!(authorize_create_draft(w.own_agent), Ok(()));
        assert_eq!(authorize_create_draft(w.sibling_agent), Ok(()));
        for human in [w.owner_operator, w.owner_approver, w.other_approver] {
            assert_eq!(
                authorize_create_draft(human).map_err(|e| e.code()),
                Err("forbidden")
            );
        }
        // On an existing invoice visibility comes first, as for every command.
        assert_eq!(
            authorize(
                Action::CreateDraft,
                w.other_approver,
                w.access,
                settings(false, false)
            ),
            Err(AccessError::NotFound)
        );
        for human in [w.owner_operator, w.owner_approver] {
            assert_eq!(
                authorize(Action::CreateDraft, human, w.access, settings(false, false))
                    .map_err(|e| e.code()),
                Err("forbidden")
            );
        }
        assert_eq!(
            authorize(
                Action::CreateDraft,
                w.own_agent,
                w.access,
                settings(false, false)
            ),
            Ok(())
        );
        assert_eq!(
            authorize(
                Action::CreateDraft,
                w.sibling_agent,
                w.access,
                settings(false, false)
            ),
            Err(AccessError::NotFound)
        );
    }

    #[test]
    fn sentences_say_who_may() {
        let w = world();
        let s = settings(true, false);
        let text = |r: Result<(), AccessError>| r.unwrap_err().to_string();
        assert!(
            text(authorize(Action::Approve, w.own_agent, w.access, s)).contains("human approver")
        );
        assert!(
            text(authorize(Action::Reject, w.owner_operator, w.access, s))
                .contains("role `approver`")
        );
        assert!(
            text(authorize(Action::Submit, w.owner_approver, w.access, s))
                .contains("agent that proposed")
        );
        assert!(
            text(authorize(Action::Cancel, w.owner_approver, w.access, s)).contains("four eyes")
        );
        assert!(text(authorize_verify(w.own_agent, w.access, s)).contains("for humans"));
        // The not-found sentence is one constant: identical for foreign and unknown ids.
        assert_eq!(
            text(authorize_read(w.sibling_agent, w.access, s)),
            AccessError::NotFound.to_string()
        );
    }

    /// A caller whose reads do not depend on the settings is answered alike under all four
    /// combinations (what lets a key's read skip the org); an approver's reads do depend.
    #[test]
    fn reads_that_do_not_depend_on_the_settings_answer_alike_under_each() {
        let w = world();
        let other = InvoiceAccess {
            agent_id: Uuid::from_u128(20),
            agent_owner_id: Uuid::from_u128(21),
        };
        let all = [
            settings(false, false),
            settings(false, true),
            settings(true, false),
            settings(true, true),
        ];
        let callers = [
            w.own_agent,
            w.sibling_agent,
            w.owner_operator,
            w.other_operator,
            w.owner_approver,
            w.other_approver,
        ];
        for caller in callers {
            for access in [w.access, other] {
                let answers: Vec<String> = all
                    .iter()
                    .map(|s| format!("{:?}", authorize_read(caller, access, *s)))
                    .collect();
                if !reads_depend_on_settings(caller) {
                    assert!(
                        answers.iter().all(|a| a == &answers[0]),
                        "{caller:?} on {access:?}: {answers:?}"
                    );
                }
            }
        }
        assert!(!reads_depend_on_settings(w.own_agent));
        assert!(!reads_depend_on_settings(w.owner_operator));
        assert!(reads_depend_on_settings(w.other_approver));
    }
}
