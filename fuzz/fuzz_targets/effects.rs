//! cargo-fuzz target `effects`: see `fuzz/entries.rs`.
#![no_main]

#[path = "../entries.rs"]
mod entries;

libfuzzer_sys::fuzz_target!(|data: &[u8]| entries::effects(data));
