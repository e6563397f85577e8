#![doc = include_str!("../README.md")]
// Tests may unwrap: a panic is the failure report.
#![cfg_attr(test, allow(clippy::unwrap_used))]

mod admin;
mod cli;
mod direct;
mod echo;
mod external;
mod instructions;
mod phases;
mod process;
mod report;
mod run;
mod stats;
mod targets;
mod workload;

use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    // The floor's reference server is this binary re-executed (see `echo`).
    if let Some(socket) = echo::requested() {
        return echo::serve_main(&socket);
    }
    let args = cli::Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("machine-driver-bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(bench(args))
}

/// Runs the benchmark, prints the report and writes its JSON.
async fn bench(args: cli::Args) -> ExitCode {
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
