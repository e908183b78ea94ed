//! Logging (tracing). The Prometheus recorder is `tauros_api`'s, which renders `/metrics`.

use std::fmt;
use std::io::IsTerminal;
use tracing::field::Field;
use tracing_subscriber::EnvFilter;
use tracing_subscriber::field::MakeExt;
use tracing_subscriber::fmt::format::{Writer, debug_fn};

/// Installs the log subscriber; `filter` is an `EnvFilter` directive such as `info`.
pub fn init_logging(filter: &str) {
    let filter = EnvFilter::try_new(filter).unwrap_or_else(|_| EnvFilter::new("info"));
    // Logs go to stderr; stdout is for what a command prints on purpose (demo credentials).
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    // A terminal gets colours (field names in italics); a file or a journal gets the same
    // line without them, its fields written plainly: every request's span formats its fields
    // when it opens, and the default formatter styles each name even with colours off.
    let _ = if std::io::stderr().is_terminal() {
        logs.with_ansi(true).try_init()
    } else {
        logs.with_ansi(false)
            .fmt_fields(debug_fn(plain_field).delimited(" "))
            .try_init()
    };
}

/// One field as the default formatter writes it without colours: `name=value`, an event's
/// message alone, and the `log` crate's own fields (`log.target`, …) left out.
fn plain_field(writer: &mut Writer<'_>, field: &Field, value: &dyn fmt::Debug) -> fmt::Result {
    match field.name() {
        "message" => write!(writer, "{value:?}"),
        name if name.starts_with("log.") => Ok(()),
        name => write!(writer, "{name}={value:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tracing_subscriber::fmt::MakeWriter;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Lines {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl<'a> MakeWriter<'a> for Lines {
        type Writer = Lines;

        fn make_writer(&'a self) -> Lines {
            self.clone()
        }
    }

    /// What a request's log line looks like: an event with a message and fields of both
    /// kinds, in a request span, in a span with no fields.
    fn log_a_request() {
        let span = tracing::info_span!("request", method = %"POST", route = %"/v1/invoices/{id}", request_id = %"r-1");
        let _in = span.enter();
        let inner = tracing::info_span!("inner");
        let _inner = inner.enter();
        tracing::warn!(
            attempt = 2,
            reason = "a \"quoted\" reason",
            "the peer did not answer"
        );
        tracing::info!(done = true);
    }

    #[test]
    fn plain_fields_write_the_default_line_without_colours() {
        let builder = || {
            tracing_subscriber::fmt()
                .with_target(false)
                .with_ansi(false)
                .without_time()
        };
        let default = Lines::default();
        let subscriber = builder().with_writer(default.clone()).finish();
        tracing::subscriber::with_default(subscriber, log_a_request);
        let plain = Lines::default();
        let subscriber = builder()
            .fmt_fields(debug_fn(plain_field).delimited(" "))
            .with_writer(plain.clone())
            .finish();
        tracing::subscriber::with_default(subscriber, log_a_request);
        let default = String::from_utf8(default.0.lock().unwrap().clone()).unwrap();
        let plain = String::from_utf8(plain.0.lock().unwrap().clone()).unwrap();
        assert!(
            default.contains(r#"request{method=POST route=/v1/invoices/{id} request_id=r-1}:inner: the peer did not answer attempt=2 reason="a \"quoted\" reason""#),
            "{default}"
        );
        assert_eq!(plain, default);
    }
}
