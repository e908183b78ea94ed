//! The adversarial scenarios (docs/SECURITY.md, "The adversarial scenarios"), over HTTP:
//! authority escalation, smuggled fields, state manipulation, cross-tenant probing,
//! destination and revision safety, replay rules, payload integrity and money rules. Each test
//! checks what a careful user would: the status, the code and its members, and that nothing was
//! written when the answer is a refusal.
//!
//! One module per group of scenarios; the invoice commands, reads and row counts they use are
//! in `crate::helpers`.

mod authority;
mod destinations;
mod integrity;
mod money;
mod replays;
mod revisions;
mod state;
mod tenancy;

use crate::helpers::without_request_id;
use reqwest::{Response, StatusCode};
use serde_json::Value;

/// Asserts two responses are identical apart from the request id; returns the shared status
/// and body.
async fn identical(foreign: Response, random: Response) -> (StatusCode, Value) {
    let foreign = without_request_id(foreign).await;
    let random = without_request_id(random).await;
    assert_eq!(
        foreign, random,
        "a foreign id must answer exactly like a random one"
    );
    foreign
}
