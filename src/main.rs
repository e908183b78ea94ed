//! The `tauros` command line: `config` parses it, `commands` runs each command, `wiring` builds
//! and starts the crates.

mod allocator;
mod commands;
mod config;
mod process;
mod telemetry;
mod wiring;

use crate::config::{Cli, Command, OrgCommand, UserCommand};
use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    // Before the runtime starts any thread (see `allocator::limit_arenas`).
    allocator::limit_arenas();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("tauros: could not start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(run())
}

async fn run() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve(args) => commands::serve(args).await,
        Command::Worker(args) => commands::worker(args).await,
        Command::Migrate(args) => commands::migrate(args).await,
        Command::BootstrapApprover(args) => commands::bootstrap(args).await,
        Command::Openapi => commands::print_openapi(),
        Command::Org(OrgCommand::Set(args)) => commands::org_set(args).await,
        Command::User(UserCommand::Unlock(args)) => commands::user_unlock(args).await,
        Command::Peer(args) => commands::peer(args).await,
        Command::Reap(args) => commands::reap_once(args).await,
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tauros: {e:#}");
            ExitCode::FAILURE
        }
    }
}
