//! Payment destinations: created by an agent for itself, immutable details, idempotent
//! deactivation, supersede in one transaction, optional idempotency key on create.

use super::customers::{scope_of, sees_agent};
use super::{Actor, App, AppError, AppResult, AuditActor, FieldError, audit, now};
use super::{KeyHolder, PageRequest, Replayed, list_filter};
use chrono::{DateTime, Utc};
use std::str::FromStr;
use tauros_domain::address::Network;
use tauros_domain::currency::Currency;
use tauros_domain::destination::DestinationState;
use tauros_domain::error::required;
use tauros_domain::fingerprint::{fingerprint, key_error, key_is_valid};
use tauros_domain::identity::Capability;
use tauros_domain::text::required_text;
use tauros_store::{Constraint, DestinationRow, Lock, StoreError};
use uuid::Uuid;

/// What an agent sends to create a destination.
#[derive(Debug, Clone)]
pub struct NewDestination {
    /// Display label (not hashed), 1–160 characters.
    pub label: Option<String>,
    pub currency: Option<String>,
    pub network: Option<String>,
    /// Address on that network.
    pub address: Option<String>,
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
    /// The destination this one replaced.
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
    /// An agent registers a destination for itself. With an idempotency key, a repeat of the
    /// same body returns the original (`replayed = true`); another body is a conflict.
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
            return Err(AppError::Validation(vec![key_error("Idempotency-Key")]));
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
        if let Some(key) = idempotency_key {
            let mut conn = self.store.reader().await?;
            if let Some(existing) = conn.destination_by_key(agent.org_id, agent.id, key).await? {
                return replay(existing, &request_hash);
            }
        }
        let now = now();
        let row = DestinationRow {
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
        };
        let mut tx = self.store.begin().await?;
        agent.hold(&mut *tx).await?;
        // Under the agent's lock the key is looked up again: a concurrent request with the
        // same key that won is visible now, and this one answers as its replay, after this
        // unit's commit (on SQLite the winner may sit in the same shared commit).
        if let Some(key) = idempotency_key
            && let Some(existing) = tx.destination_by_key(agent.org_id, agent.id, key).await?
        {
            tx.commit().await?;
            return replay(existing, &request_hash);
        }
        let actor_audit = AuditActor::agent(agent);
        if let Some(old_id) = input.supersedes_id {
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
        match tx.insert_destination(&row).await {
            Ok(()) => {}
            // A concurrent request with the same key won: answer as its replay.
            // A backstop (the lookup under the lock above finds a winner first): the winner
            // has committed, so a fresh read sees it.
            Err(StoreError::Conflict(Constraint::DestinationKey)) => {
                drop(tx);
                let key = idempotency_key.unwrap_or_default();
                let mut conn = self.store.reader().await?;
                let existing = conn.destination_by_key(agent.org_id, agent.id, key).await?;
                return replay(
                    existing.ok_or(AppError::Internal("lost destination".into()))?,
                    &request_hash,
                );
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
            tx.set_destination_state(row.org_id, old_id, DestinationState::Superseded, now)
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
        tx.commit().await?;
        Ok(Replayed::fresh(row.into()))
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
        let mut conn = self.store.reader().await?;
        let rows = conn
            .destinations(actor.org_id(), scope_of(actor), state, page.into())
            .await?;
        Ok(rows.into_iter().map(Into::into).collect())
    }

    /// One destination the caller may see.
    pub async fn get_destination(&self, actor: &Actor, id: Uuid) -> AppResult<DestinationView> {
        actor.require(Capability::Invoicing)?;
        let mut conn = self.store.reader().await?;
        let row = conn
            .destination_by_id(actor.org_id(), id)
            .await?
            .ok_or(AppError::NotFound)?;
        if !sees_agent(&mut *conn, actor, row.agent_id).await? {
            return Err(AppError::NotFound);
        }
        Ok(row.into())
    }

    /// The owning agent or its human stops a destination from receiving money. Idempotent: a
    /// destination that already receives nothing is returned unchanged, nothing written.
    pub async fn deactivate_destination(
        &self,
        actor: &Actor,
        id: Uuid,
    ) -> AppResult<DestinationView> {
        actor.require(Capability::Invoicing)?;
        let mut tx = self.store.begin().await?;
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
        tx.commit().await?;
        row.state = DestinationState::Deactivated;
        row.updated_at = now;
        Ok(row.into())
    }
}

fn replay(existing: DestinationRow, request_hash: &str) -> AppResult<Replayed<DestinationView>> {
    if existing.request_hash.as_deref() == Some(request_hash) {
        Ok(Replayed::replay(existing.into()))
    } else {
        Err(AppError::IdempotencyConflict(KeyHolder::Destination(
            existing.id,
        )))
    }
}

/// Field rules of a new destination, every offending field at once.
fn validate_destination(input: &NewDestination) -> AppResult<(String, Currency, Network, String)> {
    let mut errors = Vec::new();
    let label = required_text("label", input.label.as_deref(), 160, &mut errors);
    let currency = required("currency", input.currency.as_deref(), &mut errors).and_then(|c| {
        Currency::from_str(c.trim())
            .map_err(|e| errors.push(FieldError::new("currency", &e)))
            .ok()
    });
    let network = required("network", input.network.as_deref(), &mut errors).and_then(|n| {
        Network::from_str(n.trim())
            .map_err(|e| errors.push(FieldError::new("network", &e)))
            .ok()
    });
    let address = required("address", input.address.as_deref(), &mut errors);
    let mut checked_address = None;
    if let (Some(currency), Some(network), Some(address)) = (currency, network, address) {
        match network.check_carries(currency) {
            Err(e) => errors.push(FieldError::new("network", &e)),
            Ok(()) => match network.validate_address(address) {
                Ok(a) => checked_address = Some(a),
                Err(e) => errors.push(FieldError::new("address", &e)),
            },
        }
    }
    match (label, currency, network, checked_address) {
        (Some(l), Some(c), Some(n), Some(a)) if errors.is_empty() => Ok((l, c, n, a)),
        _ => Err(AppError::Validation(errors)),
    }
}
