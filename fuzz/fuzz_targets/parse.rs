//! The lexer and parser: any text parses or fails with an error, never a
//! panic or a stack overflow, with and without value-bound names.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shoal::lang::{parse, ParseContext};

fuzz_target!(|data: &[u8]| {
    let Ok(src) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse(src, &ParseContext::default());
    let mut ctx = ParseContext::default();
    for name in ["x", "ls", "git", "f"] {
        ctx.value_bound.insert(name.to_string());
    }
    if let Err(e) = parse(src, &ctx) {
        // Spans point into the source.
        assert!(e.span.start <= e.span.end);
    }
});
