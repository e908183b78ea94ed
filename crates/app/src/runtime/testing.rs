//! Test job kinds (`TAUROS_TEST_JOBS`), each run recorded: evidence no job ran twice at once.

use super::{JobContext, JobError, JobResult, KindPolicy, Registry};
use serde::Deserialize;
use serde_json::Value;
use std::io::Write;
use std::time::Duration;

/// Records its execution, then succeeds or fails as its args say.
pub const ECHO: &str = "test.echo.v1";

/// The args of [`ECHO`]; every member is optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct EchoArgs {
    /// `retryable` or `permanent`: fail that way.
    fail: Option<String>,
    /// Fail while the attempt is at most this, then succeed (retryable unless `fail` says).
    fail_attempts: Option<i32>,
    /// Work this long first (at most 10 s).
    sleep_ms: Option<u64>,
    /// Print `tauros: test job <id> running` as the handler starts: a test's handshake.
    #[serde(default)]
    announce: bool,
    /// Anything; ignored (tells otherwise equal jobs apart).
    #[allow(dead_code)]
    note: Option<Value>,
}

/// Registers the test kinds.
pub fn register(registry: &mut Registry) {
    registry.register(ECHO, KindPolicy::default(), echo);
}

async fn echo(ctx: JobContext, args: Value) -> JobResult {
    let started_at = crate::clock::now();
    let args: EchoArgs = serde_json::from_value(args)
        .map_err(|e| JobError::permanent("invalid_args", format!("test.echo.v1 args: {e}")))?;
    if args.announce {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(
            out,
            "tauros: test job {} running (attempt {}, execution {})",
            ctx.job.id, ctx.job.attempt, ctx.job.executions
        );
        let _ = out.flush();
    }
    if let Some(ms) = args.sleep_ms {
        tokio::time::sleep(Duration::from_millis(ms.min(10_000))).await;
    }
    let failing = args
        .fail_attempts
        .map_or(args.fail.is_some(), |n| ctx.job.attempt <= n);
    let outcome = match (failing, args.fail.as_deref()) {
        (false, _) => Ok(()),
        (true, Some("permanent")) => Err(JobError::permanent(
            "echo_permanent",
            "test.echo.v1 was told to fail for good",
        )),
        (true, _) => Err(JobError::retryable(
            "echo_retryable",
            "test.echo.v1 was told to fail this attempt",
        )),
    };
    let recorded = match &outcome {
        Ok(()) => "completed",
        Err(JobError::Retryable { .. }) => "retryable",
        Err(JobError::Permanent { .. }) => "permanent",
    };
    ctx.app
        .record_test_execution(&ctx.job, recorded, started_at)
        .await
        .map_err(|e| JobError::retryable("record_failed", e.to_string()))?;
    outcome
}
