//! `serve --demo`: a demo organisation to try Tauros with, seeded once.

use crate::actor::{Actor, Human};
use crate::agents::{AgentCreated, NewAgent};
use crate::app::App;
use crate::audit::AuditActor;
use crate::clock::now;
use crate::customers::NewCustomer;
use crate::destinations::NewDestination;
use crate::error::{AppError, AppResult};
use crate::invoices::DraftInput;
use crate::users::insert_user;
use tauros_domain::identity::{self, Capability, Interface, Role};
use tauros_domain::lines::LineInput;
use tauros_store::{Lock, Page, UserRow};
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
    pub approver_email: &'static str,
    pub operator_email: &'static str,
    /// Both humans' password.
    pub password: &'static str,
    pub agent_id: Uuid,
    /// A valid API key of the demo agent.
    pub agent_key: String,
    /// Whether this run created the data (false: it was there already).
    pub created: bool,
}

impl App {
    /// The demo organisation's approver, if it is seeded.
    async fn demo_approver(&self) -> AppResult<Option<tauros_store::UserRow>> {
        let mut conn = self.store.reader(tauros_store::Lane::Unattributed).await?;
        let Some(org) = conn.org_by_name(DEMO_ORG).await? else {
            return Ok(None);
        };
        Ok(conn
            .user_by_org_email(org.id, &identity::normalize_email(DEMO_APPROVER))
            .await?)
    }

    /// Seeds the demo org if absent; later runs rotate the agent's key (only hashes are stored).
    pub async fn seed_demo(&self) -> AppResult<DemoCredentials> {
        let existing = self.demo_approver().await?;
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
            .demo_approver()
            .await?
            .ok_or_else(|| AppError::Internal("demo approver missing after seeding".into()))?;
        // Seeded from the command line: audited as coming through `cli`.
        let actor = Actor::Human(Human {
            id: approver.id,
            org_id: approver.org_id,
            email: approver.email.clone(),
            role: Role::Approver,
            session_id: Uuid::nil(),
            interface: Interface::Cli,
        });
        if created {
            self.seed_operator(approver.org_id).await?;
        }
        let agents = self
            .store
            .reader(tauros_store::Lane::Unattributed)
            .await?
            .agents_by_owner(
                approver.org_id,
                approver.id,
                Page {
                    after: None,
                    limit: 100,
                },
            )
            .await?;
        let (agent_id, agent_key) = match agents.into_iter().find(|a| a.name == DEMO_AGENT) {
            None => {
                let new = NewAgent {
                    name: DEMO_AGENT.into(),
                    capabilities: vec![Capability::Invoicing.as_str().to_owned()],
                };
                match self.create_agent(&actor, new).await? {
                    AgentCreated::Done(view, key) => (view.id, key),
                    AgentCreated::Proposed(_) => {
                        return Err(AppError::Internal(
                            "an invoicing agent is never a proposal".into(),
                        ));
                    }
                }
            }
            Some(agent) => {
                let mut tx = self.store.begin(tauros_store::Lane::Unattributed).await?;
                let answer = async {
                    let locked = tx
                        .lock_agent(agent.org_id, agent.id, Lock::Update)
                        .await?
                        .ok_or_else(|| AppError::Internal("demo agent vanished".into()))?;
                    let (view, key) = self
                        .rotate_locked(&mut *tx, locked, AuditActor::cli())
                        .await?;
                    Ok((view.id, key))
                }
                .await;
                crate::app::finish(tx, answer).await?
            }
        };
        if created {
            self.seed_invoices(&actor, agent_id).await?;
        }
        Ok(DemoCredentials {
            approver_email: DEMO_APPROVER,
            operator_email: DEMO_OPERATOR,
            password: DEMO_PASSWORD,
            agent_id,
            agent_key,
            created,
        })
    }

    /// Two customers, two destinations (IBAN EUR, USDC on Arbitrum), two submitted invoices.
    async fn seed_invoices(&self, approver: &Actor, agent_id: Uuid) -> AppResult<()> {
        let agent = self.agent_actor(approver.org_id(), agent_id).await?;
        let acme = self
            .create_customer(
                approver,
                new_customer(agent_id, "Acme Inc", "billing@acme.example"),
            )
            .await?;
        let globex = self
            .create_customer(
                approver,
                new_customer(agent_id, "Globex GmbH", "ap@globex.example"),
            )
            .await?;
        let destination =
            |label: &str, currency: &str, network: &str, address: &str| NewDestination {
                label: label.into(),
                currency: currency.into(),
                network: network.into(),
                address: address.into(),
                supersedes_id: None,
            };
        let eur = self
            .create_destination(
                &agent,
                destination("Operating account", "EUR", "iban", "DE89370400440532013000"),
                Some("seed-destination-eur"),
            )
            .await?;
        let usdc = self
            .create_destination(
                &agent,
                destination(
                    "Treasury (Arbitrum)",
                    "USDC",
                    "arbitrum",
                    "0x5aAeb6053F3E94C9b9A09f33669435E7Ef1BeAed",
                ),
                Some("seed-destination-usdc"),
            )
            .await?;
        let due = (now() + chrono::Duration::days(30))
            .date_naive()
            .format("%Y-%m-%d")
            .to_string();
        let line = |description: &str, quantity: &str, unit_amount: &str| -> AppResult<LineInput> {
            serde_json::from_value(serde_json::json!({
                "description": description, "quantity": quantity, "unit_amount": unit_amount,
            }))
            .map_err(|e| AppError::Internal(format!("demo line: {e}")))
        };
        let proposals = [
            (
                "seed-acme-retainer",
                acme.id,
                usdc.value.id,
                "USDC",
                vec![
                    line("Platform retainer", "1", "1000")?,
                    line("Additional support hours", "4", "50")?,
                ],
                "Monthly retainer agreed in the signed statement of work.",
            ),
            (
                "seed-globex-workshop",
                globex.id,
                eur.value.id,
                "EUR",
                vec![line("Integration workshop (2 days)", "2", "1450.00")?],
                "Workshop delivered on site; the customer confirmed attendance.",
            ),
        ];
        for (key, customer_id, destination_id, currency, lines, reasoning) in proposals {
            #[allow(
                clippy::needless_update,
                reason = "every field it does not name stays unset, those added later too"
            )]
            let input = DraftInput {
                customer_id: Some(customer_id),
                payment_destination_id: Some(destination_id),
                currency: Some(currency.into()),
                due_date: Some(due.clone()),
                lines: Some(lines),
                reasoning: Some(reasoning.into()),
                ..DraftInput::default()
            };
            let invoice = self.create_draft(&agent, key, input).await?.value;
            self.submit(&agent, invoice.id).await?;
        }
        Ok(())
    }

    async fn agent_actor(&self, org_id: Uuid, agent_id: Uuid) -> AppResult<Actor> {
        let row = self
            .store
            .reader(tauros_store::Lane::Unattributed)
            .await?
            .agent_by_id(org_id, agent_id)
            .await?
            .ok_or_else(|| AppError::Internal("demo agent missing".into()))?;
        Ok(Actor::Agent(crate::actor::Agent {
            id: row.id,
            org_id: row.org_id,
            owner_id: row.owner_id,
            name: row.name,
            capabilities: tauros_domain::identity::Capabilities::from_stored(&row.capabilities),
            interface: Interface::Cli,
        }))
    }

    async fn seed_operator(&self, org_id: Uuid) -> AppResult<()> {
        let now = now();
        let user = UserRow {
            id: Uuid::now_v7(),
            org_id,
            email: DEMO_OPERATOR.into(),
            email_normalized: identity::normalize_email(DEMO_OPERATOR),
            role: Role::Operator.as_str().into(),
            password_hash: Some(self.passwords.hash(DEMO_PASSWORD.into()).await?),
            is_bootstrap: false,
            created_at: now,
            updated_at: now,
            deactivated_at: None,
        };
        let mut tx = self.store.begin(tauros_store::Lane::Unattributed).await?;
        let inserted = insert_user(&mut *tx, &user).await;
        match crate::app::finish(tx, inserted).await {
            // Seeded by an earlier, interrupted run: keep that one.
            Ok(()) | Err(AppError::Validation(_)) => Ok(()),
            Err(e) => Err(e),
        }
    }
}

fn new_customer(agent_id: Uuid, name: &str, email: &str) -> NewCustomer {
    NewCustomer {
        agent_id,
        name: name.into(),
        email: email.into(),
    }
}
