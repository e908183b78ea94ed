//! Customers: managed by the human who owns the agent, read by that agent.

use crate::actor::Actor;
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::lists::PageRequest;
use chrono::{DateTime, Utc};
use serde::Serialize;
use tauros_domain::identity::Capability;
use tauros_domain::visibility::Scope;
use tauros_store::{CustomerRow, Lock, Reader, Tx};
use utoipa::ToSchema;
use uuid::Uuid;

/// Someone an agent bills; managed by the agent's human.
#[derive(Clone, Debug, Serialize, ToSchema)]
#[schema(as = CustomerResponse)]
pub struct CustomerView {
    /// The `customer_id` of an invoice billed to this customer.
    pub id: Uuid,
    /// The agent it belongs to.
    pub agent_id: Uuid,
    /// Display name, 1–160 characters (not part of any invoice seal).
    pub name: String,
    /// Contact email, 1–254 characters (not part of any invoice seal).
    pub email: String,
    /// When the customer was created (RFC 3339, UTC).
    pub created_at: DateTime<Utc>,
    /// When its name or email last changed, or `created_at` (RFC 3339, UTC).
    pub updated_at: DateTime<Utc>,
}

impl From<CustomerRow> for CustomerView {
    fn from(c: CustomerRow) -> Self {
        CustomerView {
            id: c.id,
            agent_id: c.agent_id,
            name: c.name,
            email: c.email,
            created_at: c.created_at,
            updated_at: c.updated_at,
        }
    }
}

/// A partial update (`None` keeps the value), checked by the caller; trimmed here.
#[derive(Debug, Default)]
pub struct CustomerChange {
    pub name: Option<String>,
    pub email: Option<String>,
}

/// A new customer, checked by the caller (`CreateCustomerRequest`); trimmed here.
#[derive(Clone, Debug)]
pub struct NewCustomer {
    /// One of the caller's agents.
    pub agent_id: Uuid,
    pub name: String,
    pub email: String,
}

impl App {
    /// A human creates a customer for one of their own agents.
    pub async fn create_customer(
        &self,
        actor: &Actor,
        input: NewCustomer,
    ) -> AppResult<CustomerView> {
        actor.require(Capability::Invoicing)?;
        let human = actor.human()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            // Share-locked: the agent cannot be deleted before this customer is committed.
            let owns = tx
                .lock_agent(human.org_id, input.agent_id, Lock::Share)
                .await?
                .is_some_and(|a| a.owner_id == human.id);
            if !owns {
                // Another human's agent and an unknown id get the same answer.
                return Err(AppError::Validation(vec![crate::error::FieldError::plain(
                    "agent_id",
                    "unknown_agent",
                    "no agent with this id is yours; send the id of an agent you own (GET /v1/agents)",
                )]));
            }
            let agent_id = input.agent_id;
            let now = now();
            let row = CustomerRow {
                id: Uuid::now_v7(),
                org_id: human.org_id,
                agent_id,
                name: input.name.trim().to_owned(),
                email: input.email.trim().to_owned(),
                created_at: now,
                updated_at: now,
            };
            tx.insert_customer(&row).await?;
            audit(
                &mut *tx,
                row.org_id,
                AuditActor::human(human),
                "customer.created",
                ("customer", row.id),
                serde_json::json!({ "agent_id": agent_id, "name": row.name, "email": row.email }),
            )
            .await?;
            Ok(row.into())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// The customers the caller may see, newest first.
    pub async fn list_customers(
        &self,
        actor: &Actor,
        page: PageRequest,
    ) -> AppResult<Vec<CustomerView>> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let rows = conn
            .customers(actor.org_id(), scope_of(actor), page.into())
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// One customer the caller may see.
    pub async fn get_customer(&self, actor: &Actor, id: Uuid) -> AppResult<CustomerView> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        Ok(visible_customer(&mut *conn, actor, id).await?.into())
    }

    /// The owning human changes a customer's name or email; audited when something changes.
    pub async fn update_customer(
        &self,
        actor: &Actor,
        id: Uuid,
        change: CustomerChange,
    ) -> AppResult<CustomerView> {
        actor.require(Capability::Invoicing)?;
        let human = actor.human()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let mut row = locked_customer(&mut *tx, actor, id).await?;
            let name = change.name.map(|n| n.trim().to_owned());
            let email = change.email.map(|e| e.trim().to_owned());
            let before = (row.name.clone(), row.email.clone());
            row.name = name.unwrap_or(row.name);
            row.email = email.unwrap_or(row.email);
            if (row.name.as_str(), row.email.as_str()) != (before.0.as_str(), before.1.as_str()) {
                row.updated_at = now();
                tx.update_customer(&row).await?;
                audit(
                    &mut *tx,
                    row.org_id,
                    AuditActor::human(human),
                    "customer.updated",
                    ("customer", row.id),
                    serde_json::json!({ "name": row.name, "email": row.email }),
                )
                .await?;
            }
            Ok(row.into())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// The owning human deletes a customer no revision references.
    pub async fn delete_customer(&self, actor: &Actor, id: Uuid) -> AppResult<()> {
        actor.require(Capability::Invoicing)?;
        let human = actor.human()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let row = locked_customer(&mut *tx, actor, id).await?;
            if tx.customer_is_referenced(row.org_id, row.id).await? {
                return Err(AppError::HasDependents);
            }
            tx.delete_customer(row.org_id, row.id).await?;
            audit(
                &mut *tx,
                row.org_id,
                AuditActor::human(human),
                "customer.deleted",
                ("customer", row.id),
                serde_json::json!({ "name": row.name }),
            )
            .await?;
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}

/// Whose records a list may show: an agent its own, a human those of the agents they own.
pub(crate) fn scope_of(actor: &Actor) -> Scope {
    Scope::of_parties(super::invoices::caller(actor))
}

/// Whether the caller may see records that belong to `agent_id`.
pub(crate) async fn sees_agent(
    tx: &mut dyn Reader,
    actor: &Actor,
    agent_id: Uuid,
) -> AppResult<bool> {
    Ok(match actor {
        Actor::Agent(a) => a.id == agent_id,
        Actor::Human(h) => tx
            .agent_by_id(h.org_id, agent_id)
            .await?
            .is_some_and(|a| a.owner_id == h.id),
    })
}

/// The customer, if the caller may see it; unknown and foreign ids are the same `NotFound`.
pub(crate) async fn visible_customer(
    conn: &mut dyn Reader,
    actor: &Actor,
    id: Uuid,
) -> AppResult<CustomerRow> {
    let row = conn.customer_by_id(actor.org_id(), id).await?;
    only_visible(conn, actor, row).await
}

/// The customer, if the caller may see it, locked against concurrent changes and drafts.
async fn locked_customer(tx: &mut dyn Tx, actor: &Actor, id: Uuid) -> AppResult<CustomerRow> {
    let row = tx.lock_customer(actor.org_id(), id, Lock::Update).await?;
    only_visible(tx, actor, row).await
}

async fn only_visible(
    conn: &mut dyn Reader,
    actor: &Actor,
    row: Option<CustomerRow>,
) -> AppResult<CustomerRow> {
    match row {
        Some(row) if sees_agent(conn, actor, row.agent_id).await? => Ok(row),
        _ => Err(AppError::NotFound),
    }
}
