//! One module per resource or surface a user drives, each through its routes from the first
//! request to the last: humans and their sessions ([`accounts`], [`auth`]), agents and their
//! keys ([`agents`]), the organisation and its four eyes ([`organisation`], [`governance`]),
//! customers and destinations ([`parties`]), invoices, their dry run and their issuing
//! ([`invoices`], [`preview`], [`issuing`], [`issue_jobs`]), getting paid ([`settlement`],
//! [`payments`]), the job queue ([`jobs`]), signed webhooks ([`webhooks`]), and the two other
//! ways in, the approver console ([`console`]) and the MCP tools ([`mcp`]). A rule every route
//! keeps is in `contract`, not here.

pub mod accounts;
pub mod agents;
pub mod auth;
pub mod console;
pub mod governance;
pub mod invoices;
pub mod issue_jobs;
pub mod issuing;
pub mod jobs;
pub mod mcp;
pub mod organisation;
pub mod parties;
pub mod payments;
pub mod preview;
pub mod settlement;
pub mod webhooks;
