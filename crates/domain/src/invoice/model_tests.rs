//! The lifecycle against a tiny independent model: random (command, caller) sequences must get
//! the same answer from the real rules and from a separately written `match` at every step.

use std::collections::HashMap;

use proptest::prelude::*;
use uuid::Uuid;

use super::*;
use crate::error::Coded;
use crate::identity::Role;
use InvoiceState::*;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    OwnAgent,
    SiblingAgent,
    OwnerOperator,
    OwnerApprover,
    OtherApprover,
    OtherOperator,
}

const OWNER: Uuid = Uuid::from_u128(1);
const OTHER_APPROVER: Uuid = Uuid::from_u128(2);
const OTHER_OPERATOR: Uuid = Uuid::from_u128(3);
const AGENT: Uuid = Uuid::from_u128(10);
const SIBLING: Uuid = Uuid::from_u128(11);

fn caller(who: Who) -> Caller {
    match who {
        Who::OwnAgent => Caller::Agent { id: AGENT },
        Who::SiblingAgent => Caller::Agent { id: SIBLING },
        Who::OwnerOperator => Caller::Human {
            id: OWNER,
            role: Role::Operator,
        },
        Who::OwnerApprover => Caller::Human {
            id: OWNER,
            role: Role::Approver,
        },
        Who::OtherApprover => Caller::Human {
            id: OTHER_APPROVER,
            role: Role::Approver,
        },
        Who::OtherOperator => Caller::Human {
            id: OTHER_OPERATOR,
            role: Role::Operator,
        },
    }
}

/// One command as sent, plus the one world fact that can change between commands.
#[derive(Clone, Copy, Debug)]
struct Step {
    action: Action,
    who: Who,
    /// Deciders name the previous revision (or, on revision 1, one of another invoice).
    stale: bool,
    /// Deciders send a hash that is not the named revision's.
    wrong_hash: bool,
    /// Whether the current revision's destination is active right now.
    destination_active: bool,
}

/// The invoice as the model keeps it. Revision `n` has id `n` and hash `hash(n)`.
#[derive(Clone, Debug)]
struct Invoice {
    state: InvoiceState,
    cancelled_by: Option<Action>,
    current: u128,
    /// Decisions by revision number: who and what.
    decisions: HashMap<u128, (Uuid, DecisionKind)>,
}

fn hash(revision: u128) -> String {
    format!("{revision:064x}")
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Outcome {
    Moved(InvoiceState),
    Replay,
    Refused(&'static str),
}

/// The independent model: who, then state, each a plain match.
fn model(inv: &Invoice, s: OrgSettings, step: Step) -> Outcome {
    use Action::*;
    use Outcome::*;
    use Who::*;
    let deciding = matches!(step.action, Approve | Reject | RequestChanges);
    let authority = deciding || step.action == Cancel;
    let sees = match step.who {
        OwnAgent | OwnerOperator | OwnerApprover => true,
        OtherApprover => s.shared_review,
        SiblingAgent | OtherOperator => false,
    };
    if !sees {
        return Refused("not_found");
    }
    let denied = match step.who {
        OwnAgent => authority,
        OwnerOperator => authority || matches!(step.action, Revise | Submit),
        OwnerApprover | OtherApprover => matches!(step.action, Revise | Submit),
        SiblingAgent | OtherOperator => true,
    };
    if denied {
        return Refused("forbidden");
    }
    if authority && step.who == OwnerApprover && s.four_eyes {
        return Refused("four_eyes_required");
    }
    let me = match step.who {
        OwnerApprover => OWNER,
        _ => OTHER_APPROVER,
    };
    let named = if step.stale {
        inv.current - 1
    } else {
        inv.current
    };
    match (step.action, inv.state) {
        (Revise, Draft | PendingApproval) => Moved(Draft),
        (Submit, PendingApproval) => Replay,
        (Submit, Draft) if inv.decisions.contains_key(&inv.current) => {
            Refused("revision_already_decided")
        }
        (Submit, Draft) if !step.destination_active => Refused("destination_inactive"),
        (Submit, Draft) => Moved(PendingApproval),
        (Withdraw, Draft | PendingApproval) => Moved(Cancelled),
        (Withdraw, Cancelled) if inv.cancelled_by == Some(Withdraw) => Replay,
        (Cancel, Approved) => Moved(Cancelled),
        (Cancel, Cancelled) if inv.cancelled_by == Some(Cancel) => Replay,
        (a, state) if deciding => {
            let kind = match a {
                Approve => DecisionKind::Approved,
                Reject => DecisionKind::Rejected,
                _ => DecisionKind::ChangesRequested,
            };
            match inv.decisions.get(&named) {
                Some(&(by, k)) if by == me && k == kind && !step.wrong_hash => Replay,
                Some(_) => Refused("already_decided"),
                None if state != PendingApproval => Refused("invalid_transition"),
                None if step.stale => Refused("stale_revision"),
                None if step.wrong_hash => Refused("payload_mismatch"),
                None if a == Approve && !step.destination_active => Refused("destination_inactive"),
                None => Moved(match a {
                    Approve => Approved,
                    Reject => Rejected,
                    _ => Draft,
                }),
            }
        }
        _ => Refused("invalid_transition"),
    }
}

/// The real rules, wired the way the app will wire them.
fn real(inv: &Invoice, s: OrgSettings, step: Step) -> Outcome {
    let access = InvoiceAccess {
        agent_id: AGENT,
        agent_owner_id: OWNER,
    };
    let who = caller(step.who);
    if let Err(e) = authorize(step.action, who, access, s) {
        return Outcome::Refused(e.code());
    }
    let from_transition = |t: Transition| match t {
        Transition::Apply { to } => Outcome::Moved(to),
        Transition::Replay => Outcome::Replay,
    };
    match step.action {
        Action::Submit => match submit_transition(SubmitFacts {
            state: inv.state,
            current_decision: inv.decisions.get(&inv.current).map(|d| d.1),
            destination_active: step.destination_active,
        }) {
            Ok(t) => from_transition(t),
            Err(e) => Outcome::Refused(e.code()),
        },
        Action::Approve | Action::Reject | Action::RequestChanges => {
            let Some(kind) = step.action.decision_kind() else {
                unreachable!()
            };
            let Caller::Human { id, .. } = who else {
                unreachable!()
            };
            // Revision 0 does not exist here: it stands for a revision of another invoice.
            let named = if step.stale {
                inv.current - 1
            } else {
                inv.current
            };
            let facts = DecideFacts {
                kind,
                approver_id: id,
                revision_id: Uuid::from_u128(named),
                payload_hash: if step.wrong_hash {
                    "f".repeat(64)
                } else {
                    hash(named)
                },
                reason: Some("because".to_owned()),
                existing: inv.decisions.get(&named).map(|&(by, k)| ExistingDecision {
                    approver_id: by,
                    kind: k,
                    payload_hash: hash(named),
                }),
                state: inv.state,
                revision_of_invoice: named >= 1,
                current_revision_id: Uuid::from_u128(inv.current),
                current_payload_hash: hash(inv.current),
                reseal_matches: true,
                destination_active: step.destination_active,
            };
            match decide(facts) {
                Ok(DecideOutcome::Apply { to, .. }) => Outcome::Moved(to),
                Ok(DecideOutcome::Replay) => Outcome::Replay,
                Err(e) => Outcome::Refused(e.code()),
            }
        }
        action => match transition(action, inv.state, inv.cancelled_by) {
            Ok(t) => from_transition(t),
            Err(e) => Outcome::Refused(e.code()),
        },
    }
}

/// Writes what a successful command writes.
fn apply(inv: &mut Invoice, step: Step, to: InvoiceState) {
    let me = match step.who {
        Who::OwnerApprover => OWNER,
        _ => OTHER_APPROVER,
    };
    match step.action {
        Action::Revise => inv.current += 1,
        Action::Withdraw | Action::Cancel => inv.cancelled_by = Some(step.action),
        action => {
            if let Some(kind) = action.decision_kind() {
                inv.decisions.insert(inv.current, (me, kind));
            }
        }
    }
    inv.state = to;
}

fn who() -> impl Strategy<Value = Who> {
    // Weighted towards the callers that can move the invoice, so sequences get deep.
    prop_oneof![
        4 => Just(Who::OwnAgent),
        3 => Just(Who::OwnerApprover),
        2 => Just(Who::OtherApprover),
        1 => Just(Who::OwnerOperator),
        1 => Just(Who::SiblingAgent),
        1 => Just(Who::OtherOperator),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        // Withdraw is allowed to almost everyone and ends the lifecycle, so it is rare here;
        // otherwise few sequences would reach a decision.
        prop_oneof![
            6 => Just(Action::Revise),
            10 => Just(Action::Submit),
            1 => Just(Action::Withdraw),
            8 => Just(Action::Approve),
            4 => Just(Action::Reject),
            8 => Just(Action::RequestChanges),
            4 => Just(Action::Cancel),
        ],
        who(),
        proptest::bool::weighted(0.15),
        proptest::bool::weighted(0.1),
        proptest::bool::weighted(0.85),
    )
        .prop_map(
            |(action, who, stale, wrong_hash, destination_active)| Step {
                action,
                who,
                stale,
                wrong_hash,
                destination_active,
            },
        )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn the_rules_agree_with_the_model(
        four_eyes in any::<bool>(),
        shared_review in any::<bool>(),
        steps in proptest::collection::vec(step(), 1..40),
    ) {
        let s = OrgSettings { four_eyes, shared_review };
        let mut inv = Invoice {
            state: Draft,
            cancelled_by: None,
            current: 1,
            decisions: HashMap::new(),
        };
        for step in steps {
            let expected = model(&inv, s, step);
            let got = real(&inv, s, step);
            prop_assert_eq!(&got, &expected, "{:?} on {:?}", step, inv);
            match got {
                Outcome::Moved(to) => {
                    apply(&mut inv, step, to);
                    // A retried command that succeeded is a replay, never a second move
                    // (revise aside: each revise with a changed payload is a new revision).
                    if step.action != Action::Revise {
                        prop_assert_eq!(real(&inv, s, step), Outcome::Replay, "retry of {:?}", step);
                    }
                }
                Outcome::Replay => {
                    // A replay answers only when the command's goal already holds.
                    match step.action {
                        Action::Submit => prop_assert_eq!(inv.state, PendingApproval),
                        Action::Withdraw | Action::Cancel => {
                            prop_assert_eq!(inv.state, Cancelled);
                            prop_assert_eq!(inv.cancelled_by, Some(step.action));
                        }
                        action => prop_assert!(action.decision_kind().is_some()),
                    }
                }
                Outcome::Refused(_) => {}
            }
        }
    }
}
