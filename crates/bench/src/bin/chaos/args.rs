//! The command line (`chaos run …`, `chaos report …`, `chaos proxy …`), as scripts/chaos and
//! scripts/ha pass it.

use clap::{Parser, Subcommand};

/// The fault campaign of scripts/chaos and scripts/ha (docs/RELIABILITY.md).
#[derive(Parser)]
#[command(name = "chaos")]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Subcommand)]
pub(crate) enum Command {
    /// One scenario; prints one JSON line (the figures) on stdout, everything else on stderr.
    Run(Args),
    /// One table from the runs' JSON lines, optionally written into a doc.
    Report {
        /// The results: one JSON line per run.
        results: String,
        /// The doc to write the figures into, between its `<!-- MARKER:begin -->` and
        /// `<!-- MARKER:end -->`.
        #[arg(long)]
        doc: Option<String>,
        /// The command shown above the figures.
        #[arg(long, default_value = "scripts/chaos")]
        command: String,
        /// `chaos` for scripts/chaos, `ha` for scripts/ha: each writes only its own block.
        #[arg(long, default_value = "chaos")]
        marker: String,
    },
    /// A TCP proxy that drops a seeded share of the answers after the server committed.
    Proxy {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: String,
        #[arg(long, default_value_t, hide_default_value = true)]
        upstream: String,
        #[arg(long, default_value_t = 10)]
        drop_percent: u64,
        #[arg(long, default_value_t = 1)]
        seed: u64,
    },
}

/// One run's settings (`chaos run`). A flag given twice takes its last value.
#[derive(Clone, clap::Args)]
#[command(args_override_self = true)]
pub(crate) struct Args {
    /// storm, race, kill, pgcrash, drop, replicas, paused, resend, diskfull, refuse, peerday,
    /// restore, ha, noisy, anonflood or slowheads.
    #[arg(long)]
    pub(crate) scenario: String,
    /// postgres or sqlite.
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) backend: String,
    /// The fault schedule's seed.
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Smaller and shorter (CI).
    #[arg(long)]
    pub(crate) quick: bool,
    /// The `tauros` binary the run starts (`serve`, `peer`, `bootstrap-approver`).
    #[arg(long, default_value = "target/release/tauros")]
    pub(crate) bin: String,
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) db_url: String,
    /// The PostgreSQL cluster's (or the formation's) directory, for `--pg-script`.
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) pg_dir: String,
    /// The script that crashes and restarts the database: scripts/pg-tmp, or scripts/ha.
    #[arg(long, default_value = "scripts/pg-tmp")]
    pub(crate) pg_script: String,
    /// Where logs and the run's files go.
    #[arg(long, default_value = "/tmp")]
    pub(crate) work: String,
    /// The run's name in the report (default: the scenario).
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) label: String,
    /// `diskfull`: the size-limited file system to fill.
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) fill_dir: String,
    /// The negative control: the run passes only if it shows lost > 0.
    #[arg(long)]
    pub(crate) expect_loss: bool,
    /// A file every started child's pid is appended to.
    #[arg(long, default_value_t, hide_default_value = true)]
    pub(crate) pids: String,
    /// The webhook receiver (a Python script).
    #[arg(long, default_value = "scripts/webhook-receiver")]
    pub(crate) receiver: String,
}

impl Args {
    /// The label defaults to the scenario.
    pub(crate) fn labelled(mut self) -> Args {
        if self.label.is_empty() {
            self.label.clone_from(&self.scenario);
        }
        self
    }
}
