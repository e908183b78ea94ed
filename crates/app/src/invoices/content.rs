//! A draft's content between `domain::invoice::draft` and the rows: party facts, seal, revision.

use crate::actor::{Actor, Agent};
use crate::clock::now;

use crate::error::{AppError, AppResult, FieldError};
use chrono::{DateTime, Utc};
use std::str::FromStr;
use tauros_domain::address::Network;
use tauros_domain::destination::DestinationState;
use tauros_domain::invoice::{
    DraftContent, KnownMembers, NamedDestination, Party, PartyFacts, check_parties,
};
use tauros_domain::payload::{
    Payload, PayloadDestination, Seal, SealError, StoredRevision, canonical, decode, seal,
};
use tauros_store::{
    CustomerRow, DestinationRow, DraftParties, DraftReads, Lock, Proposer, Reader, RevisionRow, Tx,
};
use uuid::Uuid;

/// The current revision's sealed content, which a revise keeps where the request omits it.
pub(super) fn current_content(r: &RevisionRow) -> AppResult<Payload> {
    Ok(decode(&r.canonical_payload)?.payload)
}

/// The customer and destination rows a draft names, for [`drafted`].
pub(super) type Parties = (Option<CustomerRow>, Option<DestinationRow>);

/// Loads a revise's parties (after the invoice lock) share-locked: nothing deletes or retires
/// them before the commit, yet drafts naming them do not queue behind each other. One read.
pub(super) async fn locked_parties(
    tx: &mut dyn Tx,
    actor: &Actor,
    content: &DraftContent,
) -> AppResult<Parties> {
    let rows = read_parties(tx, actor.org_id(), content, None).await?;
    Ok((rows.customer, rows.destination))
}

/// A create's first read: [`locked_parties`] with the agent held ([`Agent::hold`]) and, maybe,
/// its invoice under `key`. `None` when the key is taken: a concurrent create won before this
/// unit began, and this answers as its replay.
pub(super) async fn create_parties(
    tx: &mut dyn Tx,
    agent: &Agent,
    key: &str,
    content: &DraftContent,
) -> AppResult<Option<Parties>> {
    let rows = read_parties(tx, agent.org_id, content, Some((agent, key))).await?;
    Ok((!rows.key_taken).then_some((rows.customer, rows.destination)))
}

/// The one read of [`locked_parties`] and [`create_parties`]; then the failpoints, in row order.
async fn read_parties(
    tx: &mut dyn Tx,
    org_id: Uuid,
    content: &DraftContent,
    proposer: Option<(&Agent, &str)>,
) -> AppResult<DraftParties> {
    let reads = DraftReads {
        customer_id: content.customer_id,
        destination_id: content.destination_id,
        proposer: proposer.map(|(agent, key)| Proposer {
            agent_id: agent.id,
            key,
        }),
    };
    let rows = tx.lock_draft_parties(org_id, reads, Lock::Share).await?;
    if let Some((agent, _)) = proposer {
        agent.held(rows.agent.as_ref())?;
    }
    failpoint!(org_id, CustomerLocked);
    failpoint!(org_id, DestinationLocked);
    Ok(rows)
}

/// What create, revise and preview share for a well-formed body: party rules, seal, revision row.
pub(super) fn drafted(
    actor: &Actor,
    content: &DraftContent,
    parties: (Option<CustomerRow>, Option<DestinationRow>),
    invoice: (Uuid, Uuid),
    number: i32,
    created_at: DateTime<Utc>,
) -> AppResult<RevisionRow> {
    let (customer, destination) = parties;
    check_parties(facts(
        actor,
        content.known(),
        customer.as_ref(),
        destination.as_ref(),
    ))
    .map_err(AppError::Validation)?;
    let destination =
        destination.ok_or_else(|| AppError::Internal("checked destination vanished".into()))?;
    let sealed = seal_into(content, &destination)?;
    Ok(revision_row(
        content,
        invoice,
        number,
        &destination,
        &sealed,
        created_at,
    ))
}

/// The party rules of a draft refused anyway, on what could be read, to list every problem.
pub(super) async fn refused_parties(
    conn: &mut dyn Reader,
    actor: &Actor,
    known: KnownMembers,
) -> AppResult<Vec<FieldError>> {
    let org_id = actor.org_id();
    let customer = match known.customer_id {
        Some(id) => conn.customer_by_id(org_id, id).await?,
        None => None,
    };
    let destination = match known.destination_id {
        Some(id) => conn.destination_by_id(org_id, id).await?,
        None => None,
    };
    let facts = facts(actor, known, customer.as_ref(), destination.as_ref());
    Ok(check_parties(facts).err().unwrap_or_default())
}

fn facts<'a>(
    actor: &Actor,
    known: KnownMembers,
    customer: Option<&CustomerRow>,
    destination: Option<&'a DestinationRow>,
) -> PartyFacts<'a> {
    PartyFacts {
        today: now().date_naive(),
        due_date: known.due_date,
        currency: known.currency,
        customer: party(actor, known.customer_id, customer, |c| c.agent_id, |_| ()),
        destination: party(
            actor,
            known.destination_id,
            destination,
            |d| d.agent_id,
            |d| NamedDestination {
                active: d.state == DestinationState::Active,
                currency: &d.currency,
            },
        ),
    }
}

/// A named party as the rules see it: absent, not the agent's own, or its facts from `seen`.
fn party<'a, R, T>(
    actor: &Actor,
    named: Option<Uuid>,
    row: Option<&'a R>,
    owner: impl Fn(&R) -> Uuid,
    seen: impl Fn(&'a R) -> T,
) -> Party<T> {
    match (named, row) {
        (None, _) => Party::NotNamed,
        (Some(_), Some(row)) if is_agents_own(actor, owner(row)) => Party::Agents(seen(row)),
        (Some(_), _) => Party::NotAgents,
    }
}

/// Agents alone create and revise invoices, each with its own customers and destinations.
fn is_agents_own(actor: &Actor, agent_id: Uuid) -> bool {
    matches!(actor, Actor::Agent(a) if a.id == agent_id)
}

/// The seal of `content` paid into a destination with this stored network and address.
pub(super) fn seal_to(
    content: &DraftContent,
    destination_id: Uuid,
    network: &str,
    address: &str,
) -> AppResult<Seal> {
    seal(&payload_to(content, destination_id, network, address)?).map_err(|e| unsealable(&e))
}

/// The canonical bytes [`seal_to`] hashes, not hashed.
pub(super) fn canonical_to(
    content: &DraftContent,
    destination_id: Uuid,
    network: &str,
    address: &str,
) -> AppResult<String> {
    canonical(&payload_to(content, destination_id, network, address)?).map_err(|e| unsealable(&e))
}

/// `content` as the payload it is when paid into this stored network and address.
fn payload_to(
    content: &DraftContent,
    destination_id: Uuid,
    network: &str,
    address: &str,
) -> AppResult<Payload> {
    let network = Network::from_str(network)
        .map_err(|_| AppError::Internal("stored network unreadable".into()))?;
    Ok(content.payload(PayloadDestination {
        id: destination_id,
        network,
        address: address.to_owned(),
    }))
}

fn unsealable(e: &SealError) -> AppError {
    AppError::Validation(vec![FieldError::new("lines", e)])
}

/// The seal of `content` paid into `destination`.
fn seal_into(content: &DraftContent, destination: &DestinationRow) -> AppResult<Seal> {
    seal_to(
        content,
        destination.id,
        &destination.network,
        &destination.address,
    )
}

/// Whether `content` seals to exactly `revision`'s payload (same destination, same hash).
pub(super) fn seals_as(content: &DraftContent, revision: &RevisionRow) -> AppResult<bool> {
    if content.destination_id != revision.payment_destination_id {
        return Ok(false);
    }
    let sealed = seal_to(
        content,
        revision.payment_destination_id,
        &revision.destination_network,
        &revision.destination_address,
    )?;
    Ok(sealed.hash == revision.payload_hash)
}

/// A new revision row of `content`, sealed into `destination`.
fn revision_row(
    content: &DraftContent,
    invoice: (Uuid, Uuid),
    number: i32,
    destination: &DestinationRow,
    sealed: &Seal,
    created_at: DateTime<Utc>,
) -> RevisionRow {
    let (org_id, invoice_id) = invoice;
    RevisionRow {
        id: Uuid::now_v7(),
        org_id,
        invoice_id,
        number,
        customer_id: content.customer_id,
        payment_destination_id: destination.id,
        destination_network: destination.network.clone(),
        destination_address: destination.address.clone(),
        currency: content.currency.code().to_owned(),
        due_date: content.due_date,
        total_minor: sealed.total_minor.to_string(),
        reasoning: content.reasoning.clone(),
        canonical_payload: sealed.canonical.clone(),
        payload_hash: sealed.hash.clone(),
        created_at,
    }
}

/// A stored revision as the seal's verifier reads it.
pub(super) fn stored(r: &RevisionRow) -> StoredRevision<'_> {
    StoredRevision {
        customer_id: r.customer_id,
        destination_id: r.payment_destination_id,
        network: &r.destination_network,
        address: &r.destination_address,
        currency: &r.currency,
        due_date: r.due_date,
        total_minor: &r.total_minor,
    }
}
