//! The invoice state machine against a small independent model, through the real app layer
//! and a real database (docs/contract/domain.md §5, §7, §8; docs/RELIABILITY.md, S9).
//!
//! Proptest generates random command sequences (create with a key from a pool of two, revise
//! to a payload variant, submit, withdraw, the three decisions naming the current or a stale
//! revision with its hash or a wrong one, cancel), each by the agent, the approver or an
//! operator. Every command runs through `App` and through the model below (a few lines of
//! `match`, written from docs/contract/domain.md, not from the implementation). After every step
//! the outcome class (applied / replayed / which error code) must agree, and so must the state, the
//! revisions, the decisions and the events of every invoice. At the end of each case the
//! events written equal the successful non-replay commands, and `verify` reports ok.
//!
//! Each case runs on a fresh organisation inside the same test database; two setups are
//! drawn: the approver owns the agent (the operator sees nothing), or the operator owns it and
//! the approver sees it through `shared_review`.
//!
//! The runner honours the usual proptest variables (`PROPTEST_CASES`, `PROPTEST_RNG_SEED`);
//! a failure prints the shrunk command sequence. `MODEL_STATS=1 … -- --nocapture` prints each
//! command's outcome class, to check that the generator still reaches every outcome.

use crate::helpers::{Backend, IBAN, PASSWORD, TestApp, spawn_app};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use std::collections::HashMap;
use tauros_app::{
    Actor, Agent, AppError, DraftInput, Human, InvoiceView, NewAgent, NewDestination,
    OrgSettingsChange,
};
use tauros_domain::identity::{Interface, Role};
use tauros_domain::invoice::DecisionKind;
use tauros_domain::lines::LineInput;
use uuid::Uuid;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    Agent,
    Approver,
    Operator,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Setup {
    /// The approver owns the agent; the operator owns nothing and sees nothing.
    ApproverOwns,
    /// The operator owns the agent; `shared_review` lets the approver see and decide.
    OperatorOwns,
}

/// Which revision a decision names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Named {
    /// The current one.
    Current,
    /// The one before it (on revision 1: a revision of another invoice, or an unknown id).
    Previous,
}

/// Which hash a decision sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Hash {
    /// The named revision's own hash.
    OfNamed,
    /// A well-formed hash of nothing.
    Wrong,
}

/// One command. `slot` 0 and 1 are the invoices created with keys `key-0` and `key-1`; a
/// command on a slot not created yet goes to an unknown id.
#[derive(Clone, Copy, Debug)]
enum Cmd {
    Create {
        slot: usize,
        variant: u8,
        who: Who,
    },
    Revise {
        slot: usize,
        variant: u8,
        who: Who,
    },
    Submit {
        slot: usize,
        who: Who,
    },
    Withdraw {
        slot: usize,
        who: Who,
    },
    Decide {
        slot: usize,
        kind: DecisionKind,
        who: Who,
        named: Named,
        hash: Hash,
    },
    Cancel {
        slot: usize,
        who: Who,
    },
}

/// What a command should do: apply (`Ok(false)`), replay (`Ok(true)`), or fail with a code.
type Outcome = Result<bool, String>;

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Clone, Debug)]
struct ModelInvoice {
    state: &'static str,
    cancelled_by: Option<&'static str>,
    /// The payload variant of each revision, in order; the last is current.
    revisions: Vec<u8>,
    /// Revision index → the decision on it.
    decided: HashMap<usize, DecisionKind>,
    events: i64,
}

impl ModelInvoice {
    fn current(&self) -> usize {
        self.revisions.len() - 1
    }
}

struct Model {
    setup: Setup,
    slots: [Option<ModelInvoice>; 2],
}

fn err(code: &str) -> Outcome {
    Err(code.to_owned())
}

impl Model {
    fn sees(&self, who: Who) -> bool {
        match who {
            Who::Agent | Who::Approver => true,
            Who::Operator => self.setup == Setup::OperatorOwns,
        }
    }

    /// Visibility, then who may run it: the invoice a command acts on, or the refusal.
    fn target(
        &mut self,
        slot: usize,
        who: Who,
        allowed: &[Who],
    ) -> Result<&mut ModelInvoice, String> {
        let sees = self.sees(who);
        match &mut self.slots[slot] {
            Some(inv) if sees => {
                if allowed.contains(&who) {
                    Ok(inv)
                } else {
                    Err("forbidden".to_owned())
                }
            }
            _ => Err("not_found".to_owned()),
        }
    }

    /// The command that moves `cmd`'s invoice forward on the happy path, as a client that
    /// follows the lifecycle would send it (guided steps reach deep states far more often than
    /// blind ones). The kind of a decision and the variant of a revision come from `cmd`.
    fn natural(&self, cmd: Cmd) -> Cmd {
        let mut slot = slot_of(cmd);
        // A finished invoice: move on to the other key, if it is still free.
        if self.slots[slot]
            .as_ref()
            .is_some_and(|inv| ["rejected", "cancelled"].contains(&inv.state))
            && self.slots[1 - slot].is_none()
        {
            slot = 1 - slot;
        }
        let variant = match cmd {
            Cmd::Create { variant, .. } | Cmd::Revise { variant, .. } => variant,
            _ => 0,
        };
        let Some(inv) = &self.slots[slot] else {
            return Cmd::Create {
                slot,
                variant,
                who: Who::Agent,
            };
        };
        match (inv.state, cmd) {
            // After request_changes: revise, unless the client insists on submitting.
            ("draft", Cmd::Submit { .. }) => Cmd::Submit {
                slot,
                who: Who::Agent,
            },
            ("draft", _) if inv.decided.contains_key(&inv.current()) => Cmd::Revise {
                slot,
                variant: (inv.revisions[inv.current()] + 1) % 3,
                who: Who::Agent,
            },
            ("draft", _) => Cmd::Submit {
                slot,
                who: Who::Agent,
            },
            // The approver decides; what and on which revision and hash come from `cmd`.
            (
                "pending_approval",
                Cmd::Decide {
                    kind, named, hash, ..
                },
            ) => Cmd::Decide {
                slot,
                kind,
                who: Who::Approver,
                named,
                hash,
            },
            ("pending_approval", _) => Cmd::Decide {
                slot,
                kind: DecisionKind::Approved,
                who: Who::Approver,
                named: Named::Current,
                hash: Hash::OfNamed,
            },
            ("approved", _) => Cmd::Cancel {
                slot,
                who: Who::Approver,
            },
            _ => cmd,
        }
    }

    fn step(&mut self, cmd: Cmd) -> Outcome {
        match cmd {
            Cmd::Create { slot, variant, who } => {
                if who != Who::Agent {
                    return err("forbidden");
                }
                match &self.slots[slot] {
                    Some(inv) if inv.revisions[0] == variant => Ok(true),
                    Some(_) => err("idempotency_conflict"),
                    None => {
                        self.slots[slot] = Some(ModelInvoice {
                            state: "draft",
                            cancelled_by: None,
                            revisions: vec![variant],
                            decided: HashMap::new(),
                            events: 1,
                        });
                        Ok(false)
                    }
                }
            }
            Cmd::Revise { slot, variant, who } => {
                let inv = self.target(slot, who, &[Who::Agent])?;
                if !["draft", "pending_approval"].contains(&inv.state) {
                    return err("invalid_transition");
                }
                if inv.revisions[inv.current()] == variant {
                    return Ok(true);
                }
                inv.revisions.push(variant);
                inv.state = "draft";
                inv.events += 1;
                Ok(false)
            }
            Cmd::Submit { slot, who } => {
                let inv = self.target(slot, who, &[Who::Agent])?;
                match inv.state {
                    "pending_approval" => Ok(true),
                    "draft" if inv.decided.contains_key(&inv.current()) => {
                        err("revision_already_decided")
                    }
                    "draft" => {
                        inv.state = "pending_approval";
                        inv.events += 1;
                        Ok(false)
                    }
                    _ => err("invalid_transition"),
                }
            }
            Cmd::Withdraw { slot, who } => {
                let inv = self.target(slot, who, &[Who::Agent, Who::Approver, Who::Operator])?;
                match (inv.state, inv.cancelled_by) {
                    ("draft" | "pending_approval", _) => {
                        inv.state = "cancelled";
                        inv.cancelled_by = Some("withdraw");
                        inv.events += 1;
                        Ok(false)
                    }
                    ("cancelled", Some("withdraw")) => Ok(true),
                    _ => err("invalid_transition"),
                }
            }
            Cmd::Cancel { slot, who } => {
                let inv = self.target(slot, who, &[Who::Approver])?;
                match (inv.state, inv.cancelled_by) {
                    ("approved", _) => {
                        inv.state = "cancelled";
                        inv.cancelled_by = Some("cancel");
                        inv.events += 1;
                        Ok(false)
                    }
                    ("cancelled", Some("cancel")) => Ok(true),
                    _ => err("invalid_transition"),
                }
            }
            Cmd::Decide {
                slot,
                kind,
                who,
                named,
                hash,
            } => {
                let inv = self.target(slot, who, &[Who::Approver])?;
                let current = inv.current();
                // `None`: a revision that is not this invoice's.
                let named = match named {
                    Named::Current => Some(current),
                    Named::Previous => current.checked_sub(1),
                };
                // One approver per case, and a decision stores its revision's own hash.
                if let Some(existing) = named.and_then(|n| inv.decided.get(&n)) {
                    return if *existing == kind && hash == Hash::OfNamed {
                        Ok(true)
                    } else {
                        err("already_decided")
                    };
                }
                if inv.state != "pending_approval" {
                    return err("invalid_transition");
                }
                if named != Some(current) {
                    return err("stale_revision");
                }
                if hash == Hash::Wrong {
                    return err("payload_mismatch");
                }
                inv.decided.insert(current, kind);
                inv.state = match kind {
                    DecisionKind::Approved => "approved",
                    DecisionKind::Rejected => "rejected",
                    DecisionKind::ChangesRequested => "draft",
                };
                inv.events += 1;
                Ok(false)
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The real system.

struct Fixture {
    agent: Actor,
    approver: Actor,
    operator: Actor,
    customer_id: Uuid,
    destination_id: Uuid,
    due_date: String,
}

impl Fixture {
    fn actor(&self, who: Who) -> &Actor {
        match who {
            Who::Agent => &self.agent,
            Who::Approver => &self.approver,
            Who::Operator => &self.operator,
        }
    }
}

fn human(id: Uuid, org_id: Uuid, email: String, role: Role) -> Actor {
    Actor::Human(Human {
        id,
        org_id,
        email,
        role,
        session_id: Uuid::nil(),
        interface: Interface::Api,
    })
}

/// A fresh organisation: approver, operator, one agent (owned per `setup`), one customer and
/// one active EUR destination of that agent. Built through the app layer (one password hash).
async fn fixture(app: &TestApp, setup: Setup) -> Fixture {
    let tag = Uuid::new_v4().simple().to_string();
    let email = format!("approver-{tag}@example.com");
    let boot = app
        .app
        .bootstrap_approver(&format!("Model {tag}"), &email, PASSWORD.into())
        .await
        .unwrap();
    let org_id = boot.org_id;
    let approver = human(boot.user_id, org_id, email, Role::Approver);
    let tauros_app::Invited::Done(invited) = app
        .app
        .invite_user(
            &approver,
            &format!("operator-{tag}@example.com"),
            Role::Operator,
        )
        .await
        .unwrap()
    else {
        panic!("with four eyes off, an operator is invited at once");
    };
    let operator = human(invited.user.id, org_id, invited.user.email, Role::Operator);
    let owner = match setup {
        Setup::ApproverOwns => &approver,
        Setup::OperatorOwns => {
            app.app
                .update_org(
                    &approver,
                    OrgSettingsChange {
                        shared_review: Some(true),
                        four_eyes: None,
                    },
                )
                .await
                .unwrap();
            &operator
        }
    };
    let tauros_app::AgentCreated::Done(agent, _key) = app
        .app
        .create_agent(
            owner,
            NewAgent {
                name: "Model agent".into(),
                capabilities: vec![],
            },
        )
        .await
        .unwrap()
    else {
        panic!("an invoicing agent is created at once")
    };
    let customer = app
        .app
        .create_customer(
            owner,
            tauros_app::NewCustomer {
                agent_id: agent.id,
                name: "Acme Inc".into(),
                email: "billing@example.com".into(),
            },
        )
        .await
        .unwrap();
    let agent = Actor::Agent(Agent {
        id: agent.id,
        org_id,
        owner_id: agent.owner_id,
        name: agent.name,
        capabilities: agent.capabilities,
        interface: Interface::Api,
    });
    let destination = app
        .app
        .create_destination(
            &agent,
            NewDestination {
                label: "Account".into(),
                currency: "EUR".into(),
                network: "iban".into(),
                address: IBAN.into(),
                supersedes_id: None,
            },
            None,
        )
        .await
        .unwrap()
        .value;
    Fixture {
        agent,
        approver,
        operator,
        customer_id: customer.id,
        destination_id: destination.id,
        due_date: (chrono::Utc::now() + chrono::Duration::days(30))
            .date_naive()
            .to_string(),
    }
}

/// Payload variant `v`: the workshop line costs 400 + 10·v EUR; everything else is fixed.
fn lines(variant: u8) -> Vec<LineInput> {
    let unit = format!("{}", 400 + 10 * u32::from(variant));
    serde_json::from_value(serde_json::json!([
        {"description": "Discovery workshop", "quantity": "1", "unit_amount": unit},
        {"description": "Implementation days", "quantity": "2", "unit_amount": "400.00"},
    ]))
    .unwrap()
}

fn code(e: &AppError) -> String {
    match e {
        AppError::NotFound => "not_found".into(),
        AppError::Forbidden(_) => "forbidden".into(),
        AppError::FourEyesRequired(_) => "four_eyes_required".into(),
        AppError::InvalidTransition { .. } => "invalid_transition".into(),
        AppError::Conflict { code, .. } => (*code).into(),
        AppError::IdempotencyConflict(_) => "idempotency_conflict".into(),
        AppError::Validation(errors) => format!("validation_failed {errors:?}"),
        // Never expected: it fails the comparison with its whole text.
        other => format!("unexpected {other:?}"),
    }
}

/// One real invoice: its id and, per revision, (id, payload_hash).
#[derive(Clone, Debug)]
struct Real {
    id: Uuid,
    revisions: Vec<(Uuid, String)>,
}

const WRONG_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

async fn run(
    app: &TestApp,
    f: &Fixture,
    real: &[Option<Real>; 2],
    cmd: Cmd,
    step: usize,
) -> Result<(bool, Option<InvoiceView>), String> {
    // Commands on an invoice not created yet go to an id nobody has.
    let id = |slot: usize| real[slot].as_ref().map_or_else(Uuid::now_v7, |r| r.id);
    let result = match cmd {
        Cmd::Create { slot, variant, who } => {
            #[allow(
                clippy::needless_update,
                reason = "every field it does not name stays unset, those added later too"
            )]
            let input = DraftInput {
                customer_id: Some(f.customer_id),
                payment_destination_id: Some(f.destination_id),
                currency: Some("EUR".into()),
                due_date: Some(f.due_date.clone()),
                lines: Some(lines(variant)),
                reasoning: Some(format!("Statement of work, attempt {step}.")),
                ..DraftInput::default()
            };
            app.app
                .create_draft(f.actor(who), &format!("key-{slot}"), input)
                .await
        }
        Cmd::Revise { slot, variant, who } => {
            // Only the money and (unsealed) reasoning; the rest merges from the current revision.
            let input = DraftInput {
                lines: Some(lines(variant)),
                reasoning: Some(format!("Reworded at step {step}.")),
                ..DraftInput::default()
            };
            app.app.revise(f.actor(who), id(slot), input).await
        }
        Cmd::Submit { slot, who } => app.app.submit(f.actor(who), id(slot)).await,
        Cmd::Withdraw { slot, who } => app.app.withdraw(f.actor(who), id(slot)).await,
        Cmd::Cancel { slot, who } => {
            app.app
                .cancel(
                    f.actor(who),
                    id(slot),
                    Some("The client paused the project."),
                )
                .await
        }
        Cmd::Decide {
            slot,
            kind,
            who,
            named,
            hash,
        } => {
            let (revision_id, revision_hash) = match &real[slot] {
                None => (Uuid::now_v7(), WRONG_HASH.to_owned()),
                Some(r) => {
                    let n = r.revisions.len();
                    match named {
                        Named::Current => r.revisions[n - 1].clone(),
                        Named::Previous if n >= 2 => r.revisions[n - 2].clone(),
                        // Revision 1 has no predecessor: name the other invoice's current
                        // revision if there is one, else an id nobody has.
                        Named::Previous => real[1 - slot]
                            .as_ref()
                            .map(|o| o.revisions[o.revisions.len() - 1].clone())
                            .unwrap_or_else(|| (Uuid::now_v7(), WRONG_HASH.to_owned())),
                    }
                }
            };
            let payload_hash = match hash {
                Hash::OfNamed => revision_hash,
                Hash::Wrong => WRONG_HASH.to_owned(),
            };
            let reason = match kind {
                DecisionKind::Approved => None,
                DecisionKind::Rejected => Some("Wrong customer."),
                DecisionKind::ChangesRequested => Some("Split the workshop line."),
            };
            app.app
                .decide(
                    f.actor(who),
                    id(slot),
                    kind,
                    Some(revision_id),
                    Some(&payload_hash),
                    reason,
                )
                .await
        }
    };
    match result {
        Ok(answer) => Ok((answer.replayed, Some(answer.value))),
        Err(e) => Err(code(&e)),
    }
}

fn slot_of(cmd: Cmd) -> usize {
    match cmd {
        Cmd::Create { slot, .. }
        | Cmd::Revise { slot, .. }
        | Cmd::Submit { slot, .. }
        | Cmd::Withdraw { slot, .. }
        | Cmd::Decide { slot, .. }
        | Cmd::Cancel { slot, .. } => slot,
    }
}

/// One generated step: a command, whether the model turns it into the lifecycle's next
/// command (see [`Model::natural`]), and whether the client retries it at once, exactly.
#[derive(Clone, Copy, Debug)]
struct Planned {
    cmd: Cmd,
    guided: bool,
    retry: bool,
}

/// The world of one case: the model, the real invoices and what has been checked so far.
struct Case<'a> {
    app: &'a TestApp,
    f: Fixture,
    model: Model,
    real: [Option<Real>; 2],
    /// Commands the model says changed something (each must have written one event).
    applied: i64,
    /// The commands actually sent, for the failure message.
    executed: Vec<Cmd>,
}

impl Case<'_> {
    async fn step(&mut self, cmd: Cmd) -> Result<(), TestCaseError> {
        self.executed.push(cmd);
        let step = self.executed.len();
        let expected = self.model.step(cmd);
        let got = run(self.app, &self.f, &self.real, cmd, step).await;
        let got_class: Outcome = got.as_ref().map(|(r, _)| *r).map_err(Clone::clone);
        prop_assert_eq!(
            &got_class,
            &expected,
            "step {}: {:?}; commands sent: {:?}",
            step,
            cmd,
            self.executed
        );
        if std::env::var_os("MODEL_STATS").is_some() {
            let name = format!("{cmd:?}");
            let name = name.split_whitespace().next().unwrap_or("");
            eprintln!("STAT {name} {expected:?}");
        }
        if expected == Ok(false) {
            self.applied += 1;
        }
        let slot = slot_of(cmd);
        if let (Ok((_, Some(view))), Some(m)) = (&got, &self.model.slots[slot]) {
            // The answer shows the invoice as it is now, on every success, replays included.
            prop_assert_eq!(view.state.as_str(), m.state, "step {}: {:?}", step, cmd);
            prop_assert_eq!(view.revision_count as usize, m.revisions.len());
            prop_assert_eq!(view.current_revision.number as usize, m.revisions.len());
            match &self.real[slot] {
                Some(r) => {
                    prop_assert_eq!(view.id, r.id, "a replayed create answers the same invoice");
                }
                None => {
                    self.real[slot] = Some(Real {
                        id: view.id,
                        revisions: Vec::new(),
                    });
                }
            }
        }
        // After every step, every invoice in the database agrees with the model.
        for slot in 0..2 {
            self.check_invoice(slot, step).await?;
        }
        Ok(())
    }

    async fn check_invoice(&mut self, slot: usize, step: usize) -> Result<(), TestCaseError> {
        let (Some(m), Some(r)) = (&self.model.slots[slot], &mut self.real[slot]) else {
            prop_assert!(
                self.model.slots[slot].is_none() && self.real[slot].is_none(),
                "slot {} exists on one side only after step {}",
                slot,
                step
            );
            return Ok(());
        };
        let agent = &self.f.agent;
        let now = self.app.app.get_invoice(agent, r.id).await.unwrap();
        prop_assert_eq!(
            now.state.as_str(),
            m.state,
            "slot {} after step {}",
            slot,
            step
        );
        let revisions = self
            .app
            .app
            .list_revisions(agent, r.id, whole_history())
            .await
            .unwrap();
        prop_assert_eq!(revisions.len(), m.revisions.len());
        r.revisions = revisions
            .iter()
            .map(|rv| (rv.id, rv.sealed.payload_hash.clone()))
            .collect();
        // The seal is a function of the payload: equal variants, equal hashes, and only then.
        for (i, a) in m.revisions.iter().enumerate() {
            for (j, b) in m.revisions.iter().enumerate() {
                prop_assert_eq!(r.revisions[i].1 == r.revisions[j].1, a == b);
            }
        }
        let decisions = self.app.app.list_decisions(agent, r.id).await.unwrap();
        prop_assert_eq!(
            decisions.len(),
            m.decided.len(),
            "decisions of slot {}",
            slot
        );
        for d in &decisions {
            let index = r
                .revisions
                .iter()
                .position(|(id, _)| *id == d.revision_id)
                .unwrap();
            prop_assert_eq!(
                Some(d.decision.as_str()),
                m.decided.get(&index).map(|k| k.as_str())
            );
            prop_assert_eq!(&d.payload_hash, &r.revisions[index].1);
        }
        let events = self
            .app
            .app
            .list_events(agent, r.id, whole_history())
            .await
            .unwrap();
        prop_assert_eq!(events.len() as i64, m.events, "events of slot {}", slot);
        Ok(())
    }
}

async fn run_case(app: &TestApp, setup: Setup, plan: Vec<Planned>) -> Result<(), TestCaseError> {
    let before = app.invoice_rows().await;
    let mut case = Case {
        app,
        f: fixture(app, setup).await,
        model: Model {
            setup,
            slots: [None, None],
        },
        real: [None, None],
        applied: 0,
        executed: Vec::new(),
    };
    for planned in plan {
        let cmd = if planned.guided {
            case.model.natural(planned.cmd)
        } else {
            planned.cmd
        };
        case.step(cmd).await?;
        if planned.retry {
            case.step(cmd).await?;
        }
    }
    // Rows written by this case: one event per applied command, and nothing for replays or
    // refusals.
    let after = app.invoice_rows().await;
    let invoices = case.model.slots.iter().flatten().collect::<Vec<_>>();
    let expected = [
        invoices.len() as i64,
        invoices.iter().map(|m| m.revisions.len() as i64).sum(),
        invoices.iter().map(|m| m.decided.len() as i64).sum(),
        case.applied,
    ];
    let delta = [
        after[0] - before[0],
        after[1] - before[1],
        after[2] - before[2],
        after[3] - before[3],
    ];
    prop_assert_eq!(delta, expected, "invoices, revisions, decisions, events");
    // Every view above was read from the read model; it also equals its definition.
    prop_assert_eq!(
        app.read_model_differences().await,
        0,
        "invoice_reads is stale"
    );
    for r in case.real.iter().flatten() {
        let report = app
            .app
            .verify_invoice(&case.f.approver, r.id)
            .await
            .unwrap();
        prop_assert!(report.ok, "verify: {:?}", report);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Generators.

fn slot() -> impl Strategy<Value = usize> {
    prop_oneof![6 => Just(0usize), 1 => Just(1usize)]
}

fn who(agent: u32, approver: u32, operator: u32) -> impl Strategy<Value = Who> {
    prop_oneof![
        agent => Just(Who::Agent),
        approver => Just(Who::Approver),
        operator => Just(Who::Operator),
    ]
}

/// Weighted so that most sequences get past `pending_approval` (approve, then cancel), while
/// every refusal stays reachable.
fn cmd() -> impl Strategy<Value = Cmd> {
    let variant = 0u8..3;
    prop_oneof![
        1 => (slot(), variant.clone(), who(8, 1, 1))
            .prop_map(|(slot, variant, who)| Cmd::Create { slot, variant, who }),
        2 => (slot(), variant, who(8, 1, 1))
            .prop_map(|(slot, variant, who)| Cmd::Revise { slot, variant, who }),
        3 => (slot(), who(8, 1, 1)).prop_map(|(slot, who)| Cmd::Submit { slot, who }),
        1 => (slot(), who(1, 1, 1)).prop_map(|(slot, who)| Cmd::Withdraw { slot, who }),
        5 => (
            slot(),
            prop_oneof![
                3 => Just(DecisionKind::Approved),
                1 => Just(DecisionKind::Rejected),
                2 => Just(DecisionKind::ChangesRequested),
            ],
            who(1, 8, 1),
            prop_oneof![5 => Just(Named::Current), 1 => Just(Named::Previous)],
            prop_oneof![5 => Just(Hash::OfNamed), 1 => Just(Hash::Wrong)],
        )
            .prop_map(|(slot, kind, who, named, hash)| Cmd::Decide {
                slot,
                kind,
                who,
                named,
                hash,
            }),
        2 => (slot(), who(1, 8, 1)).prop_map(|(slot, who)| Cmd::Cancel { slot, who }),
    ]
}

/// A setup and a first create, then up to 12 steps: about half of them guided along the
/// lifecycle (so most cases reach approval and beyond), the rest blind (so every refusal is
/// reachable), and a quarter of all of them retried at once, exactly (a client that did not
/// hear the answer).
fn case() -> impl Strategy<Value = (Setup, Vec<Planned>)> {
    (
        prop_oneof![Just(Setup::ApproverOwns), Just(Setup::OperatorOwns)],
        0u8..3,
        prop::collection::vec(
            (cmd(), prop::bool::weighted(0.5), prop::bool::weighted(0.25)),
            1..=12,
        ),
    )
        .prop_map(|(setup, variant, rest)| {
            let mut plan = vec![Planned {
                cmd: Cmd::Create {
                    slot: 0,
                    variant,
                    who: Who::Agent,
                },
                guided: false,
                retry: false,
            }];
            plan.extend(rest.into_iter().map(|(cmd, guided, retry)| Planned {
                cmd,
                guided,
                retry,
            }));
            (setup, plan)
        })
}

fn model_test(backend: Backend) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let app = rt.block_on(spawn_app(backend));
    let mut config = Config {
        failure_persistence: None,
        max_shrink_iters: 256,
        ..Config::default()
    };
    if std::env::var_os("PROPTEST_CASES").is_none() {
        config.cases = 24;
    }
    let mut runner = TestRunner::new(config);
    let result = runner.run(&case(), |(setup, plan)| {
        rt.block_on(run_case(&app, setup, plan))
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

#[test]
fn model_sqlite() {
    model_test(Backend::Sqlite);
}

#[test]
fn model_postgres() {
    model_test(Backend::Postgres);
}

/// A page larger than any history the model makes (an invoice has at most 100 revisions).
fn whole_history() -> tauros_app::PageRequest {
    tauros_app::PageRequest {
        after: None,
        limit: 1000,
    }
}
