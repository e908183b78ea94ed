//! The one-shot operator commands: `org set`, `user unlock`, `reap` and `bootstrap-approver`.

use super::jobs::IssuerArgs;
use super::{DbArgs, Switch};
use clap::Args;

/// `org set` options.
#[derive(Debug, Args, Clone)]
pub struct OrgSetArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// The organisation's name.
    #[arg(long)]
    pub org: String,
    /// `four_eyes`: an approver may not decide on invoices of agents they own.
    #[arg(long, value_enum)]
    pub four_eyes: Option<Switch>,
    /// `shared_review`: approvers see and decide on every agent's invoices.
    #[arg(long, value_enum)]
    pub shared_review: Option<Switch>,
}

/// `user unlock` options.
#[derive(Debug, Args, Clone)]
pub struct UserUnlockArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// The email whose failed sign-ins to clear (case-insensitive; every organisation).
    #[arg(long)]
    pub email: String,
}

/// `reap` options.
#[derive(Debug, Args, Clone)]
pub struct ReapArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// Retention and the abandonment horizon.
    #[command(flatten)]
    pub issuer: IssuerArgs,
}

/// `bootstrap-approver` options.
#[derive(Debug, Args, Clone)]
pub struct BootstrapArgs {
    /// Database and logging.
    #[command(flatten)]
    pub db: DbArgs,
    /// Organisation name (created if it does not exist).
    #[arg(long, env = "TAUROS_BOOTSTRAP_ORG")]
    pub org: String,
    /// The approver's email.
    #[arg(long, env = "TAUROS_BOOTSTRAP_EMAIL")]
    pub email: String,
    /// Read the password from standard input (a trailing newline is trimmed). Required.
    #[arg(long, required = true)]
    pub password_stdin: bool,
}
