//! Deciding and submitting over facts the app loaded under its locks (invoice, then destination:
//! one order, so no deadlock). Checks run in the order of docs/contract/domain.md §5, so when
//! several fail the caller hears the first, whatever the backend or the timing.

use thiserror::Error;
use uuid::Uuid;

use super::state::{
    Action, DecisionKind, InvalidTransition, InvoiceState, Transition, apply_target, transition,
};
use crate::error::{Coded, FieldError, echo};
use crate::text::{Lines, unclean, unclean_error};

/// Longest decision or cancellation reason, in characters after trimming.
pub const MAX_REASON_CHARS: usize = 2000;

/// A decision names the hash it reviewed as Tauros writes hashes: 64 lowercase hexadecimal
/// characters (DECISIONS.md, Invoices). Anything else cannot match and is a field error.
pub fn check_payload_hash(text: &str) -> Result<(), FieldError> {
    if text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(FieldError::plain(
            "payload_hash",
            "invalid_hash",
            "send the payload_hash of the revision you reviewed: 64 lowercase hexadecimal \
             characters, exactly as in current_revision.payload_hash",
        ))
    }
}

/// Trims and checks a command's `reason` (what gets stored). Required for reject,
/// request_changes and cancel, so the agent learns what to fix; optional for approve; refused,
/// not dropped, on the other commands.
pub fn validate_reason(action: Action, reason: Option<&str>) -> Result<Option<String>, FieldError> {
    let reason = reason.map(str::trim).filter(|r| !r.is_empty());
    let required = match action {
        Action::Reject | Action::RequestChanges | Action::Cancel => true,
        Action::Approve => false,
        Action::CreateDraft
        | Action::Revise
        | Action::Submit
        | Action::Withdraw
        | Action::Issue
        | Action::IssueBlocked
        | Action::IssueRejected
        | Action::IssueConflict
        | Action::IssueNeedsReview
        | Action::PaymentApplied
        | Action::PaymentReversed
        | Action::Paid => {
            return match reason {
                None => Ok(None),
                Some(_) => Err(FieldError::plain(
                    "reason",
                    "unknown_field",
                    format!("`{action}` takes no `reason`; leave it out"),
                )),
            };
        }
    };
    match reason {
        None if required => Err(FieldError::plain(
            "reason",
            "required",
            format!(
                "`reason` is required to {}: say why in 1–{MAX_REASON_CHARS} characters, so the \
                 agent and the audit trail know",
                verb(action)
            ),
        )),
        None => Ok(None),
        Some(text) => {
            let len = text.chars().count();
            if let Some(found) = unclean(text, Lines::Many) {
                Err(unclean_error("reason", found))
            } else if len > MAX_REASON_CHARS {
                Err(FieldError::plain(
                    "reason",
                    "too_long",
                    format!(
                        "`reason` must be at most {MAX_REASON_CHARS} characters (got {len}); \
                         shorten it"
                    ),
                ))
            } else {
                Ok(Some(text.to_owned()))
            }
        }
    }
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Reject => "reject an invoice",
        Action::RequestChanges => "request changes",
        Action::Cancel => "cancel an invoice",
        _ => action.as_str(),
    }
}

/// The decision already stored for the named revision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExistingDecision {
    pub approver_id: Uuid,
    pub kind: DecisionKind,
    pub payload_hash: String,
}

/// Everything [`decide`] needs, loaded by the app after locking the invoice and the destination.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DecideFacts {
    pub kind: DecisionKind,
    pub approver_id: Uuid,
    /// The revision named in the request.
    pub revision_id: Uuid,
    /// The hash named in the request.
    pub payload_hash: String,
    /// The reason as sent (validated again here with [`validate_reason`]).
    pub reason: Option<String>,
    /// The decision stored for the named revision, if any.
    pub existing: Option<ExistingDecision>,
    /// The invoice's state, read under the lock.
    pub state: InvoiceState,
    /// Whether the named revision is a revision of this invoice.
    pub revision_of_invoice: bool,
    /// The invoice's current (highest-numbered) revision.
    pub current_revision_id: Uuid,
    pub current_payload_hash: String,
    /// Whether re-sealing the current revision reproduced its stored bytes and hash.
    pub reseal_matches: bool,
    /// Whether the current revision's destination is `active`, read under its lock.
    pub destination_active: bool,
}

/// What the app does after [`decide`] succeeds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DecideOutcome {
    /// Insert the decision, move the invoice to `to`, write one event.
    Apply {
        to: InvoiceState,
        kind: DecisionKind,
        /// The trimmed reason to store (and the event's note).
        reason: Option<String>,
    },
    /// The same approver already made the same decision on the same hash: write nothing.
    Replay,
}

/// Why a decision was refused.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum DecideError {
    /// The reason broke its rule (422 on `reason`); checked before anything is looked at.
    #[error("{}", .0.detail)]
    Reason(FieldError),
    #[error(
        "revision {revision_id} was already decided (`{existing}`); a decision is final and \
         covers only that revision: GET the invoice's decisions to see it, and decide again only \
         on a new revision"
    )]
    AlreadyDecided {
        revision_id: Uuid,
        existing: DecisionKind,
    },
    /// The invoice is not waiting for a decision.
    #[error(transparent)]
    InvalidTransition(#[from] InvalidTransition),
    /// The named revision is not the invoice's current one (or not one of its revisions).
    #[error(
        "revision {named} is not the current revision of this invoice; GET the invoice, review \
         current_revision and decide on current_revision.id ({current}) with its payload_hash"
    )]
    StaleRevision { named: Uuid, current: Uuid },
    #[error(
        "payload_hash `{}` is not the hash of the current revision: the payload you reviewed is \
         not the one that would be decided on; GET the invoice, review current_revision again \
         and send its payload_hash",
        echo(given)
    )]
    PayloadMismatch { given: String },
    #[error(
        "revision {revision_id} no longer matches its sealed payload: it was altered outside \
         Tauros, so no decision can be recorded on it; verify the invoice and report it to an \
         administrator"
    )]
    PayloadIntegrity { revision_id: Uuid },
    /// Approve only: the money would go to a retired destination.
    #[error(
        "the current revision pays to a payment destination that is no longer active, so it \
         cannot be approved; request changes instead so the agent revises it with an active \
         destination (rejecting stays possible)"
    )]
    DestinationInactive,
}

impl Coded for DecideError {
    fn code(&self) -> &'static str {
        match self {
            DecideError::Reason(_) => "validation_failed",
            DecideError::AlreadyDecided { .. } => "already_decided",
            DecideError::InvalidTransition(e) => e.code(),
            DecideError::StaleRevision { .. } => "stale_revision",
            DecideError::PayloadMismatch { .. } => "payload_mismatch",
            DecideError::PayloadIntegrity { .. } => "payload_integrity",
            DecideError::DestinationInactive => "destination_inactive",
        }
    }
}

/// The decide order of docs/contract/domain.md §5, steps 2–9 (locking is the app's), after the
/// reason (input, so before any fact); first failure wins. A replay ignores the reason. A
/// revision of another invoice neither replays nor reveals its decision: it is `stale_revision`.
pub fn decide(facts: DecideFacts) -> Result<DecideOutcome, DecideError> {
    let action = facts.kind.action();
    let reason = validate_reason(action, facts.reason.as_deref()).map_err(DecideError::Reason)?;

    if facts.revision_of_invoice
        && let Some(existing) = &facts.existing
    {
        return if existing.approver_id == facts.approver_id
            && existing.kind == facts.kind
            && existing.payload_hash == facts.payload_hash
        {
            Ok(DecideOutcome::Replay)
        } else {
            Err(DecideError::AlreadyDecided {
                revision_id: facts.revision_id,
                existing: existing.kind,
            })
        };
    }

    // The deciding commands have no state-only replay, so the bare table is the whole rule.
    let Some(to) = apply_target(action, facts.state) else {
        return Err(InvalidTransition {
            from: facts.state,
            action,
        }
        .into());
    };

    if !facts.revision_of_invoice || facts.revision_id != facts.current_revision_id {
        return Err(DecideError::StaleRevision {
            named: facts.revision_id,
            current: facts.current_revision_id,
        });
    }

    if facts.payload_hash != facts.current_payload_hash {
        return Err(DecideError::PayloadMismatch {
            given: facts.payload_hash,
        });
    }

    if !facts.reseal_matches {
        return Err(DecideError::PayloadIntegrity {
            revision_id: facts.current_revision_id,
        });
    }

    if facts.kind == DecisionKind::Approved && !facts.destination_active {
        return Err(DecideError::DestinationInactive);
    }

    Ok(DecideOutcome::Apply {
        to,
        kind: facts.kind,
        reason,
    })
}

/// What submit needs beyond the state, loaded under the invoice and destination locks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SubmitFacts {
    /// The invoice's state, read under the lock.
    pub state: InvoiceState,
    /// The decision stored on the current revision, if any (after request_changes there is one).
    pub current_decision: Option<DecisionKind>,
    pub destination_active: bool,
}

/// Why a submit was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
pub enum SubmitError {
    #[error(transparent)]
    InvalidTransition(#[from] InvalidTransition),
    #[error(
        "the current revision was already decided (`{decision}`); revise the invoice (a new \
         revision) before submitting it again"
    )]
    RevisionAlreadyDecided { decision: DecisionKind },
    #[error(
        "the current revision pays to a payment destination that is no longer active; revise \
         the invoice with an active payment_destination_id before submitting"
    )]
    DestinationInactive,
}

impl Coded for SubmitError {
    fn code(&self) -> &'static str {
        match self {
            SubmitError::InvalidTransition(e) => e.code(),
            SubmitError::RevisionAlreadyDecided { .. } => "revision_already_decided",
            SubmitError::DestinationInactive => "destination_inactive",
        }
    }
}

/// Submit with its extra rules, after the transition (already pending replays before any other
/// check, so a retry always succeeds).
pub fn submit_transition(facts: SubmitFacts) -> Result<Transition, SubmitError> {
    let planned = transition(Action::Submit, facts.state, None)?;
    if planned == Transition::Replay {
        return Ok(planned);
    }
    if let Some(decision) = facts.current_decision {
        return Err(SubmitError::RevisionAlreadyDecided { decision });
    }
    if !facts.destination_active {
        return Err(SubmitError::DestinationInactive);
    }
    Ok(planned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use InvoiceState::*;

    const HASH: &str = "a3f1c2d4e5b6a7980112233445566778899aabbccddeeff00112233445566778";
    const OTHER_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    fn approver() -> Uuid {
        Uuid::from_u128(7)
    }
    fn current() -> Uuid {
        Uuid::from_u128(100)
    }
    fn older() -> Uuid {
        Uuid::from_u128(99)
    }

    /// A decision that passes every check.
    fn facts(kind: DecisionKind) -> DecideFacts {
        DecideFacts {
            kind,
            approver_id: approver(),
            revision_id: current(),
            payload_hash: HASH.to_owned(),
            reason: Some("  looks right  ".to_owned()),
            existing: None,
            state: PendingApproval,
            revision_of_invoice: true,
            current_revision_id: current(),
            current_payload_hash: HASH.to_owned(),
            reseal_matches: true,
            destination_active: true,
        }
    }

    fn code(r: Result<DecideOutcome, DecideError>) -> Result<DecideOutcome, &'static str> {
        r.map_err(|e| e.code())
    }

    #[test]
    fn each_decision_applies_with_its_target() {
        for (kind, to) in [
            (DecisionKind::Approved, Approved),
            (DecisionKind::Rejected, Rejected),
            (DecisionKind::ChangesRequested, Draft),
        ] {
            assert_eq!(
                decide(facts(kind)),
                Ok(DecideOutcome::Apply {
                    to,
                    kind,
                    reason: Some("looks right".to_owned())
                })
            );
        }
    }

    #[test]
    fn same_approver_same_decision_same_hash_replays_whatever_the_state() {
        for state in [Approved, Rejected, Draft, PendingApproval, Cancelled] {
            for kind in DecisionKind::ALL {
                let f = DecideFacts {
                    existing: Some(ExistingDecision {
                        approver_id: approver(),
                        kind,
                        payload_hash: HASH.to_owned(),
                    }),
                    state,
                    // The reason is not compared, and the destination may have retired since.
                    reason: Some("worded differently".to_owned()),
                    destination_active: false,
                    ..facts(kind)
                };
                assert_eq!(decide(f), Ok(DecideOutcome::Replay), "{kind} in {state}");
            }
        }
    }

    #[test]
    fn anything_else_on_a_decided_revision_is_already_decided() {
        let stored = ExistingDecision {
            approver_id: approver(),
            kind: DecisionKind::Approved,
            payload_hash: HASH.to_owned(),
        };
        let variants = [
            // Another approver.
            ExistingDecision {
                approver_id: Uuid::from_u128(8),
                ..stored.clone()
            },
            // Another decision (approve racing reject: the loser).
            ExistingDecision {
                kind: DecisionKind::Rejected,
                ..stored.clone()
            },
            // Another hash.
            ExistingDecision {
                payload_hash: OTHER_HASH.to_owned(),
                ..stored
            },
        ];
        for existing in variants {
            let f = DecideFacts {
                existing: Some(existing.clone()),
                state: Approved,
                ..facts(DecisionKind::Approved)
            };
            assert_eq!(
                decide(f),
                Err(DecideError::AlreadyDecided {
                    revision_id: current(),
                    existing: existing.kind
                })
            );
        }
    }

    #[test]
    fn already_decided_beats_invalid_transition() {
        // Another approver's decision exists AND the state is approved.
        let f = DecideFacts {
            existing: Some(ExistingDecision {
                approver_id: Uuid::from_u128(8),
                kind: DecisionKind::Approved,
                payload_hash: HASH.to_owned(),
            }),
            state: Approved,
            ..facts(DecisionKind::Rejected)
        };
        assert_eq!(code(decide(f)), Err("already_decided"));
    }

    #[test]
    fn invalid_transition_beats_stale_revision() {
        let f = DecideFacts {
            state: Draft,
            revision_id: older(),
            payload_hash: OTHER_HASH.to_owned(),
            reseal_matches: false,
            destination_active: false,
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(
            decide(f),
            Err(DecideError::InvalidTransition(InvalidTransition {
                from: Draft,
                action: Action::Approve
            }))
        );
    }

    #[test]
    fn stale_revision_beats_payload_mismatch() {
        let f = DecideFacts {
            revision_id: older(),
            payload_hash: OTHER_HASH.to_owned(),
            reseal_matches: false,
            destination_active: false,
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(
            decide(f),
            Err(DecideError::StaleRevision {
                named: older(),
                current: current()
            })
        );
    }

    #[test]
    fn payload_mismatch_beats_integrity() {
        let f = DecideFacts {
            payload_hash: OTHER_HASH.to_owned(),
            reseal_matches: false,
            destination_active: false,
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(code(decide(f)), Err("payload_mismatch"));
    }

    #[test]
    fn integrity_beats_destination_inactive() {
        let f = DecideFacts {
            reseal_matches: false,
            destination_active: false,
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(
            decide(f),
            Err(DecideError::PayloadIntegrity {
                revision_id: current()
            })
        );
    }

    #[test]
    fn inactive_destination_blocks_approve_only() {
        let inactive = |kind| DecideFacts {
            destination_active: false,
            ..facts(kind)
        };
        assert_eq!(
            code(decide(inactive(DecisionKind::Approved))),
            Err("destination_inactive")
        );
        assert!(matches!(
            decide(inactive(DecisionKind::Rejected)),
            Ok(DecideOutcome::Apply { to: Rejected, .. })
        ));
        assert!(matches!(
            decide(inactive(DecisionKind::ChangesRequested)),
            Ok(DecideOutcome::Apply { to: Draft, .. })
        ));
    }

    #[test]
    fn a_revision_of_another_invoice_is_stale_and_its_decision_is_ignored() {
        let foreign = Uuid::from_u128(555);
        // Even a decision that would "replay" on the foreign revision does not count.
        let f = DecideFacts {
            revision_id: foreign,
            revision_of_invoice: false,
            existing: Some(ExistingDecision {
                approver_id: approver(),
                kind: DecisionKind::Approved,
                payload_hash: HASH.to_owned(),
            }),
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(
            decide(f),
            Err(DecideError::StaleRevision {
                named: foreign,
                current: current()
            })
        );
        // And an id that equals the current one but is flagged foreign is still stale: the
        // flag is the app's word that the lookup was scoped to this invoice.
        let f = DecideFacts {
            revision_of_invoice: false,
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(code(decide(f)), Err("stale_revision"));
    }

    #[test]
    fn the_reason_is_checked_first() {
        // Missing reason on reject, on a decided revision of an approved invoice: 422 first.
        let f = DecideFacts {
            reason: Some("   ".to_owned()),
            existing: Some(ExistingDecision {
                approver_id: Uuid::from_u128(8),
                kind: DecisionKind::Approved,
                payload_hash: HASH.to_owned(),
            }),
            state: Approved,
            ..facts(DecisionKind::Rejected)
        };
        let err = decide(f).unwrap_err();
        assert_eq!(err.code(), "validation_failed");
        let DecideError::Reason(field) = err else {
            panic!("not a reason error");
        };
        assert_eq!((field.field.as_str(), field.code), ("reason", "required"));
    }

    #[test]
    fn approve_without_reason_stores_none() {
        let f = DecideFacts {
            reason: None,
            ..facts(DecisionKind::Approved)
        };
        assert_eq!(
            decide(f),
            Ok(DecideOutcome::Apply {
                to: Approved,
                kind: DecisionKind::Approved,
                reason: None
            })
        );
    }

    #[test]
    fn reason_rules() {
        let long = "é".repeat(MAX_REASON_CHARS);
        let too_long = "é".repeat(MAX_REASON_CHARS + 1);
        let code = |r: Result<Option<String>, FieldError>| r.map_err(|e| (e.field, e.code));
        for action in [Action::Reject, Action::RequestChanges, Action::Cancel] {
            assert_eq!(
                code(validate_reason(action, None)),
                Err(("reason".to_owned(), "required"))
            );
            assert_eq!(
                code(validate_reason(action, Some(" \t\n "))),
                Err(("reason".to_owned(), "required"))
            );
            assert_eq!(
                code(validate_reason(action, Some(" wrong total "))),
                Ok(Some("wrong total".to_owned()))
            );
            // Counted in characters, not bytes; trimmed before counting.
            assert_eq!(
                code(validate_reason(action, Some(&format!("  {long}  ")))),
                Ok(Some(long.clone()))
            );
            assert_eq!(
                code(validate_reason(action, Some(&too_long))),
                Err(("reason".to_owned(), "too_long"))
            );
        }
        assert_eq!(code(validate_reason(Action::Approve, None)), Ok(None));
        assert_eq!(code(validate_reason(Action::Approve, Some("  "))), Ok(None));
        assert_eq!(
            code(validate_reason(Action::Approve, Some("ok"))),
            Ok(Some("ok".to_owned()))
        );
        assert_eq!(
            code(validate_reason(Action::Approve, Some(&too_long))),
            Err(("reason".to_owned(), "too_long"))
        );
        for action in [
            Action::CreateDraft,
            Action::Revise,
            Action::Submit,
            Action::Withdraw,
        ] {
            assert_eq!(code(validate_reason(action, None)), Ok(None));
            assert_eq!(
                code(validate_reason(action, Some("why"))),
                Err(("reason".to_owned(), "unknown_field"))
            );
        }
        let detail = validate_reason(Action::RequestChanges, None)
            .unwrap_err()
            .detail;
        assert!(detail.contains("request changes"), "{detail}");
    }

    #[test]
    fn sentences_tell_what_to_do() {
        let stale = DecideError::StaleRevision {
            named: older(),
            current: current(),
        }
        .to_string();
        assert!(stale.contains(&older().to_string()), "{stale}");
        assert!(stale.contains("current_revision.id"), "{stale}");
        assert!(stale.contains("payload_hash"), "{stale}");
        let mismatch = DecideError::PayloadMismatch {
            given: "x".repeat(5000),
        }
        .to_string();
        assert!(mismatch.len() < 400, "echo keeps it short: {mismatch}");
        assert!(
            DecideError::DestinationInactive
                .to_string()
                .contains("request changes instead")
        );
        assert_eq!(
            DecideError::AlreadyDecided {
                revision_id: current(),
                existing: DecisionKind::Rejected
            }
            .code(),
            "already_decided"
        );
    }

    fn submit_facts(state: InvoiceState) -> SubmitFacts {
        SubmitFacts {
            state,
            current_decision: None,
            destination_active: true,
        }
    }

    #[test]
    fn submit_moves_a_clean_draft() {
        assert_eq!(
            submit_transition(submit_facts(Draft)),
            Ok(Transition::Apply {
                to: PendingApproval
            })
        );
    }

    #[test]
    fn submit_on_pending_replays_before_the_extra_checks() {
        let f = SubmitFacts {
            current_decision: Some(DecisionKind::ChangesRequested),
            destination_active: false,
            ..submit_facts(PendingApproval)
        };
        assert_eq!(submit_transition(f), Ok(Transition::Replay));
    }

    #[test]
    fn submit_checks_in_order() {
        // Wrong state beats everything.
        let f = SubmitFacts {
            current_decision: Some(DecisionKind::Approved),
            destination_active: false,
            ..submit_facts(Approved)
        };
        assert_eq!(
            submit_transition(f),
            Err(SubmitError::InvalidTransition(InvalidTransition {
                from: Approved,
                action: Action::Submit
            }))
        );
        // A decided revision beats an inactive destination.
        let f = SubmitFacts {
            current_decision: Some(DecisionKind::ChangesRequested),
            destination_active: false,
            ..submit_facts(Draft)
        };
        let err = submit_transition(f).unwrap_err();
        assert_eq!(err.code(), "revision_already_decided");
        assert!(err.to_string().contains("revise the invoice"), "{err}");
        // Then the destination.
        let f = SubmitFacts {
            destination_active: false,
            ..submit_facts(Draft)
        };
        let err = submit_transition(f).unwrap_err();
        assert_eq!(err.code(), "destination_inactive");
        assert!(
            err.to_string().contains("active payment_destination_id"),
            "{err}"
        );
    }

    #[test]
    fn submit_from_every_other_state_is_invalid() {
        for state in InvoiceState::ALL {
            if matches!(state, Draft | PendingApproval) {
                continue;
            }
            assert_eq!(
                submit_transition(submit_facts(state)).map_err(|e| e.code()),
                Err("invalid_transition"),
                "{state}"
            );
        }
    }
}
