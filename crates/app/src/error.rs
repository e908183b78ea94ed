//! What can go wrong in a use case; the HTTP layer maps each variant in exactly one place.

use tauros_store::StoreError;

pub use tauros_domain::error::FieldError;

/// A use case's failure.
#[derive(Debug, thiserror::Error)]
pub enum AppError {
    /// No usable credential: missing, malformed, expired, revoked or signed out.
    #[error("authentication required")]
    Unauthorized,
    /// Sign-in or invitation secret did not match (same answer for every cause).
    #[error("invalid credentials")]
    InvalidCredentials,
    /// The actor is known but may not do this.
    #[error("forbidden: {0}")]
    Forbidden(&'static str),
    /// A settlement source belongs to another agent (the first to report under it).
    #[error("settlement source owned by another agent")]
    SourceOwned,
    /// The agent's key lacks a capability the route needs.
    #[error("missing capability {0}")]
    MissingCapability(&'static str),
    /// Unknown, or not visible to the caller (the two are never distinguished).
    #[error("not found")]
    NotFound,
    /// No invoice has this id, but the caller may see it as another kind of record (a revision's
    /// id): still a 404 `not_found`, whose detail names it; other misses are `NotFound`.
    #[error("not an invoice: {0:?}")]
    NotAnInvoice(OtherKind),
    /// Input broke one or more rules; every offending field is listed.
    #[error("validation failed")]
    Validation(Vec<FieldError>),
    /// The organisation already has its first approver.
    #[error("organisation already has an approver")]
    ApproverExists,
    /// The caller is the approver who owns the proposing agent and `four_eyes` is on.
    #[error("four eyes required")]
    FourEyesRequired(String),
    /// The command is not allowed from the invoice's current state.
    #[error("invalid transition: {detail}")]
    InvalidTransition {
        /// The state read under the lock.
        from: &'static str,
        action: &'static str,
        /// What to do instead.
        detail: String,
    },
    /// The command conflicts with the current state of the record (409 with `code`).
    #[error("conflict {code}: {detail}")]
    Conflict {
        /// Stable code (`stale_revision`, `payload_mismatch`, `revision_limit`, …).
        code: &'static str,
        /// What to do instead.
        detail: String,
    },
    /// The key was used before with another payload: nothing written; names the caller's record.
    #[error("idempotency key reused with a different payload")]
    IdempotencyConflict(KeyHolder),
    /// The record still owns other records.
    #[error("record has dependents")]
    HasDependents,
    /// A credential's request rate, or a sign-in's failure count, is over its limit.
    #[error("rate limited ({limit:?})")]
    RateLimited {
        /// Whole seconds until a retry can succeed.
        retry_after: u32,
        /// Which limit refused: the answer names it, and only it.
        limit: Limit,
    },
    /// Too much work is queued (password hashing); the same request may be retried shortly.
    #[error("busy")]
    Busy,
    /// The database is unreachable; the same request may be retried.
    #[error("database unavailable")]
    Unavailable(#[source] StoreError),
    /// A bug or a broken database; never the client's fault.
    #[error("internal error: {0}")]
    Internal(String),
}

/// The limit a 429 is about (docs/SECURITY.md, "Nobody can lock a human out").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The credential's requests a second.
    Credential,
    /// Failed sign-ins for the email, from every address; stops only sign-ins without a valid
    /// device token.
    Email,
    /// Failed sign-ins from one device: its device token (or the session changing a password).
    Device,
    /// Failed sign-ins for the email from one client address.
    AddressAndEmail,
    /// Sign-ins from one client address being checked at once.
    AddressInFlight,
}

impl AppError {
    /// A single-field validation error.
    pub fn field(field: &str, code: &'static str, detail: impl Into<String>) -> AppError {
        AppError::Validation(vec![FieldError::plain(field, code, detail)])
    }
}

impl From<StoreError> for AppError {
    fn from(err: StoreError) -> Self {
        match err {
            StoreError::Unavailable(_) => AppError::Unavailable(err),
            // What the serial order gives when the delete comes first: the record is unknown.
            StoreError::ReferenceGone(_) => AppError::NotFound,
            other => AppError::Internal(other.to_string()),
        }
    }
}

/// A bound per record (`revision_limit`, `limit_reached`): 409, nothing written.
impl From<tauros_domain::bounds::Bound> for AppError {
    fn from(bound: tauros_domain::bounds::Bound) -> Self {
        AppError::Conflict {
            code: bound.code(),
            detail: bound.detail(),
        }
    }
}

/// A stored revision that no longer reads back as sealed (altered outside Tauros): 409
/// `payload_integrity`, nothing written, on every command and read that meets it.
impl From<tauros_domain::payload::IntegrityError> for AppError {
    fn from(e: tauros_domain::payload::IntegrityError) -> Self {
        use tauros_domain::error::Coded;
        AppError::Conflict {
            code: e.code(),
            detail: e.to_string(),
        }
    }
}

/// What an id passed where an invoice's belongs is instead, for a caller who may see it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OtherKind {
    /// A revision of an invoice the caller may read.
    Revision { invoice_id: uuid::Uuid, number: i32 },
    /// An audit event of an invoice the caller may read.
    Event { invoice_id: uuid::Uuid, seq: i32 },
    /// A customer the caller may see.
    Customer,
    /// A payment destination the caller may see.
    PaymentDestination,
}

impl OtherKind {
    /// The invoice the record belongs to (revisions and events), the id to pass instead.
    pub fn invoice_id(&self) -> Option<uuid::Uuid> {
        match self {
            OtherKind::Revision { invoice_id, .. } | OtherKind::Event { invoice_id, .. } => {
                Some(*invoice_id)
            }
            OtherKind::Customer | OtherKind::PaymentDestination => None,
        }
    }
}

/// The record an idempotency key already belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyHolder {
    Invoice(uuid::Uuid),
    Destination(uuid::Uuid),
    /// A settlement event: its source's event id was reported before with another body.
    SettlementEvent(uuid::Uuid),
    /// A payment resolution: the approver's key was used for another resolution request.
    PaymentResolution(uuid::Uuid),
    /// A webhook endpoint: the approver's key was used to register another body.
    WebhookEndpoint(uuid::Uuid),
}

/// Shorthand for use-case results.
pub type AppResult<T> = Result<T, AppError>;
