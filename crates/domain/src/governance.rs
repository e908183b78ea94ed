//! Separation of duties one person cannot undo (docs/contract/api.md, "Sessions and humans"):
//! while `four_eyes` is on, what would undo it is a **proposal** a *different* approver confirms.
//! The machine's operator can still change settings from the command line, not through here.

use super::error::Coded;
use super::identity::Role;
use chrono::{DateTime, Duration, Utc};
use uuid::Uuid;

/// How long a proposal may be confirmed: it is about the organisation as it was, so it lapses.
pub const PROPOSAL_TTL_DAYS: i64 = 7;

/// When a proposal made at `now` lapses.
pub fn proposal_expiry(now: DateTime<Utc>) -> DateTime<Utc> {
    now + Duration::days(PROPOSAL_TTL_DAYS)
}

/// What a proposal asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// New organisation settings (a `PATCH /v1/organisation` that turns `four_eyes` off).
    Settings,
    /// Inviting a human while `four_eyes` is on; `role` says which (named before operators were).
    ApproverInvitation,
    /// Resolving a payment by hand (`POST /v1/payments/{id}/resolve`) while `four_eyes` is on.
    PaymentResolution,
    /// Creating an agent with `settlement` while `four_eyes` is on. Confirmed, it is the
    /// proposer's, keyless until they rotate one (so the confirming approver never sees it).
    SettlementAgent,
    /// Deactivating an approver while `four_eyes` is on; the one it deactivates never decides.
    ApproverDeactivation,
}

/// Where a proposal stands; `expired` is computed from a pending one, never stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeState {
    Pending,
    Confirmed,
    Rejected,
    Expired,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 5] = [
        ChangeKind::Settings,
        ChangeKind::ApproverInvitation,
        ChangeKind::PaymentResolution,
        ChangeKind::SettlementAgent,
        ChangeKind::ApproverDeactivation,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeKind::Settings => "settings",
            ChangeKind::ApproverInvitation => "approver_invitation",
            ChangeKind::PaymentResolution => "payment_resolution",
            ChangeKind::SettlementAgent => "settlement_agent",
            ChangeKind::ApproverDeactivation => "approver_deactivation",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeKind> {
        ChangeKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl ChangeState {
    pub const ALL: [ChangeState; 4] = [
        ChangeState::Pending,
        ChangeState::Confirmed,
        ChangeState::Rejected,
        ChangeState::Expired,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ChangeState::Pending => "pending",
            ChangeState::Confirmed => "confirmed",
            ChangeState::Rejected => "rejected",
            ChangeState::Expired => "expired",
        }
    }

    pub fn parse(s: &str) -> Option<ChangeState> {
        ChangeState::ALL.into_iter().find(|k| k.as_str() == s)
    }

    /// A filter on the state a caller sees, as stored rows: the stored state, and whether the
    /// proposal must have lapsed (`Some(true)`), must not have (`Some(false)`), or either.
    pub fn stored_filter(self) -> (ChangeState, Option<bool>) {
        match self {
            ChangeState::Pending => (ChangeState::Pending, Some(false)),
            ChangeState::Expired => (ChangeState::Pending, Some(true)),
            decided => (decided, None),
        }
    }

    /// The state a caller sees: a pending proposal past `expires_at` has lapsed.
    pub fn seen(self, expires_at: DateTime<Utc>, now: DateTime<Utc>) -> ChangeState {
        if self == ChangeState::Pending && expires_at <= now {
            ChangeState::Expired
        } else {
            self
        }
    }
}

/// The organisation's two settings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub four_eyes: bool,
    pub shared_review: bool,
}

/// A settings request: `None` keeps the current value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SettingsRequest {
    pub four_eyes: Option<bool>,
    pub shared_review: Option<bool>,
}

impl SettingsRequest {
    /// The settings this request leads to from `current`.
    pub fn applied_to(self, current: Settings) -> Settings {
        Settings {
            four_eyes: self.four_eyes.unwrap_or(current.four_eyes),
            shared_review: self.shared_review.unwrap_or(current.shared_review),
        }
    }
}

/// What an approver's settings request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettingsOutcome {
    /// Nothing would change: answer the settings, write nothing.
    Unchanged,
    /// Change at once.
    Apply(Settings),
    /// Turning `four_eyes` off while it is on: the whole request waits for a second approver.
    Propose,
}

/// The rule for `PATCH /v1/organisation`.
pub fn settings_request(current: Settings, request: SettingsRequest) -> SettingsOutcome {
    let next = request.applied_to(current);
    if next == current {
        SettingsOutcome::Unchanged
    } else if current.four_eyes && !next.four_eyes {
        SettingsOutcome::Propose
    } else {
        SettingsOutcome::Apply(next)
    }
}

/// Whether inviting a human needs a second approver: whenever `four_eyes` is on, whatever the
/// role. Four eyes keys on an agent's owner, so an operator account the inviter controls would
/// let them approve (with `shared_review`) invoices of an agent theirs in all but name.
pub fn invitation_needs_confirmation(current: Settings) -> bool {
    current.four_eyes
}

/// Whether granting `settlement` needs a second approver (who may grant it: `grantable_by`).
pub fn settlement_grant_needs_confirmation(current: Settings) -> bool {
    current.four_eyes
}

/// Whether deactivating a human of `role` needs a second approver: an approver while
/// `four_eyes` is on (else one could remove every other); an operator decides nothing.
pub fn deactivation_needs_confirmation(current: Settings, role: Role) -> bool {
    current.four_eyes && role == Role::Approver
}

/// A stored proposal, as the rules read it.
#[derive(Clone, Copy, Debug)]
pub struct Proposal {
    pub proposed_by: Uuid,
    /// The human a proposal is about (`approver_deactivation`): they may not decide it.
    pub subject: Option<Uuid>,
    pub state: ChangeState,
    pub decided_by: Option<Uuid>,
    pub expires_at: DateTime<Utc>,
}

/// What a confirm or reject does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resolution {
    /// Move the proposal to this state and (for a confirm) apply it.
    Apply(ChangeState),
    /// The goal already holds, decided by the same approver: answer it, write nothing.
    Replay,
}

/// Why a confirm or reject is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ResolutionError {
    #[error(
        "a proposal must be confirmed by a different approver than the one who made it; ask \
         another approver to confirm it, or reject it to withdraw it"
    )]
    SameApprover,
    #[error(
        "this proposal deactivates you, so you may neither confirm nor reject it; another \
         approver decides it"
    )]
    Subject,
    #[error("this proposal was already {0}; GET it to see who decided it")]
    Decided(&'static str),
    #[error(
        "this proposal expired (proposals may be confirmed for 7 days); make the request again \
         to propose it anew"
    )]
    Expired,
}

impl Coded for ResolutionError {
    fn code(&self) -> &'static str {
        match self {
            ResolutionError::SameApprover | ResolutionError::Subject => "four_eyes_required",
            ResolutionError::Decided(_) => "change_decided",
            ResolutionError::Expired => "change_expired",
        }
    }
}

/// The rule for `POST /v1/organisation/changes/{id}/confirm` (`goal = Confirmed`) and `…/reject`.
/// A proposer may reject (withdraw) but not confirm; the subject decides neither way (a rejection
/// would keep them in place); a lapsed proposal can only be rejected.
pub fn resolve(
    proposal: Proposal,
    goal: ChangeState,
    by: Uuid,
    now: DateTime<Utc>,
) -> Result<Resolution, ResolutionError> {
    match proposal.state {
        ChangeState::Pending | ChangeState::Expired if proposal.subject == Some(by) => {
            Err(ResolutionError::Subject)
        }
        ChangeState::Pending | ChangeState::Expired => {
            if goal == ChangeState::Confirmed {
                if proposal.proposed_by == by {
                    return Err(ResolutionError::SameApprover);
                }
                if proposal.state.seen(proposal.expires_at, now) == ChangeState::Expired {
                    return Err(ResolutionError::Expired);
                }
            }
            Ok(Resolution::Apply(goal))
        }
        decided if decided == goal && proposal.decided_by == Some(by) => Ok(Resolution::Replay),
        decided => Err(ResolutionError::Decided(decided.as_str())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: Settings = Settings {
        four_eyes: true,
        shared_review: false,
    };
    const OFF: Settings = Settings {
        four_eyes: false,
        shared_review: false,
    };

    fn ask(four_eyes: Option<bool>, shared_review: Option<bool>) -> SettingsRequest {
        SettingsRequest {
            four_eyes,
            shared_review,
        }
    }

    #[test]
    fn turning_four_eyes_off_is_a_proposal_and_everything_else_is_immediate() {
        assert_eq!(
            settings_request(ON, ask(Some(false), None)),
            SettingsOutcome::Propose
        );
        // The whole request waits, shared_review included: one request, one answer.
        assert_eq!(
            settings_request(ON, ask(Some(false), Some(true))),
            SettingsOutcome::Propose
        );
        assert_eq!(
            settings_request(OFF, ask(Some(true), None)),
            SettingsOutcome::Apply(ON)
        );
        assert_eq!(
            settings_request(ON, ask(None, Some(true))),
            SettingsOutcome::Apply(Settings {
                four_eyes: true,
                shared_review: true
            })
        );
        assert_eq!(
            settings_request(ON, ask(Some(true), Some(false))),
            SettingsOutcome::Unchanged
        );
        assert_eq!(
            settings_request(OFF, ask(None, None)),
            SettingsOutcome::Unchanged
        );
    }

    #[test]
    fn every_invitation_under_four_eyes_needs_a_second_approver() {
        assert!(invitation_needs_confirmation(ON));
        assert!(!invitation_needs_confirmation(OFF));
        let shared = Settings {
            four_eyes: true,
            shared_review: true,
        };
        assert!(invitation_needs_confirmation(shared));
    }

    fn proposal(state: ChangeState, decided_by: Option<Uuid>) -> (Proposal, Uuid, DateTime<Utc>) {
        let now = Utc::now();
        let proposer = Uuid::now_v7();
        (
            Proposal {
                proposed_by: proposer,
                subject: None,
                state,
                decided_by,
                expires_at: proposal_expiry(now),
            },
            proposer,
            now,
        )
    }

    #[test]
    fn the_proposer_cannot_confirm_but_may_withdraw() {
        let (p, proposer, now) = proposal(ChangeState::Pending, None);
        assert_eq!(
            resolve(p, ChangeState::Confirmed, proposer, now),
            Err(ResolutionError::SameApprover)
        );
        assert_eq!(
            resolve(p, ChangeState::Rejected, proposer, now),
            Ok(Resolution::Apply(ChangeState::Rejected))
        );
        let other = Uuid::now_v7();
        assert_eq!(
            resolve(p, ChangeState::Confirmed, other, now),
            Ok(Resolution::Apply(ChangeState::Confirmed))
        );
    }

    #[test]
    fn the_approver_a_deactivation_removes_decides_it_neither_way() {
        let (mut p, _, now) = proposal(ChangeState::Pending, None);
        let subject = Uuid::now_v7();
        p.subject = Some(subject);
        for goal in [ChangeState::Confirmed, ChangeState::Rejected] {
            assert_eq!(
                resolve(p, goal, subject, now),
                Err(ResolutionError::Subject)
            );
        }
        let third = Uuid::now_v7();
        assert_eq!(
            resolve(p, ChangeState::Confirmed, third, now),
            Ok(Resolution::Apply(ChangeState::Confirmed))
        );
        assert!(deactivation_needs_confirmation(ON, Role::Approver));
        assert!(!deactivation_needs_confirmation(ON, Role::Operator));
        assert!(!deactivation_needs_confirmation(OFF, Role::Approver));
        assert!(settlement_grant_needs_confirmation(ON));
        assert!(!settlement_grant_needs_confirmation(OFF));
    }

    #[test]
    fn a_decided_proposal_replays_only_the_same_decision_by_the_same_approver() {
        let other = Uuid::now_v7();
        let (p, _, now) = proposal(ChangeState::Confirmed, Some(other));
        assert_eq!(
            resolve(p, ChangeState::Confirmed, other, now),
            Ok(Resolution::Replay)
        );
        assert_eq!(
            resolve(p, ChangeState::Rejected, other, now),
            Err(ResolutionError::Decided("confirmed"))
        );
        let third = Uuid::now_v7();
        assert_eq!(
            resolve(p, ChangeState::Confirmed, third, now),
            Err(ResolutionError::Decided("confirmed"))
        );
    }

    #[test]
    fn a_lapsed_proposal_cannot_be_confirmed_but_can_be_rejected() {
        let (p, _, now) = proposal(ChangeState::Pending, None);
        let later = now + Duration::days(PROPOSAL_TTL_DAYS) + Duration::seconds(1);
        let other = Uuid::now_v7();
        assert_eq!(p.state.seen(p.expires_at, later), ChangeState::Expired);
        assert_eq!(
            resolve(p, ChangeState::Confirmed, other, later),
            Err(ResolutionError::Expired)
        );
        assert_eq!(
            resolve(p, ChangeState::Rejected, other, later),
            Ok(Resolution::Apply(ChangeState::Rejected))
        );
    }
}
