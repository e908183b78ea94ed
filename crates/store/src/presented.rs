//! The port for authenticated reads in one statement: the presented credential is read with
//! the record, one round trip in all. Nothing is cached, so a revoked key fails on the next
//! request on every replica; a record read for a credential that fails is never used.

use super::identity::{AgentRow, ApiKeyRow, KeyWithAgent, SessionRow, UserRow};
use super::invoices::{InvoiceFilter, InvoiceJoined};
use crate::error::StoreResult;
use crate::query::Page;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use uuid::Uuid;

/// The credential a request presents, as the store looks it up.
#[derive(Clone, Copy, Debug)]
pub enum Presented<'a> {
    /// An API key, by the id embedded in it.
    ApiKey(Uuid),
    /// A session, by the hash of its token.
    Session(&'a [u8]),
}

/// The stored credential that matched, with whom it belongs to.
#[derive(Clone, Debug)]
pub enum Presenter {
    ApiKey(ApiKeyRow, AgentRow),
    Session(SessionRow, UserRow),
}

/// Reads joined to the credential that asks for them.
#[async_trait]
pub trait PresentedRead: Send {
    /// Invoice `id` with the credential: `None` when none matches; the invoice `None` if absent.
    async fn invoice_joined_presented(
        &mut self,
        credential: Presented<'_>,
        id: Uuid,
    ) -> StoreResult<Option<(Presenter, Option<InvoiceJoined>)>>;

    /// The invoice the key's agent created with `idempotency_key`, with the key.
    async fn invoice_by_key_presented(
        &mut self,
        key_id: Uuid,
        idempotency_key: &str,
    ) -> StoreResult<Option<(KeyWithAgent, Option<InvoiceJoined>)>>;

    /// A page of the key's own agent's invoices, with the key (`filter.scope` is not read).
    async fn own_invoices_presented(
        &mut self,
        key_id: Uuid,
        filter: &InvoiceFilter,
        page: Page,
    ) -> StoreResult<Option<(KeyWithAgent, Vec<InvoiceJoined>)>>;
}

/// An API key and its agent under `c_` column names (no collision), read by position.
#[derive(Clone, Debug)]
pub struct PresentedKey {
    pub(crate) c_agent_id: Uuid,
    pub(crate) c_org_id: Uuid,
    pub(crate) c_owner_id: Uuid,
    pub(crate) c_agent_name: String,
    pub(crate) c_capabilities: String,
    pub(crate) c_agent_created_at: DateTime<Utc>,
    pub(crate) c_agent_updated_at: DateTime<Utc>,
    pub(crate) c_key_id: Uuid,
    pub(crate) c_key_hash: Vec<u8>,
    pub(crate) c_key_created_at: DateTime<Utc>,
    pub(crate) c_key_expires_at: DateTime<Utc>,
    pub(crate) c_key_revoked_at: Option<DateTime<Utc>>,
    pub(crate) c_key_last_used_at: Option<DateTime<Utc>>,
}

impl From<PresentedKey> for KeyWithAgent {
    fn from(k: PresentedKey) -> KeyWithAgent {
        KeyWithAgent {
            agent: AgentRow {
                id: k.c_agent_id,
                org_id: k.c_org_id,
                owner_id: k.c_owner_id,
                name: k.c_agent_name,
                capabilities: k.c_capabilities,
                created_at: k.c_agent_created_at,
                updated_at: k.c_agent_updated_at,
            },
            key_id: k.c_key_id,
            key_hash: k.c_key_hash,
            key_created_at: k.c_key_created_at,
            key_expires_at: k.c_key_expires_at,
            key_revoked_at: k.c_key_revoked_at,
            key_last_used_at: k.c_key_last_used_at,
        }
    }
}

/// A session and its human, under `c_` column names.
#[derive(Clone, Debug)]
pub struct PresentedSession {
    pub(crate) c_session_id: Uuid,
    pub(crate) c_org_id: Uuid,
    pub(crate) c_user_id: Uuid,
    pub(crate) c_token_hash: Vec<u8>,
    pub(crate) c_session_created_at: DateTime<Utc>,
    pub(crate) c_session_expires_at: DateTime<Utc>,
    pub(crate) c_email: String,
    pub(crate) c_email_normalized: String,
    pub(crate) c_role: String,
    pub(crate) c_password_hash: Option<String>,
    pub(crate) c_is_bootstrap: bool,
    pub(crate) c_user_created_at: DateTime<Utc>,
    pub(crate) c_user_updated_at: DateTime<Utc>,
    pub(crate) c_deactivated_at: Option<DateTime<Utc>>,
}

impl From<PresentedSession> for Presenter {
    fn from(s: PresentedSession) -> Presenter {
        Presenter::Session(
            SessionRow {
                id: s.c_session_id,
                org_id: s.c_org_id,
                user_id: s.c_user_id,
                token_hash: s.c_token_hash,
                created_at: s.c_session_created_at,
                expires_at: s.c_session_expires_at,
            },
            UserRow {
                id: s.c_user_id,
                org_id: s.c_org_id,
                email: s.c_email,
                email_normalized: s.c_email_normalized,
                role: s.c_role,
                password_hash: s.c_password_hash,
                is_bootstrap: s.c_is_bootstrap,
                created_at: s.c_user_created_at,
                updated_at: s.c_user_updated_at,
                deactivated_at: s.c_deactivated_at,
            },
        )
    }
}

impl From<KeyWithAgent> for Presenter {
    fn from(k: KeyWithAgent) -> Presenter {
        let (key, agent) = k.split();
        Presenter::ApiKey(key, agent)
    }
}

impl From<PresentedKey> for Presenter {
    fn from(k: PresentedKey) -> Presenter {
        Presenter::from(KeyWithAgent::from(k))
    }
}
