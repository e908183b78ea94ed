//! The invoice lifecycle's pure rules (docs/contract/domain.md §1 and §5): states and commands,
//! the transition table, who sees and may do what, and the order a decision or submit is checked.
//! Why a draft is refused lives in [`check_content`] and [`check_parties`].
//!
//! How a command is answered, first failure wins:
//! 1. input ([`validate_reason`]) → 422;
//! 2. access ([`authorize`], [`authorize_read`], [`authorize_verify`]) → 404 / 403;
//! 3. state and facts ([`transition`], [`submit_transition`], [`decide`]) → 409, or a replay.

mod access;
mod decide;
mod draft;
mod preview;
mod state;

#[cfg(test)]
mod model_tests;

pub use access::{
    AccessError, Caller, InvoiceAccess, OrgSettings, authorize, authorize_create_draft,
    authorize_read, authorize_verify, can_see, reads_depend_on_settings,
};
pub use decide::{
    DecideError, DecideFacts, DecideOutcome, ExistingDecision, MAX_REASON_CHARS, SubmitError,
    SubmitFacts, check_payload_hash, decide, submit_transition, validate_reason,
};
// Every item of a draft's content rules, its limits included: a new sealed field's constant is
// reachable as `invoice::MAX_…` without a line here.
pub use draft::*;
pub use preview::{
    DUE_FAR_DAYS, DUE_SOON_DAYS, OPEN_STATES, PreviewFacts, Warning, preview_warnings,
};
pub use state::{
    Action, DecisionKind, InvalidTransition, InvoiceState, IssuingStarted, Transition,
    check_issuing, settle, transition,
};
