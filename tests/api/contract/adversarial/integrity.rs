//! Payload integrity: append-only tables refuse changes, and tampering outside Tauros is
//! detected.

use crate::helpers::{TestApp, both_backends, expect_problem, expect_status, id_of};
use reqwest::StatusCode;
use serde_json::json;

both_backends!(
    append_only_tables_refuse_update_and_delete,
    tampering_outside_tauros_is_detected,
);

async fn append_only_tables_refuse_update_and_delete(app: TestApp) {
    let b = app.billing().await;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    expect_status(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::OK,
    )
    .await;
    let ok = json!({"ok": true, "revisions": [{"number": 1, "ok": true}], "events": {"ok": true, "broken_at": null}});
    assert_eq!(app.verify(&b.org.approver_token, id).await, ok);
    let before = app.invoice_rows().await;
    for statement in [
        "update invoice_revisions set total_minor = '1'",
        "update invoice_revisions set due_date = '2099-12-31'",
        "update invoice_revisions set reasoning = 'rewritten'",
        "delete from invoice_revisions",
        "update decisions set decision = 'rejected'",
        "update decisions set payload_hash = 'forged'",
        "delete from decisions",
        "update invoice_events set note = 'forged'",
        "update invoice_events set actor_kind = 'agent'",
        "delete from invoice_events",
        "update audit_events set action = 'forged'",
        "delete from audit_events",
    ] {
        assert!(
            !app.sql_exec(statement).await,
            "the database must refuse: {statement}"
        );
    }
    assert_eq!(app.invoice_rows().await, before);
    assert_eq!(
        app.verify(&b.org.approver_token, id).await,
        ok,
        "the refused tampering left the invoice intact"
    );
    let decided = app.decisions(&b.org.approver_token, id).await;
    assert_eq!(decided[0]["decision"], "approved");
}

/// Someone with the power to disable the triggers (outside Tauros) edits history: verify
/// reports it, and no decision can be recorded on an altered revision.
async fn tampering_outside_tauros_is_detected(app: TestApp) {
    let b = app.billing().await;
    let pending = app.pending(&b, "inv-1").await;
    let id = id_of(&pending);
    let postgres = !app.database_url.starts_with("sqlite");
    let unguard = |table: &str| {
        if postgres {
            format!("alter table {table} disable trigger {table}_append_only")
        } else {
            format!("drop trigger {table}_no_update")
        }
    };
    assert!(app.sql_exec(&unguard("invoice_revisions")).await);
    assert!(
        app.sql_exec("update invoice_revisions set due_date = '2099-12-31'")
            .await
    );
    let report = app.verify(&b.org.approver_token, id).await;
    assert_eq!(report["ok"], false);
    assert_eq!(report["revisions"], json!([{"number": 1, "ok": false}]));
    assert_eq!(report["events"]["ok"], true);
    let before = app.invoice_rows().await;
    expect_problem(
        app.approve(&b.org.approver_token, &pending).await,
        StatusCode::CONFLICT,
        "payload_integrity",
    )
    .await;
    assert_eq!(app.invoice_rows().await, before);

    // Editing a past event breaks the chain at that event.
    assert!(app.sql_exec(&unguard("invoice_events")).await);
    assert!(
        app.sql_exec("update invoice_events set note = 'approved by the CEO' where seq = 2")
            .await
    );
    let report = app.verify(&b.org.approver_token, id).await;
    assert_eq!(report["events"], json!({"ok": false, "broken_at": 2}));
}
