//! Failpoints (tests only, feature `failpoints`; docs/RELIABILITY.md, S8): a named point after
//! each statement of the create and decision transactions and their commit. An armed point
//! fails the next request of its organisation there, once, as a lost connection would (503);
//! a held one (`hold`) stops it inside its transaction. On SQLite a held-back statement
//! reaches the database with the unit's next call, so a point after it fails the same unit.
//! Without the feature, `failpoint!` expands to nothing.

use crate::error::AppError;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{LazyLock, Mutex, PoisonError};
use tauros_store::StoreError;
use uuid::Uuid;

/// Declares every failpoint once: the enum, [`Failpoint::ALL`] and the names.
macro_rules! failpoints {
    ($($(#[doc = $doc:literal])* $point:ident = $name:literal,)*) => {
        /// A named point after one statement of a write transaction.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Failpoint {
            $($(#[doc = $doc])* $point,)*
        }

        impl Failpoint {
            /// Every failpoint in statement order (as one order allows); post-commit ones last.
            pub const ALL: &[Failpoint] = &[$(Failpoint::$point,)*];

            /// The point's stable name (`area.statement`), as logs and the docs show it.
            pub fn name(self) -> &'static str {
                match self {
                    $(Failpoint::$point => $name,)*
                }
            }
        }
    };
}

failpoints! {
    // create_draft: BEGIN, then one read of the agent, the customer and the destination
    // (`locked_parties`: one call to SQLite), its three points in the order of the rows, then …
    /// The proposing agent's row is share-locked (`Agent::hold`; a create's with its parties).
    AgentHeld = "agent.held",
    /// The draft's customer is share-locked (`locked_parties`, create and revise).
    CustomerLocked = "parties.customer_locked",
    /// The draft's payment destination is share-locked (`locked_parties`, with the customer).
    DestinationLocked = "parties.destination_locked",
    /// The invoice row is inserted (key taken, uncommitted; on SQLite held until the revision).
    InvoiceInserted = "create.invoice_inserted",
    /// Revision 1 (with its lines) is inserted.
    RevisionInserted = "create.revision_inserted",

    // decide (approve, reject, request changes): BEGIN, then …
    /// The invoice row is locked `FOR UPDATE` (`locked`, every command on an invoice).
    InvoiceLocked = "command.invoice_locked",
    /// The invoice's agent is read for the access check.
    AgentRead = "command.agent_read",
    /// The organisation's settings are read for the access check.
    OrgRead = "command.org_read",
    /// The decision already recorded on the named revision, if any, is read.
    ExistingDecisionRead = "decide.existing_decision_read",
    /// The revision the approver named is read.
    NamedRevisionRead = "decide.named_revision_read",
    /// The invoice's current revision is read (every command that needs it).
    CurrentRevisionRead = "command.current_revision_read",
    /// The current revision's destination is share-locked.
    DecisionDestinationLocked = "decide.destination_locked",
    /// The decision row is inserted.
    DecisionInserted = "decide.decision_inserted",
    /// The invoice's new state (and chain head, latest decision) is written (`apply`).
    InvoiceUpdated = "command.invoice_updated",

    // Both: the event and what it sets off (`record_event`); an approval with an issuer also
    // passes the job points right after its decision, for its issue job.
    /// The audit event (the invoice's hash-chained event) is inserted.
    EventInserted = "event.inserted",
    /// The organisation's webhook endpoints are read to enqueue the event's deliveries.
    EndpointsRead = "event.endpoints_read",
    /// A job's submission record is inserted (a delivery, or an approval's issue job).
    JobSubmissionInserted = "job.submission_inserted",
    /// A job row is inserted (a delivery, or an approval's issue job).
    JobInserted = "job.inserted",
    /// A command's invoice is read back inside its transaction for the answer (`written`).
    InvoiceReadBack = "command.invoice_read_back",

    // After the commit: the write stands, only the answer is lost.
    /// The create is committed; the client hears 503 although the invoice exists.
    CreateCommitted = "create.committed",
    /// A command on an invoice is committed (`written`); the client hears 503, the change stands.
    CommandCommitted = "command.committed",
}

/// The armed (organisation, point) pairs, and how many there are (no lock while none is).
static ARMED: LazyLock<Mutex<HashSet<(Uuid, Failpoint)>>> = LazyLock::new(Mutex::default);
static ARMED_COUNT: AtomicUsize = AtomicUsize::new(0);

fn armed() -> std::sync::MutexGuard<'static, HashSet<(Uuid, Failpoint)>> {
    ARMED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Arms `point` for `org_id`: the next request there fails, once; dropped, it disarms.
#[must_use = "the failpoint is disarmed when this is dropped"]
pub fn arm(org_id: Uuid, point: Failpoint) -> Armed {
    let mut armed = armed();
    if armed.insert((org_id, point)) {
        ARMED_COUNT.fetch_add(1, Ordering::SeqCst);
    }
    Armed { org_id, point }
}

/// An armed failpoint; disarmed when dropped.
#[derive(Debug)]
pub struct Armed {
    org_id: Uuid,
    point: Failpoint,
}

impl Armed {
    /// Whether the point has fired (it is no longer armed).
    pub fn fired(&self) -> bool {
        !armed().contains(&(self.org_id, self.point))
    }
}

impl Drop for Armed {
    fn drop(&mut self) {
        let mut armed = armed();
        if armed.remove(&(self.org_id, self.point)) {
            ARMED_COUNT.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// A held point: the request reaching it says so (`reached`) and waits for the release.
struct Slot {
    reached: tokio::sync::oneshot::Sender<()>,
    release: std::sync::mpsc::Receiver<()>,
}

static HELD: LazyLock<Mutex<HashMap<(Uuid, Failpoint), Slot>>> = LazyLock::new(Mutex::default);

fn held() -> std::sync::MutexGuard<'static, HashMap<(Uuid, Failpoint), Slot>> {
    HELD.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Holds `point` for `org_id`, once: the request reaching it stops there, transaction open and
/// locks held, until released or dropped (the runtime must be multi-threaded).
#[must_use = "the point is released when this is dropped"]
pub fn hold(org_id: Uuid, point: Failpoint) -> Hold {
    let (reached_tx, reached) = tokio::sync::oneshot::channel();
    let (release, release_rx) = std::sync::mpsc::channel();
    let slot = Slot {
        reached: reached_tx,
        release: release_rx,
    };
    if held().insert((org_id, point), slot).is_none() {
        ARMED_COUNT.fetch_add(1, Ordering::SeqCst);
    }
    Hold {
        org_id,
        point,
        reached: Some(reached),
        release: Some(release),
    }
}

/// A held failpoint; released (and unheld) when dropped.
#[derive(Debug)]
pub struct Hold {
    org_id: Uuid,
    point: Failpoint,
    reached: Option<tokio::sync::oneshot::Receiver<()>>,
    release: Option<std::sync::mpsc::Sender<()>>,
}

impl Hold {
    /// Resolves once a request stops at the point; `false` if the hold went first.
    pub async fn reached(&mut self) -> bool {
        match self.reached.take() {
            Some(reached) => reached.await.is_ok(),
            None => true,
        }
    }

    /// Lets the held request go on.
    pub fn release(&mut self) {
        if let Some(release) = self.release.take() {
            let _ = release.send(());
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        self.release();
        if held().remove(&(self.org_id, self.point)).is_some() {
            ARMED_COUNT.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

/// Passes `point` for `org_id`: waits if held, fails once if armed.
pub(crate) fn hit(org_id: Uuid, point: Failpoint) -> Result<(), AppError> {
    if ARMED_COUNT.load(Ordering::SeqCst) == 0 {
        return Ok(());
    }
    let slot = held().remove(&(org_id, point));
    if let Some(slot) = slot {
        ARMED_COUNT.fetch_sub(1, Ordering::SeqCst);
        tracing::warn!(failpoint = point.name(), %org_id, "failpoint held");
        let _ = slot.reached.send(());
        // Blocks this worker thread only; the runtime moves its other tasks elsewhere.
        tokio::task::block_in_place(|| {
            let _ = slot.release.recv();
        });
        return Ok(());
    }
    {
        let mut armed = armed();
        if !armed.remove(&(org_id, point)) {
            return Ok(());
        }
        ARMED_COUNT.fetch_sub(1, Ordering::SeqCst);
    }
    tracing::warn!(failpoint = point.name(), %org_id, "failpoint fired");
    // As a connection lost after the statement: sqlx's I/O error, classified unavailable.
    let lost = std::io::Error::other(format!("failpoint {} fired", point.name()));
    Err(AppError::Unavailable(StoreError::Unavailable(
        sqlx::Error::Io(lost),
    )))
}
