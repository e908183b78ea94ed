//! What the peer prints on purpose.

use std::io::Write;

/// Prints one line on stdout, where tests and scripts read the peer (logs go to stderr).
pub fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    // Nobody reading stdout any more is no reason to stop the peer.
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}
