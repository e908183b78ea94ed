//! Payment destinations: an agent's own, immutable details, idempotent deactivation, supersede.

use crate::actor::{Actor, Agent};
use crate::app::App;
use crate::audit::{AuditActor, audit};
use crate::clock::now;
use crate::customers::{scope_of, sees_agent};
use crate::error::{AppError, AppResult, KeyHolder};
use crate::idempotency::{self, Keyed, KeyedCreate, Replayed, Written};
use crate::lists::{PageRequest, list_filter};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tauros_domain::address::Network;
use tauros_domain::currency::Currency;
use tauros_domain::destination::{DestinationState, check_payee};
use tauros_domain::fingerprint::{fingerprint, key_error, key_is_valid};
use tauros_domain::identity::Capability;
use tauros_store::{Constraint, DestinationRow, Lane, Lock, Reader, StoreError, Tx};
use uuid::Uuid;

/// What an agent sends to create a destination (checked by the caller and `check_payee`).
#[derive(Debug, Clone)]
pub struct NewDestination {
    /// Display label (not hashed), 1–160 characters; trimmed here.
    pub label: String,
    pub currency: String,
    pub network: String,
    pub address: String,
    /// An active destination of the same agent that this one replaces.
    pub supersedes_id: Option<Uuid>,
}

/// A destination as clients see it.
#[derive(Clone, Debug)]
pub struct DestinationView {
    pub id: Uuid,
    pub agent_id: Uuid,
    pub label: String,
    pub currency: String,
    pub network: String,
    pub address: String,
    pub state: DestinationState,
    pub supersedes_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
}

impl From<DestinationRow> for DestinationView {
    fn from(d: DestinationRow) -> Self {
        DestinationView {
            id: d.id,
            agent_id: d.agent_id,
            label: d.label,
            currency: d.currency,
            network: d.network,
            address: d.address,
            state: d.state,
            supersedes_id: d.supersedes_id,
            created_at: d.created_at,
        }
    }
}

impl App {
    /// An agent registers a destination; a keyed repeat replays, another body conflicts.
    pub async fn create_destination(
        &self,
        actor: &Actor,
        input: NewDestination,
        idempotency_key: Option<&str>,
    ) -> AppResult<Replayed<DestinationView>> {
        actor.require(Capability::Invoicing)?;
        let Actor::Agent(agent) = actor else {
            return Err(AppError::Forbidden(
                "only agents register payment destinations",
            ));
        };
        if idempotency_key.is_some_and(|key| !key_is_valid(key)) {
            return Err(AppError::Validation(vec![key_error()]));
        }
        let (label, currency, network, address) = validate_destination(&input)?;
        let request_hash = fingerprint(&[
            &label,
            currency.code(),
            network.name(),
            &address,
            &input
                .supersedes_id
                .map(|id| id.to_string())
                .unwrap_or_default(),
        ]);
        let now = now();
        let create = NewDestinationRow {
            agent,
            row: DestinationRow {
                id: Uuid::now_v7(),
                org_id: agent.org_id,
                agent_id: agent.id,
                label,
                currency: currency.code().to_owned(),
                network: network.name().to_owned(),
                address,
                state: DestinationState::Active,
                supersedes_id: input.supersedes_id,
                idempotency_key: idempotency_key.map(str::to_owned),
                request_hash: idempotency_key.map(|_| request_hash.clone()),
                created_at: now,
                updated_at: now,
            },
            request_hash,
        };
        if idempotency_key.is_some() {
            let mut conn = self.store.reader(actor.lane()).await?;
            if let Some(replayed) = idempotency::lookup(&create, &mut *conn).await? {
                return Ok(replayed);
            }
        }
        idempotency::create(&self.store, &create).await
    }

    /// The destinations the caller may see, newest first; optionally only one state.
    pub async fn list_destinations(
        &self,
        actor: &Actor,
        state: Option<&str>,
        page: PageRequest,
    ) -> AppResult<Vec<DestinationView>> {
        actor.require(Capability::Invoicing)?;
        let mut errors = Vec::new();
        let state = list_filter(
            "state",
            state,
            &DestinationState::ALL,
            DestinationState::as_str,
            &mut errors,
        );
        if !errors.is_empty() {
            return Err(AppError::Validation(errors));
        }
        let mut conn = self.store.reader(actor.lane()).await?;
        let rows = conn
            .destinations(actor.org_id(), scope_of(actor), state, page.into())
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// One destination the caller may see.
    pub async fn get_destination(&self, actor: &Actor, id: Uuid) -> AppResult<DestinationView> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader(actor.lane()).await?;
        let row = conn
            .destination_by_id(actor.org_id(), id)
            .await?
            .ok_or(AppError::NotFound)?;
        if !sees_agent(&mut *conn, actor, row.agent_id).await? {
            return Err(AppError::NotFound);
        }
        Ok(row.into())
    }

    /// The agent or its human stops a destination receiving money; idempotent (nothing written).
    pub async fn deactivate_destination(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<DestinationView> {
        actor.require(Capability::Invoicing)?;
        let mut tx = self.store.begin(actor.lane()).await?;
        let answer = async {
            let mut row = tx
                .lock_destination(actor.org_id(), id, Lock::Update)
                .await?
                .ok_or(AppError::NotFound)?;
            if !sees_agent(&mut *tx, actor, row.agent_id).await? {
                return Err(AppError::NotFound);
            }
            if row.state != DestinationState::Active {
                return Ok(row.into());
            }
            let now = now();
            tx.set_destination_state(row.org_id, row.id, DestinationState::Deactivated, now)
                .await?;
            audit(
                &mut *tx,
                row.org_id,
                AuditActor::of(actor),
                "destination.deactivated",
                ("payment_destination", row.id),
                serde_json::json!({}),
            )
            .await?;
            row.state = DestinationState::Deactivated;
            row.updated_at = now;
            Ok(row.into())
        }
        .await;
        crate::app::finish(tx, answer).await
    }
}

/// A destination to register with its body's fingerprint; keyed when sent with a key.
struct NewDestinationRow<'a> {
    agent: &'a Agent,
    row: DestinationRow,
    request_hash: String,
}

#[async_trait]
impl Keyed for NewDestinationRow<'_> {
    type Stored = DestinationRow;
    type Answer = DestinationView;

    async fn find(&self, conn: &mut dyn Reader) -> AppResult<Option<DestinationRow>> {
        match &self.row.idempotency_key {
            Some(key) => Ok(conn
                .destination_by_key(self.agent.org_id, self.agent.id, key)
                .await?),
            None => Ok(None),
        }
    }

    fn stored_fingerprint<'s>(&self, existing: &'s DestinationRow) -> Option<&'s str> {
        existing.request_hash.as_deref()
    }

    async fn fingerprint(
        &self,
        _: &mut dyn Reader,
        _: &DestinationRow,
    ) -> AppResult<Option<String>> {
        Ok(Some(self.request_hash.clone()))
    }

    fn conflict(&self, existing: &DestinationRow) -> AppError {
        AppError::IdempotencyConflict(KeyHolder::Destination(existing.id))
    }

    async fn replay(
        &self,
        _: &mut dyn Reader,
        existing: DestinationRow,
    ) -> AppResult<DestinationView> {
        Ok(existing.into())
    }

    fn vanished(&self) -> AppError {
        AppError::Internal("lost destination".into())
    }
}

#[async_trait]
impl KeyedCreate for NewDestinationRow<'_> {
    fn lane(&self) -> Lane {
        Lane::Org(self.agent.org_id)
    }

    /// Inserts the destination and retires the one it supersedes, with their audit events.
    async fn write(&self, tx: &mut dyn Tx) -> AppResult<Written<DestinationView>> {
        let (agent, row) = (self.agent, &self.row);
        agent.hold(&mut *tx).await?;
        // A concurrent winner with the same key is visible under the agent's lock.
        if self.find(&mut *tx).await?.is_some() {
            return Ok(Written::KeyTaken);
        }
        let actor_audit = AuditActor::agent(agent);
        if let Some(old_id) = row.supersedes_id {
            let old = tx
                .lock_destination(agent.org_id, old_id, Lock::Update)
                .await?;
            let usable =
                old.is_some_and(|d| d.agent_id == agent.id && d.state == DestinationState::Active);
            if !usable {
                return Err(AppError::field(
                    "supersedes_id",
                    "not_supersedable",
                    "supersedes_id must name one of your active payment destinations",
                ));
            }
        }
        match tx.insert_destination(row).await {
            Ok(()) => {}
            // A backstop: the refusal ended the unit on PostgreSQL, and the winner has committed.
            Err(StoreError::Conflict(Constraint::DestinationKey)) => {
                return Ok(Written::KeyTakenUnitEnded);
            }
            Err(StoreError::Conflict(Constraint::DestinationSupersedes)) => {
                return Err(AppError::field(
                    "supersedes_id",
                    "not_supersedable",
                    "that destination has already been replaced",
                ));
            }
            Err(e) => return Err(e.into()),
        }
        if let Some(old_id) = row.supersedes_id {
            tx.set_destination_state(
                row.org_id,
                old_id,
                DestinationState::Superseded,
                row.created_at,
            )
            .await?;
            audit(
                &mut *tx,
                row.org_id,
                actor_audit,
                "destination.superseded",
                ("payment_destination", old_id),
                serde_json::json!({ "superseded_by": row.id }),
            )
            .await?;
        }
        audit(
            &mut *tx,
            row.org_id,
            actor_audit,
            "destination.created",
            ("payment_destination", row.id),
            serde_json::json!({
                "label": row.label, "currency": row.currency, "network": row.network,
                "address": row.address, "supersedes_id": row.supersedes_id,
            }),
        )
        .await?;
        Ok(Written::Fresh(row.clone().into()))
    }
}

/// A new destination's label (trimmed) and its payee as the domain reads it.
fn validate_destination(input: &NewDestination) -> AppResult<(String, Currency, Network, String)> {
    let (currency, network, address) = check_payee(
        Some(&input.currency),
        Some(&input.network),
        Some(&input.address),
    )
    .map_err(AppError::Validation)?;
    Ok((input.label.trim().to_owned(), currency, network, address))
}
