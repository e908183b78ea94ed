//! What can go wrong below the app layer, and the constraints the app reacts to.

/// What can go wrong below the app layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A uniqueness constraint the app reacts to refused the write.
    #[error("constraint {} refused the write", .0.name())]
    Conflict(Constraint),
    /// A referenced row is gone (a foreign key): a backstop, as the app locks what it checks.
    #[error("a referenced row is gone: {0}")]
    ReferenceGone(#[source] sqlx::Error),
    /// The database could not be reached or timed out: safe to retry.
    #[error("database unavailable: {0}")]
    Unavailable(#[source] sqlx::Error),
    /// Anything else: a bug or a broken database.
    #[error("database error: {0}")]
    Other(#[source] sqlx::Error),
}

/// The unique constraints the app reacts to; any other violation is [`StoreError::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Constraint {
    /// One organisation per name.
    OrgName,
    /// One human per email within an organisation.
    UserEmail,
    /// One bootstrap approver per organisation.
    OneBootstrapPerOrg,
    SessionToken,
    InvitationToken,
    /// One destination per (org, agent, idempotency key).
    DestinationKey,
    /// A destination is superseded at most once.
    DestinationSupersedes,
    /// One decision per revision.
    DecisionPerRevision,
}

impl Constraint {
    /// Every constraint the app reacts to.
    pub const ALL: [Constraint; 8] = [
        Constraint::OrgName,
        Constraint::UserEmail,
        Constraint::OneBootstrapPerOrg,
        Constraint::SessionToken,
        Constraint::InvitationToken,
        Constraint::DestinationKey,
        Constraint::DestinationSupersedes,
        Constraint::DecisionPerRevision,
    ];

    /// The name declared in the migrations (PostgreSQL reports it).
    pub fn name(self) -> &'static str {
        match self {
            Constraint::OrgName => "orgs_name_key",
            Constraint::UserEmail => "users_org_email_key",
            Constraint::OneBootstrapPerOrg => "users_one_bootstrap_per_org",
            Constraint::SessionToken => "sessions_token_hash_key",
            Constraint::InvitationToken => "invitations_token_hash_key",
            Constraint::DestinationKey => "payment_destinations_idempotency_key",
            Constraint::DestinationSupersedes => "payment_destinations_supersedes_key",
            Constraint::DecisionPerRevision => "decisions_revision_key",
        }
    }

    /// The columns SQLite names instead; all but `orgs.name` lead with `org_id` (docs/SCALING.md).
    pub fn sqlite_columns(self) -> &'static str {
        match self {
            Constraint::OrgName => "orgs.name",
            Constraint::UserEmail => "users.org_id, users.email_normalized",
            Constraint::OneBootstrapPerOrg => "users.org_id",
            Constraint::SessionToken => "sessions.org_id, sessions.token_hash",
            Constraint::InvitationToken => "invitations.org_id, invitations.token_hash",
            Constraint::DestinationKey => {
                "payment_destinations.org_id, payment_destinations.agent_id, payment_destinations.idempotency_key"
            }
            Constraint::DestinationSupersedes => {
                "payment_destinations.org_id, payment_destinations.supersedes_id"
            }
            Constraint::DecisionPerRevision => "decisions.org_id, decisions.revision_id",
        }
    }
}

/// Shorthand for store results.
pub type StoreResult<T> = Result<T, StoreError>;
