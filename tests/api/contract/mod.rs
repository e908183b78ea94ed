//! The rules every route keeps, tested across routes rather than per resource: what a bad body
//! hears ([`bodies`], [`one_answer`]), the conventions of every answer ([`conventions`],
//! [`agent_hints`], [`document`]: the OpenAPI document against the server), bounds per record
//! ([`bounds`]), replays and idempotency ([`replays`]), requests racing each other
//! ([`concurrency`], [`races`]), the invoice state machine against a model ([`model`]), who may
//! do what ([`authorization`], [`capabilities`], [`authority`], [`presented`]), issuing that
//! never ends in a dead end ([`issuing_dead_ends`]), and the adversarial scenarios of
//! docs/SECURITY.md ([`adversarial`]).

pub mod adversarial;
pub mod agent_hints;
pub mod authority;
pub mod authorization;
pub mod bodies;
pub mod bounds;
pub mod capabilities;
pub mod concurrency;
pub mod conventions;
pub mod document;
pub mod issuing_dead_ends;
pub mod model;
pub mod one_answer;
pub mod presented;
pub mod races;
pub mod replays;
