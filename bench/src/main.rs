#![doc = include_str!("../README.md")]
// Tests may unwrap: a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod admin;
mod cli;
mod direct;
mod phases;
mod process;
mod report;
mod run;
mod stats;
mod targets;
mod workload;

use std::process::ExitCode;

use clap::Parser;

#[tokio::main]
async fn main() -> ExitCode {
    let args = cli::Args::parse();
    let report = run::run(&args).await;
    print!("{}", report.markdown());
    if let Some(path) = &args.json {
        let written = serde_json::to_vec_pretty(&report)
            .map_err(|e| e.to_string())
            .and_then(|json| std::fs::write(path, json).map_err(|e| e.to_string()));
        if let Err(e) = written {
            eprintln!("machine-driver-bench: writing {}: {e}", path.display());
            return ExitCode::FAILURE;
        }
    }
    if report.errors.is_empty() {
        ExitCode::SUCCESS
    } else {
        eprintln!("machine-driver-bench: {} phase(s) broke (see Errors above)", report.errors.len());
        ExitCode::FAILURE
    }
}
