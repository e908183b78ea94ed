//! Integration tests through HTTP. Every test runs on both backends (`…::sqlite`,
//! `…::postgres`), each on a fresh database.

// Tests may panic on unexpected results: that is how they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod adversarial;
mod agents;
mod auth;
mod authorization;
mod bootstrap;
mod capabilities;
mod concurrency;
mod conventions;
mod document;
mod invoices;
mod model;
mod organisation;
mod parties;
mod races;
mod replays;
mod serve;
