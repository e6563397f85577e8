#!/usr/bin/env bash
# The project's test command (README): unit and integration tests of every crate.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo test --workspace --all-features
