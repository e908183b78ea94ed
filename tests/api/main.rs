//! Integration tests through HTTP. Every test runs on both backends (`…::sqlite`,
//! `…::postgres`), each on a fresh database. The tests that need no database run once: the
//! check that docs/AUTHORIZATION.md shows the authorization matrix, the check that each crate
//! depends only on the layers below it, a panicking handler's answer, the webhook receiver's
//! own checks (its HMAC, the documented example), the check that every failpoint has a test,
//! and the reference peer's own tests (`operations/peer.rs`), which use no Tauros database.
//! PostgreSQL: see `helpers/postgres.rs` (plain `cargo test` starts a throwaway server).
//!
//! The tests are in four folders, by what they cover: [`resources`] (one module per resource
//! or surface a user drives), [`contract`] (the rules every route keeps), [`tenancy`]
//! (organisations and clients kept apart and served fairly) and [`operations`] (running it).
//! A test's name says where it lives: `resources::jobs::a_claimer_passes_over_a_locked_job`.
//! The fixtures they share are in [`helpers`].

// Tests may panic on unexpected results: that is how they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod contract;
mod operations;
mod resources;
mod tenancy;
