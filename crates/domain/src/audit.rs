//! The invoice audit trail as a hash chain, so editing, deleting or reordering an event shows.

use chrono::{DateTime, SecondsFormat, Utc};
use sha2::{Digest, Sha256};
use uuid::Uuid;

/// The `prev_hash` of an invoice's first event.
pub const GENESIS: &str = "0000000000000000000000000000000000000000000000000000000000000000";

/// The fields of one event that its hash covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventFields<'a> {
    pub invoice_id: Uuid,
    /// 1, 2, … per invoice.
    pub seq: i32,
    pub action: &'a str,
    /// State before (none for create_draft).
    pub from_state: Option<&'a str>,
    pub to_state: &'a str,
    /// `human`, `agent` or `system`.
    pub actor_kind: &'a str,
    /// The human or agent who acted; none for `system`.
    pub actor_id: Option<Uuid>,
    pub interface: &'a str,
    pub revision_id: Option<Uuid>,
    pub payload_hash: Option<&'a str>,
    /// The idempotency key (create only).
    pub idempotency_key: Option<&'a str>,
    pub note: Option<&'a str>,
    /// Hashed as RFC 3339 UTC with exactly six fractional digits.
    pub occurred_at: DateTime<Utc>,
    /// A decision's org settings in force: `(four_eyes, shared_review)`. Hashed only when
    /// present, so events written without it keep their hash.
    pub settings: Option<(bool, bool)>,
}

/// Lowercase hex SHA-256 of `prev_hash`, a newline, and the event's canonical JSON (keys sorted).
pub fn event_hash(prev_hash: &str, e: &EventFields<'_>) -> String {
    let mut body = serde_json::json!({
        "action": e.action,
        "actor_id": e.actor_id,
        "actor_kind": e.actor_kind,
        "from_state": e.from_state,
        "idempotency_key": e.idempotency_key,
        "interface": e.interface,
        "invoice_id": e.invoice_id,
        "note": e.note,
        "occurred_at": e.occurred_at.to_rfc3339_opts(SecondsFormat::Micros, true),
        "payload_hash": e.payload_hash,
        "revision_id": e.revision_id,
        "seq": e.seq,
        "to_state": e.to_state,
    });
    if let (Some((four_eyes, shared_review)), Some(map)) = (e.settings, body.as_object_mut()) {
        map.insert("four_eyes".into(), four_eyes.into());
        map.insert("shared_review".into(), shared_review.into());
    }
    let mut hasher = Sha256::new();
    hasher.update(prev_hash.as_bytes());
    hasher.update(b"\n");
    hasher.update(body.to_string().as_bytes());
    crate::hex::lower(&hasher.finalize())
}

/// Walks a trail in `seq` order; the `seq` of the first event that breaks the chain, if any.
pub fn first_break<'a>(
    events: impl IntoIterator<Item = (EventFields<'a>, &'a str, &'a str)>,
) -> Option<i32> {
    let mut walk = ChainWalk::default();
    events
        .into_iter()
        .find_map(|(fields, prev_hash, hash)| walk.step(&fields, prev_hash, hash).err())
}

/// [`first_break`] one event at a time, so a trail is checked page by page in bounded memory.
#[derive(Clone, Debug)]
pub struct ChainWalk {
    expected_seq: i32,
    expected_prev: String,
}

impl Default for ChainWalk {
    fn default() -> Self {
        ChainWalk {
            expected_seq: 1,
            expected_prev: GENESIS.to_owned(),
        }
    }
}

impl ChainWalk {
    /// Checks the next event of the trail: `Err(seq)` at the first broken link.
    pub fn step(
        &mut self,
        fields: &EventFields<'_>,
        prev_hash: &str,
        hash: &str,
    ) -> Result<(), i32> {
        if fields.seq != self.expected_seq
            || prev_hash != self.expected_prev
            || event_hash(prev_hash, fields) != hash
        {
            return Err(fields.seq);
        }
        self.expected_seq += 1;
        hash.clone_into(&mut self.expected_prev);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(seq: i32, action: &'static str) -> EventFields<'static> {
        EventFields {
            invoice_id: Uuid::nil(),
            seq,
            action,
            from_state: None,
            to_state: "draft",
            actor_kind: "agent",
            actor_id: Some(Uuid::nil()),
            interface: "api",
            revision_id: None,
            payload_hash: None,
            idempotency_key: Some("k"),
            note: None,
            occurred_at: DateTime::from_timestamp(1_700_000_000, 123_456_000).unwrap(),
            settings: None,
        }
    }

    fn chain(events: &[EventFields<'static>]) -> Vec<(String, String)> {
        let mut prev = GENESIS.to_owned();
        events
            .iter()
            .map(|e| {
                let hash = event_hash(&prev, e);
                let link = (prev.clone(), hash.clone());
                prev = hash;
                link
            })
            .collect()
    }

    #[test]
    fn a_decisions_settings_are_hashed_and_events_without_them_keep_their_hash() {
        // A hash written before settings were recorded (computed from the body as it was).
        let before = {
            let e = event(3, "approve");
            let body = serde_json::json!({
                "action": e.action, "actor_id": e.actor_id, "actor_kind": e.actor_kind,
                "from_state": e.from_state, "idempotency_key": e.idempotency_key,
                "interface": e.interface, "invoice_id": e.invoice_id, "note": e.note,
                "occurred_at": "2023-11-14T22:13:20.123456Z", "payload_hash": e.payload_hash,
                "revision_id": e.revision_id, "seq": e.seq, "to_state": e.to_state,
            });
            let mut hasher = Sha256::new();
            hasher.update(format!("{GENESIS}\n{body}").as_bytes());
            // Written out here, not by `crate::hex::lower`: the expected value is computed
            // independently of the code it checks.
            hasher
                .finalize()
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        assert_eq!(event_hash(GENESIS, &event(3, "approve")), before);
        let with = |settings| EventFields {
            settings: Some(settings),
            ..event(3, "approve")
        };
        let on = event_hash(GENESIS, &with((true, false)));
        assert_ne!(on, before);
        assert_ne!(on, event_hash(GENESIS, &with((false, false))));
        assert_ne!(on, event_hash(GENESIS, &with((true, true))));
    }

    #[test]
    fn an_intact_chain_verifies_and_any_edit_breaks_it() {
        let events = vec![
            event(1, "create_draft"),
            event(2, "submit"),
            event(3, "approve"),
        ];
        let links = chain(&events);
        let walk = |evs: &[EventFields<'static>], links: &[(String, String)]| {
            let items: Vec<_> = evs
                .iter()
                .cloned()
                .zip(links.iter())
                .map(|(e, (p, h))| (e, p.as_str(), h.as_str()))
                .collect();
            first_break(items)
        };
        assert_eq!(walk(&events, &links), None);
        let mut edited = events.clone();
        edited[1].action = "withdraw";
        assert_eq!(walk(&edited, &links), Some(2));
        // Deleting the middle event breaks the link of the one after it.
        let gap = vec![events[0].clone(), events[2].clone()];
        let gap_links = vec![links[0].clone(), links[2].clone()];
        assert_eq!(walk(&gap, &gap_links), Some(3));
    }
}
