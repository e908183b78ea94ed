//! `serve --demo`: a demo organisation to try Tauros with, seeded once.

use super::auth::insert_user;
use super::{Actor, App, AppError, AppResult, AuditActor, Human, NewAgent, now, password};
use crate::domain::identity::{self, Capability, Role};
use crate::store::{Page, UserRow};
use uuid::Uuid;

/// The demo organisation's name.
pub const DEMO_ORG: &str = "Demo";
/// The demo approver's email.
pub const DEMO_APPROVER: &str = "demo@tauros.local";
/// The demo operator's email.
pub const DEMO_OPERATOR: &str = "operator@tauros.local";
/// The demo humans' password (a demo only: never use `--demo` with real data).
pub const DEMO_PASSWORD: &str = "tauros-demo-password";
/// The demo agent's name.
pub const DEMO_AGENT: &str = "Billing agent";

/// Credentials that work right after seeding.
#[derive(Debug)]
pub struct DemoCredentials {
    /// The approver's email.
    pub approver_email: &'static str,
    /// The operator's email.
    pub operator_email: &'static str,
    /// Both humans' password.
    pub password: &'static str,
    /// The demo agent's id.
    pub agent_id: Uuid,
    /// A valid API key of the demo agent.
    pub agent_key: String,
    /// Whether this run created the data (false: it was there already).
    pub created: bool,
}

impl App {
    /// Seeds the demo organisation if it is not there yet. Every run prints a working agent
    /// key: only key hashes are stored, so on later runs the demo agent's key is rotated.
    pub async fn seed_demo(&self) -> AppResult<DemoCredentials> {
        let existing = self
            .store
            .reader()
            .await?
            .user_by_email(&identity::normalize_email(DEMO_APPROVER))
            .await?;
        let created = existing.is_none();
        if created {
            match self
                .bootstrap_approver(DEMO_ORG, DEMO_APPROVER, DEMO_PASSWORD.into())
                .await
            {
                Ok(_) | Err(AppError::ApproverExists) => {}
                Err(e) => return Err(e),
            }
        }
        let approver = self
            .store
            .reader()
            .await?
            .user_by_email(&identity::normalize_email(DEMO_APPROVER))
            .await?
            .ok_or_else(|| AppError::Internal("demo approver missing after seeding".into()))?;
        let actor = Actor::Human(Human {
            id: approver.id,
            org_id: approver.org_id,
            email: approver.email.clone(),
            role: Role::Approver,
            session_id: Uuid::nil(),
        });
        if created {
            self.seed_operator(approver.org_id).await?;
        }
        let agents = self
            .store
            .reader()
            .await?
            .agents_by_owner(
                approver.org_id,
                approver.id,
                Page {
                    before: None,
                    limit: 100,
                },
            )
            .await?;
        let (agent_id, agent_key) = match agents.into_iter().find(|a| a.name == DEMO_AGENT) {
            None => {
                let new = NewAgent {
                    name: DEMO_AGENT.into(),
                    capabilities: vec![Capability::Invoicing],
                };
                let (view, key) = self.create_agent(&actor, new).await?;
                (view.id, key)
            }
            Some(agent) => {
                let mut tx = self.store.begin().await?;
                let locked = tx
                    .lock_agent(agent.org_id, agent.id)
                    .await?
                    .ok_or_else(|| AppError::Internal("demo agent vanished".into()))?;
                let (view, key) = self
                    .rotate_locked(&mut *tx, locked, AuditActor::cli())
                    .await?;
                tx.commit().await?;
                (view.id, key)
            }
        };
        Ok(DemoCredentials {
            approver_email: DEMO_APPROVER,
            operator_email: DEMO_OPERATOR,
            password: DEMO_PASSWORD,
            agent_id,
            agent_key,
            created,
        })
    }

    async fn seed_operator(&self, org_id: Uuid) -> AppResult<()> {
        let now = now();
        let user = UserRow {
            id: Uuid::now_v7(),
            org_id,
            email: DEMO_OPERATOR.into(),
            email_normalized: identity::normalize_email(DEMO_OPERATOR),
            role: Role::Operator.as_str().into(),
            password_hash: Some(password::hash(DEMO_PASSWORD.into()).await?),
            is_bootstrap: false,
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.store.begin().await?;
        match insert_user(&mut *tx, &user).await {
            Ok(()) => tx.commit().await?,
            // Seeded by an earlier, interrupted run: keep that one.
            Err(AppError::Validation(_)) => {}
            Err(e) => return Err(e),
        }
        Ok(())
    }
}
