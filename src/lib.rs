//! Tauros: AI agents propose invoices over a REST API, humans approve them.
//!
//! Layers: `domain` (pure rules) ← `app` (use cases) → `store` (the port and its PostgreSQL
//! and SQLite adapters); `http` is the REST surface over `app`, `mcp` the agents' tool surface
//! over the same `app` functions (mounted by `http`, sharing its wire types and problem
//! mapping). Dependencies point inward only:
//! `domain` knows none of the others, and `domain`, `app` and `store` know nothing of HTTP.
//! `peer` is the reference peer (`tauros peer`), a separate program that shares only the wire
//! format with the rest and imports none of it but the leaf `process` (signal handling).
//! `console` is the approver web page, static assets that `http` serves and that speak only to
//! the REST API from the browser.

#![forbid(unsafe_code)]

pub mod app;
pub mod config;
pub mod console;
pub mod domain;
pub mod effects;
pub mod http;
pub mod jobs;
pub mod mcp;
pub mod peer;
pub mod process;
pub mod store;
pub mod telemetry;
