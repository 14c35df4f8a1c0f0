//! cargo-fuzz target `uri`: see `fuzz/entries.rs`.
#![no_main]

#[path = "../entries.rs"]
mod entries;

libfuzzer_sys::fuzz_target!(|data: &[u8]| entries::uri_target(data));
