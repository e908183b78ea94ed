//! Pure rules: no I/O, no async, no database, no HTTP, so all of it is unit-testable.

#![forbid(unsafe_code)]

pub mod address;
pub mod audit;
mod base62;
pub mod bounds;
pub mod currency;
pub mod destination;
pub mod effect;
pub mod error;
pub mod fingerprint;
pub mod governance;
pub mod hex;
pub mod identity;
pub mod input;
pub mod invoice;
pub mod job;
pub mod lines;
pub mod money;
pub mod payload;
pub mod quantity;
pub mod resolution;
pub mod settlement;
pub mod text;
pub mod visibility;
pub mod webhook;
