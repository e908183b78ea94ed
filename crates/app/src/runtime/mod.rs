//! The job runtime: the [`Registry`] of handlers and the [`Workers`] that claim and run them.

#[cfg(feature = "testing")]
pub mod testing;
pub mod webhooks;
mod worker;

pub use worker::{WEBHOOK_POOL, WorkerConfig, Workers};

use crate::app::App;
use crate::jobs::ClaimedJob;
use serde_json::Value;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;
use tauros_domain::job::{DEFAULT_BACKOFF_CAP, kind_is_valid};

/// What a handler gets besides its args.
#[derive(Clone)]
pub struct JobContext {
    pub app: App,
    /// The job as claimed: its id, org, attempt and lease.
    pub job: ClaimedJob,
}

/// Why a handler did not finish its job.
#[derive(Clone, Debug, thiserror::Error)]
pub enum JobError {
    /// Another attempt may succeed (a peer down, a timeout): retried after the backoff.
    #[error("{code}: {message}")]
    Retryable { code: String, message: String },
    /// No attempt can succeed (malformed args, a definitive refusal): discarded at once.
    #[error("{code}: {message}")]
    Permanent { code: String, message: String },
}

impl JobError {
    /// A failure worth retrying; `message` is for operators, never a payload or secret.
    pub fn retryable(code: &str, message: impl Into<String>) -> JobError {
        JobError::Retryable {
            code: code.to_owned(),
            message: message.into(),
        }
    }

    /// A failure no retry can fix.
    pub fn permanent(code: &str, message: impl Into<String>) -> JobError {
        JobError::Permanent {
            code: code.to_owned(),
            message: message.into(),
        }
    }
}

/// A handler's answer.
pub type JobResult = Result<(), JobError>;

type HandlerFuture = Pin<Box<dyn Future<Output = JobResult> + Send>>;
type Handler = Arc<dyn Fn(JobContext, Value) -> HandlerFuture + Send + Sync>;

/// How one kind runs; `None` takes the registry's default.
#[derive(Clone, Copy, Debug, Default)]
pub struct KindPolicy {
    /// Where the retry backoff stops doubling.
    pub backoff_cap: Option<Duration>,
    /// How long one execution may take before it counts as a failed attempt (`timeout`).
    pub timeout: Option<Duration>,
}

/// The defaults of kinds that do not set their own policy.
#[derive(Clone, Copy, Debug)]
pub struct Defaults {
    pub backoff_cap: Duration,
    pub timeout: Duration,
}

impl Default for Defaults {
    fn default() -> Self {
        Defaults {
            backoff_cap: DEFAULT_BACKOFF_CAP,
            timeout: Duration::from_secs(60),
        }
    }
}

struct Entry {
    handler: Handler,
    backoff_cap: Duration,
    timeout: Duration,
}

/// The kinds this process runs. Workers claim only these, so a job of a kind an older binary
/// does not know waits (`available`, visible in the gauges) for a worker that does.
pub struct Registry {
    kinds: BTreeMap<&'static str, Entry>,
    defaults: Defaults,
}

impl Registry {
    /// An empty registry.
    pub fn new(defaults: Defaults) -> Registry {
        Registry {
            kinds: BTreeMap::new(),
            defaults,
        }
    }

    /// Registers `handler` for the versioned `kind` at start-up; a bad or repeated kind panics.
    pub fn register<F, Fut>(&mut self, kind: &'static str, policy: KindPolicy, handler: F)
    where
        F: Fn(JobContext, Value) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = JobResult> + Send + 'static,
    {
        assert!(
            kind_is_valid(kind),
            "job kind {kind:?} is not a versioned kind"
        );
        let handler: Handler = Arc::new(move |ctx, args| Box::pin(handler(ctx, args)));
        let entry = Entry {
            handler,
            backoff_cap: policy.backoff_cap.unwrap_or(self.defaults.backoff_cap),
            timeout: policy.timeout.unwrap_or(self.defaults.timeout),
        };
        let previous = self.kinds.insert(kind, entry);
        assert!(previous.is_none(), "job kind {kind:?} is registered twice");
    }

    /// Every registered kind.
    pub fn kinds(&self) -> Vec<&'static str> {
        self.kinds.keys().copied().collect()
    }

    /// The backoff cap of `kind` (the default for a kind this process does not run).
    pub fn backoff_cap(&self, kind: &str) -> Duration {
        self.kinds
            .get(kind)
            .map_or(self.defaults.backoff_cap, |e| e.backoff_cap)
    }

    fn entry(&self, kind: &str) -> Option<&Entry> {
        self.kinds.get(kind)
    }
}

/// Whether this build has the built-in test job kinds (feature `testing`: the tests' builds).
pub const TEST_KINDS_BUILT: bool = cfg!(feature = "testing");

/// This build's kinds: webhook deliveries, and the test kinds when on and built.
pub fn registry(
    defaults: Defaults,
    webhooks: webhooks::DeliveryPolicy,
    test_kinds: bool,
) -> Registry {
    let mut registry = Registry::new(defaults);
    webhooks::register(&mut registry, webhooks);
    #[cfg(feature = "testing")]
    if test_kinds {
        testing::register(&mut registry);
    }
    #[cfg(not(feature = "testing"))]
    let _ = test_kinds;
    registry
}
