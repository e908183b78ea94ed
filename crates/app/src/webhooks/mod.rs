//! Webhooks (docs/contract/effects.md §2); secrets sealed with the operator's key, if any.

mod attempts;
mod deliveries;
mod endpoints;
mod pruning;
mod views;

pub use attempts::AttemptRecorded;
pub(crate) use deliveries::enqueue_deliveries;
pub use deliveries::{Delivery, DeliveryArgs, DeliveryRefused};
pub use views::{
    NewWebhookEndpoint, WebhookAttemptView, WebhookDeliveryView, WebhookEndpointView, WithSecret,
};

use chrono::{DateTime, Utc};
use tauros_domain::webhook::Health;
use tauros_store::{EndpointHealth, WebhookEndpointRow};
use uuid::Uuid;

/// Binds a sealed secret to its row: another row's sealed value does not open here.
fn seal_context(org_id: Uuid, endpoint_id: Uuid) -> Vec<u8> {
    [org_id.as_bytes().as_slice(), endpoint_id.as_bytes()].concat()
}

/// An endpoint's health as the domain's rules read it.
fn health_of(endpoint: &WebhookEndpointRow) -> Health {
    Health {
        failing_since: endpoint.failing_since,
        last_success_at: endpoint.last_success_at,
        disabled_at: endpoint.disabled_at,
    }
}

/// `health` as the store writes it, the endpoint changed at `updated_at`.
fn stored_health(health: Health, updated_at: DateTime<Utc>) -> EndpointHealth {
    EndpointHealth {
        disabled_at: health.disabled_at,
        failing_since: health.failing_since,
        last_success_at: health.last_success_at,
        updated_at,
    }
}
