//! Running it: the real binary and its commands ([`serve`], [`bootstrap`]), the crates' layers
//! ([`architecture`]), the schema after every migration ([`schema`]), a failure after every
//! statement of a transaction ([`failpoints`]), a panicking handler's answer ([`panics`]), a
//! PostgreSQL formation's hosts and failovers ([`formation`]), and the reference peer that
//! issuing talks to ([`peer`]).

pub mod architecture;
pub mod bootstrap;
pub mod failpoints;
pub mod formation;
pub mod panics;
pub mod peer;
pub mod schema;
pub mod serve;
