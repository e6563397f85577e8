//! Any bytes as what a client sends on a Unix connection, arriving in pieces of
//! any size: the HTTP/2 `:authority` rewriter (`server/src/authority/frames.rs`)
//! never panics, gives the same bytes however the input is cut, hands a
//! connection it does not rewrite to the server unchanged, and a rewritten one
//! as well-formed frames (complete literal-only header blocks, usable `:authority`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Err(broken) = machine_driver_server::fuzzing::authority_rewrite(data) {
        panic!("{broken}");
    }
});
