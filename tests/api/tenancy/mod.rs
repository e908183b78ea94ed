//! Organisations and clients kept apart and served fairly (docs/contract/api.md, "Tenancy";
//! docs/SECURITY.md): no answer depends on another organisation's data ([`oracles`]), what an
//! anonymous client may cost ([`anonymous`]), guessing that cannot lock a human out
//! ([`lockout`]), attacks on the running service and the rate
//! limits that refuse them ([`security`]), job claims and webhook deliveries that take turns
//! across organisations ([`fair_work`]), and slow or silent clients that cannot hold the
//! server ([`slow_clients`]).

pub mod anonymous;
pub mod fair_work;
pub mod lockout;
pub mod oracles;
pub mod security;
pub mod slow_clients;
