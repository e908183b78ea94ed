//! Agents, managed by the human who owns them, and their API keys.

use crate::actor::{Actor, Human};
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::error::{AppError, AppResult};
use crate::lists::PageRequest;
use crate::proposals::{ChangeView, pending, propose};
use crate::random::random_32;
use chrono::{DateTime, Utc};
use tauros_domain::governance::{self as rules, ChangeKind, Settings};
use tauros_domain::identity::{ApiKey, Capabilities, Capability};
use tauros_store::{AgentRow, ApiKeyRow, Lock, OrgChangeRow, Reader, Tx};
use uuid::Uuid;

/// What `POST /v1/agents` did.
#[derive(Debug)]
pub enum AgentCreated {
    /// The agent exists, with its first key (shown once).
    Done(AgentView, String),
    /// A settlement agent under four eyes: it waits for a second approver.
    Proposed(ChangeView),
}

/// What a human sends to create an agent.
#[derive(Debug)]
pub struct NewAgent {
    /// Display name, 1–160 characters of clean text (`CreateAgentRequest`'s rule); trimmed here.
    pub name: String,
    /// Capability names as sent (at most `MAX_CAPABILITIES`); empty: `invoicing`.
    pub capabilities: Vec<String>,
}

/// An agent as its owner sees it (never the key).
#[derive(Clone, Debug)]
pub struct AgentView {
    pub id: Uuid,
    pub org_id: Uuid,
    pub owner_id: Uuid,
    pub name: String,
    pub capabilities: Capabilities,
    /// When the current key expires (`None` if it has no active key).
    pub key_expires_at: Option<DateTime<Utc>>,
    /// When the current key was last used (to the minute).
    pub key_last_used_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl App {
    /// Creates an agent and its first key; only approvers grant `settlement` (four eyes: proposed).
    pub async fn create_agent(&self, actor: &Actor, input: NewAgent) -> AppResult<AgentCreated> {
        let human = actor.human()?;
        let name = input.name.trim().to_owned();
        // The capabilities are the domain's to read.
        let mut errors = Vec::new();
        let Some(capabilities) = Capabilities::requested(&input.capabilities, &mut errors) else {
            return Err(AppError::Validation(errors));
        };
        if !capabilities.grantable_by(human.role) {
            return Err(AppError::Forbidden(
                "only an approver grants the `settlement` capability; ask an approver to create \
                 this agent, or create it with [\"invoicing\"]",
            ));
        }
        let now = now();
        let agent = AgentRow {
            id: Uuid::now_v7(),
            org_id: human.org_id,
            owner_id: human.id,
            name,
            capabilities: capabilities.to_stored(),
            created_at: now,
            updated_at: now,
        };
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            if capabilities.has(Capability::Settlement) {
                // Shared: a settings change waits for this grant, and this one for it.
                let org = tx
                    .lock_org(human.org_id, Lock::Share)
                    .await?
                    .ok_or(AppError::NotFound)?;
                let settings = Settings {
                    four_eyes: org.four_eyes,
                    shared_review: org.shared_review,
                };
                if rules::settlement_grant_needs_confirmation(settings) {
                    let same =
                        |c: &OrgChangeRow| c.agent_name.as_deref() == Some(agent.name.as_str());
                    let proposal = OrgChangeRow {
                        agent_name: Some(agent.name.clone()),
                        ..pending(human, ChangeKind::SettlementAgent, now)
                    };
                    let change = propose(&mut *tx, human, proposal, same).await?;
                    return Ok(AgentCreated::Proposed(change));
                }
            }
            tx.insert_agent(&agent).await?;
            let key = self.issue_key(&mut *tx, &agent).await?;
            audit(
                &mut *tx,
                agent.org_id,
                AuditActor::human(human),
                "agent.created",
                ("agent", agent.id),
                serde_json::json!({ "name": agent.name, "capabilities": agent.capabilities }),
            )
            .await?;
            let view = view(&mut *tx, agent).await?;
            Ok(AgentCreated::Done(view, key))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// A confirmed `settlement_agent` proposal: the proposer's agent, `settlement` only, no key
    /// yet; the proposer takes it by rotation, so the confirming approver never sees it.
    pub(crate) async fn create_proposed_settlement_agent(
        &self,
        tx: &mut dyn Tx,
        change: &OrgChangeRow,
        actor: AuditActor,
    ) -> AppResult<Uuid> {
        let name = change
            .agent_name
            .clone()
            .ok_or_else(|| AppError::Internal("settlement agent proposal without a name".into()))?;
        let now = now();
        let agent = AgentRow {
            id: Uuid::now_v7(),
            org_id: change.org_id,
            owner_id: change.proposed_by,
            name,
            capabilities: Capabilities::new(vec![Capability::Settlement]).to_stored(),
            created_at: now,
            updated_at: now,
        };
        tx.insert_agent(&agent).await?;
        audit(
            tx,
            agent.org_id,
            actor,
            "agent.created",
            ("agent", agent.id),
            serde_json::json!({
                "name": agent.name,
                "capabilities": agent.capabilities,
                "change_id": change.id,
                "proposed_by": change.proposed_by,
            }),
        )
        .await?;
        Ok(agent.id)
    }

    /// The agents the calling human owns, newest first.
    pub async fn list_agents(&self, actor: &Actor, page: PageRequest) -> AppResult<Vec<AgentView>> {
        let human = actor.human()?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let rows = conn
            .agents_by_owner(human.org_id, human.id, page.into())
            .await?;
        let mut out = Vec::with_capacity(rows.len());
        for row in rows {
            out.push(view(&mut *conn, row).await?);
        }
        Ok(out)
    }

    /// One agent the calling human owns.
    pub async fn get_agent(&self, actor: &Actor, id: Uuid) -> AppResult<AgentView> {
        let human = actor.human()?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let agent = owned(conn.agent_by_id(human.org_id, id).await?, human)?;
        view(&mut *conn, agent).await
    }

    /// Renames an agent; the name's rule is the caller's (`RenameAgentRequest`), trimmed here.
    pub async fn rename_agent(&self, actor: &Actor, id: Uuid, name: &str) -> AppResult<AgentView> {
        let human = actor.human()?;
        let name = name.trim().to_owned();
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let mut agent = owned(tx.lock_agent(human.org_id, id, Lock::Update).await?, human)?;
            if agent.name != name {
                let old = std::mem::replace(&mut agent.name, name);
                agent.updated_at = now();
                tx.update_agent(&agent).await?;
                audit(
                    &mut *tx,
                    agent.org_id,
                    AuditActor::human(human),
                    "agent.renamed",
                    ("agent", agent.id),
                    serde_json::json!({ "from": old, "to": agent.name }),
                )
                .await?;
            }
            let view = view(&mut *tx, agent).await?;
            Ok(view)
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    /// Issues a new key and revokes every older key of the agent, in one transaction.
    pub async fn rotate_agent_key(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<(AgentView, String)> {
        let human = actor.human()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            // The agent row lock serializes concurrent rotations: exactly one key survives.
            let agent = owned(tx.lock_agent(human.org_id, id, Lock::Update).await?, human)?;
            let (view, key) = self
                .rotate_locked(&mut *tx, agent, AuditActor::human(human))
                .await?;
            Ok((view, key))
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    pub(crate) async fn rotate_locked(
        &self,
        tx: &mut dyn Tx,
        agent: AgentRow,
        actor: AuditActor,
    ) -> AppResult<(AgentView, String)> {
        let revoked = tx.revoke_agent_keys(agent.org_id, agent.id, now()).await?;
        let key = self.issue_key(tx, &agent).await?;
        audit(
            tx,
            agent.org_id,
            actor,
            "agent.key_rotated",
            ("agent", agent.id),
            serde_json::json!({ "revoked_keys": revoked }),
        )
        .await?;
        Ok((view(tx, agent).await?, key))
    }

    /// Deletes an agent that owns nothing; its keys go with it.
    pub async fn delete_agent(&self, actor: &Actor, id: Uuid) -> AppResult<()> {
        let human = actor.human()?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let agent = owned(tx.lock_agent(human.org_id, id, Lock::Update).await?, human)?;
            if tx.agent_has_dependents(agent.org_id, agent.id).await? {
                return Err(AppError::HasDependents);
            }
            tx.delete_agent(agent.org_id, agent.id).await?;
            audit(
                &mut *tx,
                agent.org_id,
                AuditActor::human(human),
                "agent.deleted",
                ("agent", agent.id),
                serde_json::json!({ "name": agent.name }),
            )
            .await?;
            Ok(())
        }
        .await;
        crate::app::finish(tx, answer).await
    }

    pub(crate) async fn issue_key(&self, tx: &mut dyn Tx, agent: &AgentRow) -> AppResult<String> {
        let key = ApiKey::new(Uuid::new_v4(), random_32());
        let now = now();
        tx.insert_api_key(&ApiKeyRow {
            id: key.id(),
            org_id: agent.org_id,
            agent_id: agent.id,
            key_hash: key.hash().to_vec(),
            created_at: now,
            expires_at: now + self.config.api_key_ttl,
            revoked_at: None,
            last_used_at: None,
        })
        .await?;
        Ok(key.encode())
    }
}

/// Another human's agent behaves exactly like an unknown one.
fn owned(agent: Option<AgentRow>, human: &Human) -> AppResult<AgentRow> {
    agent
        .filter(|a| a.owner_id == human.id)
        .ok_or(AppError::NotFound)
}

async fn view(tx: &mut dyn Reader, row: AgentRow) -> AppResult<AgentView> {
    let key = tx.active_key_expiry(row.org_id, row.id).await?;
    Ok(AgentView {
        id: row.id,
        org_id: row.org_id,
        owner_id: row.owner_id,
        name: row.name,
        capabilities: Capabilities::from_stored(&row.capabilities),
        key_expires_at: key.map(|k| k.0),
        key_last_used_at: key.and_then(|k| k.1),
        created_at: row.created_at,
        updated_at: row.updated_at,
    })
}
