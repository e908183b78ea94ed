//! Integration tests through HTTP. Every test runs on both backends (`…::sqlite`,
//! `…::postgres`), each on a fresh database.

// Tests may panic on unexpected results: that is how they fail.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod helpers;

mod agents;
mod auth;
mod bootstrap;
mod conventions;
mod invoices;
mod organisation;
mod serve;
