//! States, commands and the transition table of docs/contract/domain.md §5: the only definition
//! of the graph. The app asks [`transition`] with the state read under the invoice lock, never
//! the caller's copy, and writes nothing unless the answer is [`Transition::Apply`].

use std::fmt;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::error::Coded;

/// Where an invoice is in its lifecycle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvoiceState {
    /// Being written by its agent; not visible to the approval inbox.
    Draft,
    /// Submitted; waiting for an approver's decision.
    PendingApproval,
    /// Approved by a human; not yet issued.
    Approved,
    /// Issued to the customer (docs/contract/effects.md §3).
    Issued,
    /// Some, not all, of the total has been paid (docs/contract/effects.md §4).
    PartiallyPaid,
    /// Fully paid; final unless a confirmed payment is reversed (docs/contract/effects.md §4).
    Paid,
    /// Refused by an approver; final.
    Rejected,
    /// Withdrawn by its proposer or cancelled by an approver; final.
    Cancelled,
}

impl InvoiceState {
    /// Every state, in lifecycle order.
    pub const ALL: [InvoiceState; 8] = [
        InvoiceState::Draft,
        InvoiceState::PendingApproval,
        InvoiceState::Approved,
        InvoiceState::Issued,
        InvoiceState::PartiallyPaid,
        InvoiceState::Paid,
        InvoiceState::Rejected,
        InvoiceState::Cancelled,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            InvoiceState::Draft => "draft",
            InvoiceState::PendingApproval => "pending_approval",
            InvoiceState::Approved => "approved",
            InvoiceState::Issued => "issued",
            InvoiceState::PartiallyPaid => "partially_paid",
            InvoiceState::Paid => "paid",
            InvoiceState::Rejected => "rejected",
            InvoiceState::Cancelled => "cancelled",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<InvoiceState> {
        InvoiceState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
    }

    /// Whether no command can ever move the invoice again; a paid invoice moves back only by a
    /// reversal, which settlement records, not a command.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            InvoiceState::Paid | InvoiceState::Rejected | InvoiceState::Cancelled
        )
    }
}

impl fmt::Display for InvoiceState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An invoice command; the same names label the audit events. The `Issue*` outcomes and the
/// payment moves are recorded by Tauros, never a caller's command.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// The agent proposes a new invoice (revision 1).
    CreateDraft,
    /// The agent appends a revision; a pending invoice goes back to draft.
    Revise,
    /// The agent asks for a decision.
    Submit,
    /// The agent, or a human who sees it, abandons a not-yet-approved invoice.
    Withdraw,
    /// An approver accepts the current revision.
    Approve,
    /// An approver refuses the invoice for good.
    Reject,
    /// An approver sends the invoice back to its agent for a new revision.
    RequestChanges,
    /// An approver cancels an approved invoice before it is issued.
    Cancel,
    /// Numbered and issued (by the issuer job, or an approver when no issuer is configured).
    Issue,
    /// Issuing found the destination no longer active: the invoice stays approved, a human is told.
    IssueBlocked,
    /// The issuer refused definitively: still approved and numbered, to reissue or cancel.
    IssueRejected,
    /// The issuer holds another request under the key (e.g. after a restore): never finalised.
    IssueConflict,
    /// A stale claim the issuer holds nothing for: an approver checks, then reissues or cancels.
    IssueNeedsReview,
    /// Confirmed payments cover more of the total than before.
    PaymentApplied,
    /// Less of the total is covered than before (a reversal).
    PaymentReversed,
    /// Written right after the `payment_applied` that reached `paid` (paid → paid), so "paid" is
    /// an event of its own (the `invoice.paid` webhook).
    Paid,
}

impl Action {
    /// Every command.
    pub const ALL: [Action; 16] = [
        Action::CreateDraft,
        Action::Revise,
        Action::Submit,
        Action::Withdraw,
        Action::Approve,
        Action::Reject,
        Action::RequestChanges,
        Action::Cancel,
        Action::Issue,
        Action::IssueBlocked,
        Action::IssueRejected,
        Action::IssueConflict,
        Action::IssueNeedsReview,
        Action::PaymentApplied,
        Action::PaymentReversed,
        Action::Paid,
    ];

    /// The stored and serialized name (also the audit event's `action`).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::CreateDraft => "create_draft",
            Action::Revise => "revise",
            Action::Submit => "submit",
            Action::Withdraw => "withdraw",
            Action::Approve => "approve",
            Action::Reject => "reject",
            Action::RequestChanges => "request_changes",
            Action::Cancel => "cancel",
            Action::Issue => "issue",
            Action::IssueBlocked => "issue_blocked",
            Action::IssueRejected => "issue_rejected",
            Action::IssueConflict => "issue_conflict",
            Action::IssueNeedsReview => "issue_needs_review",
            Action::PaymentApplied => "payment_applied",
            Action::PaymentReversed => "payment_reversed",
            Action::Paid => "paid",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<Action> {
        Action::ALL.into_iter().find(|action| action.as_str() == s)
    }

    /// The decision this command records, for the three deciding commands only.
    pub fn decision_kind(self) -> Option<DecisionKind> {
        match self {
            Action::Approve => Some(DecisionKind::Approved),
            Action::Reject => Some(DecisionKind::Rejected),
            Action::RequestChanges => Some(DecisionKind::ChangesRequested),
            _ => None,
        }
    }

    /// Whether settlement records it: the invoice's paid state follows the confirmed payments.
    pub fn is_settlement(self) -> bool {
        matches!(
            self,
            Action::PaymentApplied | Action::PaymentReversed | Action::Paid
        )
    }

    /// Whether only a human approver may run it (separation of duties, docs/contract/domain.md §1).
    pub fn is_authority(self) -> bool {
        matches!(
            self,
            Action::Approve
                | Action::Reject
                | Action::RequestChanges
                | Action::Cancel
                | Action::Issue
                | Action::IssueBlocked
                | Action::IssueRejected
                | Action::IssueConflict
                | Action::IssueNeedsReview
        )
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What an approver decided about one revision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecisionKind {
    /// The revision may be issued.
    Approved,
    /// The invoice is refused for good.
    Rejected,
    /// The agent must revise before submitting again.
    ChangesRequested,
}

impl DecisionKind {
    /// Every decision.
    pub const ALL: [DecisionKind; 3] = [
        DecisionKind::Approved,
        DecisionKind::Rejected,
        DecisionKind::ChangesRequested,
    ];

    /// The stored and serialized name.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Approved => "approved",
            DecisionKind::Rejected => "rejected",
            DecisionKind::ChangesRequested => "changes_requested",
        }
    }

    /// Parses the stored name.
    pub fn parse(s: &str) -> Option<DecisionKind> {
        DecisionKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == s)
    }

    /// The command that records this decision (the inverse of [`Action::decision_kind`]).
    pub fn action(self) -> Action {
        match self {
            DecisionKind::Approved => Action::Approve,
            DecisionKind::Rejected => Action::Reject,
            DecisionKind::ChangesRequested => Action::RequestChanges,
        }
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a legal command does to the invoice's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Move to `to`, and write the rows and the audit event.
    Apply { to: InvoiceState },
    /// The command's goal already holds: succeed, write nothing, record no event.
    Replay,
}

/// The command is not allowed from the invoice's current state (409 `invalid_transition`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error("`{action}` is not allowed while the invoice is `{from}`; {}", transition_hint(*action, *from))]
pub struct InvalidTransition {
    /// The state read under the lock (the problem body's `from`).
    pub from: InvoiceState,
    /// The refused command (the problem body's `action`).
    pub action: Action,
}

impl Coded for InvalidTransition {
    fn code(&self) -> &'static str {
        "invalid_transition"
    }
}

/// Cancelling a numbered invoice while it is issuing is refused (409 `issue_in_progress`): the
/// peer may already hold it, and of cancel and issue exactly one wins, under the row lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Error)]
#[error(
    "issuing of this invoice has started (it has its number, and the issuer may already hold \
     it), so it cannot be cancelled while it runs: wait for its issue job (the invoice's \
     `issuing.job_id`, GET /v1/jobs/{{id}}). If issuing stops for a human (`issuing.status` \
     rejected, conflict or needs_review) it can be cancelled then; once issued, settle or \
     credit it with the customer"
)]
pub struct IssuingStarted;

impl Coded for IssuingStarted {
    fn code(&self) -> &'static str {
        "issue_in_progress"
    }
}

/// Whether `action` may still apply to an approved invoice; once issuing stopped for a human it
/// may be cancelled, the number staying on the cancelled invoice, void.
pub fn check_issuing(
    action: Action,
    numbered: bool,
    awaits_human: bool,
) -> Result<(), IssuingStarted> {
    if action == Action::Cancel && numbered && !awaits_human {
        Err(IssuingStarted)
    } else {
        Ok(())
    }
}

/// The second half of the sentence: what the caller can do instead.
fn transition_hint(action: Action, from: InvoiceState) -> String {
    match (action, from) {
        (Action::CreateDraft, _) => {
            "this invoice already exists: change it with `revise`, or create a new invoice with a \
             new idempotency key"
                .to_owned()
        }
        (Action::Withdraw, InvoiceState::Cancelled) => {
            "it was cancelled by an approver, not withdrawn; nothing is left to do".to_owned()
        }
        (Action::Cancel, InvoiceState::Cancelled) => {
            "it was withdrawn by its proposer, not cancelled; nothing is left to do".to_owned()
        }
        (Action::Withdraw | Action::Revise, InvoiceState::Approved) => {
            "an approved invoice can only be cancelled by an approver".to_owned()
        }
        (_, InvoiceState::Rejected | InvoiceState::Cancelled) => {
            "that state is final: create a new invoice (with a new idempotency key) instead"
                .to_owned()
        }
        (Action::PaymentApplied | Action::PaymentReversed | Action::Paid, _) => {
            "settlement moves an invoice only once it is issued, and only as far as its \
             confirmed payments reach"
                .to_owned()
        }
        (_, InvoiceState::Paid) => "a paid invoice is final".to_owned(),
        _ => {
            let states: Vec<String> = InvoiceState::ALL
                .into_iter()
                .filter(|state| apply_target(action, *state).is_some())
                .map(|state| format!("`{state}`"))
                .collect();
            format!(
                "it needs the invoice to be {}; GET the invoice to see its current state",
                states.join(" or ")
            )
        }
    }
}

/// The graph of docs/contract/domain.md §5 and docs/contract/effects.md §3–§4, replays aside. A
/// command has one target; a settlement move has two, as the amount paid decides where it lands.
fn targets(action: Action, from: InvoiceState) -> &'static [InvoiceState] {
    use InvoiceState::{
        Approved, Cancelled, Draft, Issued, Paid, PartiallyPaid, PendingApproval, Rejected,
    };
    match (action, from) {
        (Action::Revise, Draft | PendingApproval) => &[Draft],
        (Action::Submit, Draft) => &[PendingApproval],
        (Action::Withdraw, Draft | PendingApproval) => &[Cancelled],
        (Action::Approve, PendingApproval) => &[Approved],
        (Action::Reject, PendingApproval) => &[Rejected],
        (Action::RequestChanges, PendingApproval) => &[Draft],
        (Action::Cancel, Approved) => &[Cancelled],
        (Action::Issue, Approved) => &[Issued],
        (
            Action::IssueBlocked
            | Action::IssueRejected
            | Action::IssueConflict
            | Action::IssueNeedsReview,
            Approved,
        ) => &[Approved],
        (Action::PaymentApplied, Issued | PartiallyPaid) => &[PartiallyPaid, Paid],
        (Action::PaymentReversed, PartiallyPaid | Paid) => &[Issued, PartiallyPaid],
        (Action::Paid, Paid) => &[Paid],
        _ => &[],
    }
}

/// The state a legal command moves to, replays aside (shared with the decide order).
pub(super) fn apply_target(action: Action, from: InvoiceState) -> Option<InvoiceState> {
    // Settlement moves are never commands, even where the graph has one target (`paid`).
    if action.is_settlement() {
        return None;
    }
    match targets(action, from) {
        [to] => Some(*to),
        _ => None,
    }
}

/// A settlement move (docs/contract/effects.md §4) to `to`, the state the amount paid decided:
/// refused unless the graph has exactly that move; it never replays.
pub fn settle(
    action: Action,
    from: InvoiceState,
    to: InvoiceState,
) -> Result<Transition, InvalidTransition> {
    if action.is_settlement() && targets(action, from).contains(&to) {
        Ok(Transition::Apply { to })
    } else {
        Err(InvalidTransition { from, action })
    }
}

/// Decides a command against the invoice's current state (read under the lock). A cancel or
/// withdraw replays only for the command in `cancelled_by`; without one, nothing replays, as
/// guessing would let one pass for the other. `create_draft` is always refused here
/// (its replay is an idempotency-key match), and the deciding commands' replays are `decide`'s.
pub fn transition(
    action: Action,
    from: InvoiceState,
    cancelled_by: Option<Action>,
) -> Result<Transition, InvalidTransition> {
    if let Some(to) = apply_target(action, from) {
        return Ok(Transition::Apply { to });
    }
    let replay = match (action, from) {
        (Action::Submit, InvoiceState::PendingApproval) => true,
        // Issued is issued, however it got there.
        (
            Action::Issue,
            InvoiceState::Issued | InvoiceState::PartiallyPaid | InvoiceState::Paid,
        ) => true,
        (Action::Withdraw | Action::Cancel, InvoiceState::Cancelled) => {
            cancelled_by == Some(action)
        }
        _ => false,
    };
    if replay {
        Ok(Transition::Replay)
    } else {
        Err(InvalidTransition { from, action })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use InvoiceState::*;

    #[test]
    fn names_round_trip_and_match_serde() {
        for state in InvoiceState::ALL {
            assert_eq!(InvoiceState::parse(state.as_str()), Some(state));
            let json = serde_json::to_string(&state).unwrap();
            assert_eq!(json, format!("\"{}\"", state.as_str()));
            assert_eq!(serde_json::from_str::<InvoiceState>(&json).unwrap(), state);
        }
        for action in Action::ALL {
            assert_eq!(Action::parse(action.as_str()), Some(action));
            let json = serde_json::to_string(&action).unwrap();
            assert_eq!(json, format!("\"{}\"", action.as_str()));
        }
        for kind in DecisionKind::ALL {
            assert_eq!(DecisionKind::parse(kind.as_str()), Some(kind));
            assert_eq!(kind.action().decision_kind(), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(InvoiceState::parse("Draft"), None);
        assert_eq!(InvoiceState::parse("pending"), None);
        assert_eq!(Action::parse("submit_for_approval"), None);
        assert_eq!(DecisionKind::parse("approve"), None);
    }

    #[test]
    fn exact_names() {
        let states: Vec<&str> = InvoiceState::ALL.iter().map(|s| s.as_str()).collect();
        assert_eq!(
            states,
            [
                "draft",
                "pending_approval",
                "approved",
                "issued",
                "partially_paid",
                "paid",
                "rejected",
                "cancelled"
            ]
        );
        let actions: Vec<&str> = Action::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(
            actions,
            [
                "create_draft",
                "revise",
                "submit",
                "withdraw",
                "approve",
                "reject",
                "request_changes",
                "cancel",
                "issue",
                "issue_blocked",
                "issue_rejected",
                "issue_conflict",
                "issue_needs_review",
                "payment_applied",
                "payment_reversed",
                "paid"
            ]
        );
    }

    #[test]
    fn terminal_states() {
        let terminal: Vec<InvoiceState> = InvoiceState::ALL
            .into_iter()
            .filter(|s| s.is_terminal())
            .collect();
        assert_eq!(terminal, [Paid, Rejected, Cancelled]);
    }

    #[test]
    fn decision_kinds_of_actions() {
        assert_eq!(
            Action::Approve.decision_kind(),
            Some(DecisionKind::Approved)
        );
        assert_eq!(Action::Reject.decision_kind(), Some(DecisionKind::Rejected));
        assert_eq!(
            Action::RequestChanges.decision_kind(),
            Some(DecisionKind::ChangesRequested)
        );
        for action in [
            Action::CreateDraft,
            Action::Revise,
            Action::Submit,
            Action::Withdraw,
            Action::Cancel,
            Action::Issue,
            Action::IssueBlocked,
            Action::IssueRejected,
            Action::IssueConflict,
            Action::IssueNeedsReview,
            Action::PaymentApplied,
            Action::PaymentReversed,
            Action::Paid,
        ] {
            assert_eq!(action.decision_kind(), None, "{action}");
        }
        let settlement: Vec<Action> = Action::ALL
            .into_iter()
            .filter(|a| a.is_settlement())
            .collect();
        assert_eq!(
            settlement,
            [
                Action::PaymentApplied,
                Action::PaymentReversed,
                Action::Paid
            ]
        );
        let authority: Vec<Action> = Action::ALL
            .into_iter()
            .filter(|a| a.is_authority())
            .collect();
        assert_eq!(
            authority,
            [
                Action::Approve,
                Action::Reject,
                Action::RequestChanges,
                Action::Cancel,
                Action::Issue,
                Action::IssueBlocked,
                Action::IssueRejected,
                Action::IssueConflict,
                Action::IssueNeedsReview
            ]
        );
    }

    /// Every (action, state) pair that moves (domain.md §5, effects.md §3); all else is refused.
    const LEGAL: [(Action, InvoiceState, InvoiceState); 14] = [
        (Action::Revise, Draft, Draft),
        (Action::Revise, PendingApproval, Draft),
        (Action::Submit, Draft, PendingApproval),
        (Action::Withdraw, Draft, Cancelled),
        (Action::Withdraw, PendingApproval, Cancelled),
        (Action::Approve, PendingApproval, Approved),
        (Action::Reject, PendingApproval, Rejected),
        (Action::RequestChanges, PendingApproval, Draft),
        (Action::Cancel, Approved, Cancelled),
        (Action::Issue, Approved, Issued),
        (Action::IssueBlocked, Approved, Approved),
        (Action::IssueRejected, Approved, Approved),
        (Action::IssueConflict, Approved, Approved),
        (Action::IssueNeedsReview, Approved, Approved),
    ];

    /// Every settlement move effects.md §4 allows; nothing else, never through `transition`.
    const SETTLEMENT: [(Action, InvoiceState, InvoiceState); 9] = [
        (Action::PaymentApplied, Issued, PartiallyPaid),
        (Action::PaymentApplied, Issued, Paid),
        (Action::PaymentApplied, PartiallyPaid, PartiallyPaid),
        (Action::PaymentApplied, PartiallyPaid, Paid),
        (Action::PaymentReversed, Paid, PartiallyPaid),
        (Action::PaymentReversed, Paid, Issued),
        (Action::PaymentReversed, PartiallyPaid, PartiallyPaid),
        (Action::PaymentReversed, PartiallyPaid, Issued),
        (Action::Paid, Paid, Paid),
    ];

    /// The replays that the state alone decides (plus `cancelled_by`).
    const REPLAYS: [(Action, InvoiceState, Option<Action>); 7] = [
        (Action::Submit, PendingApproval, None),
        (Action::Submit, PendingApproval, Some(Action::Withdraw)),
        (Action::Withdraw, Cancelled, Some(Action::Withdraw)),
        (Action::Cancel, Cancelled, Some(Action::Cancel)),
        (Action::Issue, Issued, None),
        (Action::Issue, PartiallyPaid, None),
        (Action::Issue, Paid, None),
    ];

    #[test]
    fn every_row_of_the_table_applies() {
        for (action, from, to) in LEGAL {
            for cancelled_by in [None, Some(Action::Withdraw), Some(Action::Cancel)] {
                assert_eq!(
                    transition(action, from, cancelled_by),
                    Ok(Transition::Apply { to }),
                    "{action} from {from}"
                );
            }
        }
    }

    #[test]
    fn every_other_pair_is_refused_or_a_replay() {
        let by_values = [None, Some(Action::Withdraw), Some(Action::Cancel)];
        let mut refused = 0;
        for action in Action::ALL {
            for from in InvoiceState::ALL {
                for cancelled_by in by_values {
                    let legal = LEGAL.iter().any(|(a, f, _)| *a == action && *f == from);
                    let replay = REPLAYS.iter().any(|(a, f, by)| {
                        *a == action
                            && *f == from
                            && (matches!(*a, Action::Submit | Action::Issue) || *by == cancelled_by)
                    });
                    let got = transition(action, from, cancelled_by);
                    if legal {
                        assert!(matches!(got, Ok(Transition::Apply { .. })));
                    } else if replay {
                        assert_eq!(got, Ok(Transition::Replay), "{action} from {from}");
                    } else {
                        assert_eq!(
                            got,
                            Err(InvalidTransition { from, action }),
                            "{action} from {from} by {cancelled_by:?}"
                        );
                        refused += 1;
                    }
                }
            }
        }
        // 16 actions × 8 states × 3 = 384 cases; 14 legal pairs × 3, 1 submit replay × 3,
        // 3 issue replays × 3, withdraw and cancel replay once each. Settlement moves (and
        // `paid`) are never commands: `transition` refuses them everywhere.
        assert_eq!(refused, 384 - 42 - 3 - 9 - 2);
    }

    #[test]
    fn settlement_moves_are_exactly_the_table() {
        let mut allowed = 0;
        for action in Action::ALL {
            for from in InvoiceState::ALL {
                for to in InvoiceState::ALL {
                    let legal = SETTLEMENT.contains(&(action, from, to));
                    let got = settle(action, from, to);
                    if legal {
                        assert_eq!(got, Ok(Transition::Apply { to }), "{action} {from} → {to}");
                        allowed += 1;
                    } else {
                        assert_eq!(
                            got,
                            Err(InvalidTransition { from, action }),
                            "{action} {from} → {to}"
                        );
                    }
                }
            }
        }
        assert_eq!(allowed, SETTLEMENT.len());
        // A settlement move stays within the states a payment can reach.
        for (_, from, to) in SETTLEMENT {
            for state in [from, to] {
                assert!(matches!(state, Issued | PartiallyPaid | Paid), "{state}");
            }
        }
        let text = settle(Action::PaymentApplied, Approved, Paid)
            .unwrap_err()
            .to_string();
        assert!(text.contains("only once it is issued"), "{text}");
    }

    #[test]
    fn submit_on_pending_is_a_replay() {
        assert_eq!(
            transition(Action::Submit, PendingApproval, None),
            Ok(Transition::Replay)
        );
    }

    #[test]
    fn withdraw_replays_only_a_withdrawal() {
        assert_eq!(
            transition(Action::Withdraw, Cancelled, Some(Action::Withdraw)),
            Ok(Transition::Replay)
        );
        assert_eq!(
            transition(Action::Withdraw, Cancelled, Some(Action::Cancel)),
            Err(InvalidTransition {
                from: Cancelled,
                action: Action::Withdraw
            })
        );
        assert_eq!(
            transition(Action::Withdraw, Cancelled, None),
            Err(InvalidTransition {
                from: Cancelled,
                action: Action::Withdraw
            })
        );
    }

    #[test]
    fn cancel_replays_only_a_cancellation() {
        assert_eq!(
            transition(Action::Cancel, Cancelled, Some(Action::Cancel)),
            Ok(Transition::Replay)
        );
        assert_eq!(
            transition(Action::Cancel, Cancelled, Some(Action::Withdraw)),
            Err(InvalidTransition {
                from: Cancelled,
                action: Action::Cancel
            })
        );
        assert_eq!(
            transition(Action::Cancel, Cancelled, None),
            Err(InvalidTransition {
                from: Cancelled,
                action: Action::Cancel
            })
        );
    }

    #[test]
    fn deciding_commands_never_replay_on_state_alone() {
        for action in [Action::Approve, Action::Reject, Action::RequestChanges] {
            for from in [Approved, Rejected, Draft, Cancelled] {
                assert_eq!(
                    transition(action, from, Some(action)),
                    Err(InvalidTransition { from, action })
                );
            }
        }
    }

    #[test]
    fn create_draft_is_never_a_transition() {
        for from in InvoiceState::ALL {
            assert_eq!(
                transition(Action::CreateDraft, from, None),
                Err(InvalidTransition {
                    from,
                    action: Action::CreateDraft
                })
            );
        }
    }

    #[test]
    fn terminal_states_refuse_everything_but_their_own_replay() {
        for from in InvoiceState::ALL.into_iter().filter(|s| s.is_terminal()) {
            for action in Action::ALL {
                if let Ok(Transition::Apply { to }) = transition(action, from, None) {
                    panic!("{action} moved a {from} invoice to {to}");
                }
            }
        }
    }

    #[test]
    fn the_error_sentence_and_code() {
        let err = transition(Action::Approve, Draft, None).unwrap_err();
        assert_eq!(err.code(), "invalid_transition");
        let text = err.to_string();
        assert!(
            text.starts_with("`approve` is not allowed while the invoice is `draft`; "),
            "{text}"
        );
        assert!(text.contains("`pending_approval`"), "{text}");

        let text = transition(Action::Withdraw, Approved, None)
            .unwrap_err()
            .to_string();
        assert!(text.contains("only be cancelled by an approver"), "{text}");

        let text = transition(Action::Submit, Rejected, None)
            .unwrap_err()
            .to_string();
        assert!(text.contains("create a new invoice"), "{text}");

        let text = transition(Action::Withdraw, Cancelled, Some(Action::Cancel))
            .unwrap_err()
            .to_string();
        assert!(text.contains("cancelled by an approver"), "{text}");

        let text = transition(Action::Revise, Issued, None)
            .unwrap_err()
            .to_string();
        assert!(text.contains("`draft` or `pending_approval`"), "{text}");
    }
}
