//! Integration tests through HTTP. Every test runs on both backends (`…::sqlite`,
//! `…::postgres`), each on a fresh database. The tests that need no database run once: the
//! check that docs/AUTHORIZATION.md shows the authorization matrix, the check that each crate
//! depends only on the layers below it, a panicking handler's answer, the webhook receiver's
//! own checks (its HMAC, the documented example), the check that every failpoint has a test,
//! and the reference peer's own tests (`peer.rs`), which use no Tauros database. PostgreSQL:
//! see `helpers/postgres.rs` (plain `cargo test` starts a throwaway server).

// Tests may panic on unexpected results: that is how they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod accounts;
mod adversarial;
mod agent_hints;
mod agents;
mod anonymous;
mod architecture;
mod auth;
mod authority;
mod authorization;
mod bodies;
mod bootstrap;
mod bounds;
mod capabilities;
mod concurrency;
mod console;
mod conventions;
mod document;
mod failpoints;
mod fair_work;
mod formation;
mod governance;
mod invoices;
mod issue_jobs;
mod issuing;
mod issuing_dead_ends;
mod jobs;
mod mcp;
mod model;
mod one_answer;
mod oracles;
mod organisation;
mod panics;
mod parties;
mod payments;
mod peer;
mod presented;
mod preview;
mod races;
mod replays;
mod schema;
mod security;
mod serve;
mod settlement;
mod slow_clients;
mod webhooks;
