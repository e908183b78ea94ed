//! `tauros bootstrap-approver`: an organisation and its first approver.

use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::auth::password_error;
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::users::insert_user;
use tauros_domain::identity::{self, Role};
use tauros_domain::text::{MAX_NAME_CHARS, checked_text};
use tauros_store::{Lane, OrgRow, UserRow};
use uuid::Uuid;

/// What the bootstrap created.
#[derive(Debug)]
pub struct BootstrapOutcome {
    /// The organisation (created now, or found by name).
    pub org_id: Uuid,
    pub user_id: Uuid,
}

impl App {
    /// Creates organisation `org_name` (if absent) and its first approver. Two concurrent runs
    /// race on the database's unique index of bootstrap approvers per org: exactly one
    /// commits; the other gets `ApproverExists` and its transaction changes nothing.
    pub async fn bootstrap_approver(
        &self,
        org_name: &str,
        email: &str,
        password: String,
    ) -> AppResult<BootstrapOutcome> {
        let mut errors = Vec::new();
        let org_name = checked_text("org", org_name, MAX_NAME_CHARS, &mut errors);
        let email = email.trim();
        if !identity::email_is_valid(email) {
            errors.push(crate::error::FieldError::plain(
                "email",
                "invalid_email",
                "send an email address like name@example.com",
            ));
        }
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        if !identity::password_is_acceptable(&password) {
            return Err(password_error());
        }
        let password_hash = self.passwords.hash(password).await?;
        let now = now();
        let mut tx = self.store.begin(Lane::Unattributed).await?;
        let answer = async {
            let new_org = OrgRow {
                id: Uuid::now_v7(),
                name: org_name.clone(),
                four_eyes: false,
                shared_review: false,
                created_at: now,
                updated_at: now,
            };
            tx.insert_org(&new_org).await?;
            let org = tx.org_by_name(&org_name).await?.ok_or_else(|| {
                AppError::Internal("organisation vanished during bootstrap".into())
            })?;
            let user = UserRow {
                id: Uuid::now_v7(),
                org_id: org.id,
                email: email.to_owned(),
                email_normalized: identity::normalize_email(email),
                role: Role::Approver.as_str().to_owned(),
                password_hash: Some(password_hash),
                is_bootstrap: true,
                created_at: now,
                updated_at: now,
                deactivated_at: None,
            };
            insert_user(&mut *tx, &user).await?;
            audit(
                &mut *tx,
                org.id,
                AuditActor::cli(),
                "user.bootstrapped",
                ("user", user.id),
                serde_json::json!({ "role": "approver" }),
            )
            .await?;
            Ok(BootstrapOutcome {
                org_id: org.id,
                user_id: user.id,
            })
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}
