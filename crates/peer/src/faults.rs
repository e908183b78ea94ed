//! The faults a test arms over HTTP (`POST /faults`), each for a number of matching requests,
//! and the requests paused before their commit until `POST /faults/release`.

use serde::{Deserialize, Serialize};
use std::sync::{Mutex, MutexGuard, PoisonError};
use tokio::sync::oneshot;

/// The longest `slow` delay a fault may ask for (ten minutes).
pub const MAX_SLOW_MILLIS: u64 = 600_000;

/// How the peer misbehaves. docs/PEER.md says which requests each mode matches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    PauseBeforeCommit,
    DropReplyAfterCommit,
    ErrorAfterCommit,
    GarbageAfterCommit,
    RecoverUnknown,
    LieAbsent,
    Slow,
    RefuseConnections,
    NoDedupe,
    /// Answers `POST /invoices` 422 before the commit: a definitive refusal, nothing recorded.
    #[serde(rename = "refuse_422")]
    Refuse422,
}

/// The reason `refuse_422` gives when the fault names none.
pub const DEFAULT_REFUSAL: &str = "the peer refused the invoice";
/// The longest reason a `refuse_422` fault may give.
pub const MAX_REASON_CHARS: usize = 500;

/// `POST /faults`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArmRequest {
    pub mode: Mode,
    #[serde(default = "one")]
    pub times: u32,
    pub millis: Option<u64>,
    pub op_key: Option<String>,
    pub reason: Option<String>,
}

fn one() -> u32 {
    1
}

/// An armed fault as `GET /faults` lists it; `times` is what is left.
#[derive(Clone, Debug, Serialize)]
pub struct Armed {
    pub mode: Mode,
    pub times: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub millis: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op_key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

impl ArmRequest {
    /// The fault this request arms, or why it is refused.
    pub fn validate(self) -> Result<Armed, String> {
        if self.times == 0 {
            return Err("times must be at least 1".into());
        }
        match (self.mode, self.millis) {
            (Mode::Slow, None) => return Err("slow needs millis".into()),
            (Mode::Slow, Some(ms)) if ms > MAX_SLOW_MILLIS => {
                return Err(format!("millis must be at most {MAX_SLOW_MILLIS}"));
            }
            (Mode::Slow, Some(_)) | (_, None) => {}
            (_, Some(_)) => return Err("only slow takes millis".into()),
        }
        match (&self.mode, &self.reason) {
            (Mode::Refuse422, Some(r))
                if r.trim().is_empty() || r.chars().count() > MAX_REASON_CHARS =>
            {
                return Err(format!("reason must be 1-{MAX_REASON_CHARS} characters"));
            }
            (Mode::Refuse422, _) | (_, None) => {}
            (_, Some(_)) => return Err("only refuse_422 takes a reason".into()),
        }
        if let Some(key) = &self.op_key {
            if self.mode == Mode::RefuseConnections {
                // The connection is closed before the request's key is looked at.
                return Err("refuse_connections cannot be limited to one op_key".into());
            }
            if !super::op_key::is_op_key(key.as_bytes()) {
                return Err("op_key must be 1-255 visible ASCII characters".into());
            }
        }
        Ok(Armed {
            mode: self.mode,
            times: self.times,
            millis: self.millis,
            op_key: self.op_key,
            reason: self.reason,
        })
    }
}

/// Armed faults and paused requests, shared by every connection.
#[derive(Default)]
pub struct Faults {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    armed: Vec<Armed>,
    paused: Vec<(String, oneshot::Sender<()>)>,
}

impl Faults {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding the lock; a poisoned one still holds consistent data.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Arms `fault`, replacing one of the same mode and key filter.
    pub fn arm(&self, fault: Armed) {
        let mut inner = self.lock();
        inner
            .armed
            .retain(|a| !(a.mode == fault.mode && a.op_key == fault.op_key));
        inner.armed.push(fault);
    }

    /// Uses up one application of the first armed `mode` matching `op_key` (no filter: any).
    pub fn take(&self, mode: Mode, op_key: Option<&str>) -> Option<Armed> {
        let mut inner = self.lock();
        let at = inner.armed.iter().position(|a| {
            a.mode == mode && a.op_key.as_deref().is_none_or(|k| Some(k) == op_key)
        })?;
        let fault = &mut inner.armed[at];
        fault.times -= 1;
        let taken = fault.clone();
        if fault.times == 0 {
            inner.armed.remove(at);
        }
        Some(taken)
    }

    /// Registers a request paused before its commit; the receiver completes on release.
    pub fn pause(&self, op_key: &str) -> oneshot::Receiver<()> {
        let (tx, rx) = oneshot::channel();
        self.lock().paused.push((op_key.to_owned(), tx));
        rx
    }

    /// Lets every paused request go on to its commit; returns how many there were.
    pub fn release(&self) -> usize {
        let paused = std::mem::take(&mut self.lock().paused);
        let count = paused.len();
        for (_, tx) in paused {
            let _ = tx.send(());
        }
        count
    }

    /// Disarms every fault and releases every paused request; returns how many of each.
    pub fn clear(&self) -> (usize, usize) {
        let cleared = std::mem::take(&mut self.lock().armed).len();
        (cleared, self.release())
    }

    /// The armed faults and the keys of the paused requests, in arrival order.
    pub fn list(&self) -> (Vec<Armed>, Vec<String>) {
        let inner = self.lock();
        let paused = inner.paused.iter().map(|(k, _)| k.clone()).collect();
        (inner.armed.clone(), paused)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn armed(mode: Mode, times: u32, op_key: Option<&str>) -> Armed {
        Armed {
            mode,
            times,
            millis: None,
            op_key: op_key.map(str::to_owned),
            reason: None,
        }
    }

    #[test]
    fn a_fault_applies_as_many_times_as_armed_and_only_to_its_key() {
        let faults = Faults::default();
        faults.arm(armed(Mode::ErrorAfterCommit, 2, Some("a")));
        assert!(faults.take(Mode::ErrorAfterCommit, Some("b")).is_none());
        assert!(faults.take(Mode::ErrorAfterCommit, None).is_none());
        assert!(faults.take(Mode::LieAbsent, Some("a")).is_none());
        assert_eq!(
            faults
                .take(Mode::ErrorAfterCommit, Some("a"))
                .unwrap()
                .times,
            1
        );
        assert_eq!(faults.list().0.len(), 1);
        assert!(faults.take(Mode::ErrorAfterCommit, Some("a")).is_some());
        assert!(faults.take(Mode::ErrorAfterCommit, Some("a")).is_none());
        assert!(faults.list().0.is_empty());
    }

    #[test]
    fn clearing_releases_the_paused_requests() {
        let faults = Faults::default();
        faults.arm(armed(Mode::NoDedupe, 1, None));
        let mut paused = faults.pause("k");
        assert_eq!(faults.list().1, vec!["k".to_owned()]);
        assert!(paused.try_recv().is_err());
        assert_eq!(faults.clear(), (1, 1));
        assert!(paused.try_recv().is_ok());
        assert_eq!(faults.list().1.len(), 0);
    }

    #[test]
    fn millis_belongs_to_slow_only() {
        let arm = |mode, millis| ArmRequest {
            mode,
            times: 1,
            millis,
            op_key: None,
            reason: None,
        };
        assert!(arm(Mode::Slow, None).validate().is_err());
        assert!(
            arm(Mode::Slow, Some(MAX_SLOW_MILLIS + 1))
                .validate()
                .is_err()
        );
        assert!(arm(Mode::Slow, Some(10)).validate().is_ok());
        assert!(arm(Mode::LieAbsent, Some(10)).validate().is_err());
        assert!(arm(Mode::LieAbsent, None).validate().is_ok());
    }
}
