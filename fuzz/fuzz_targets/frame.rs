//! Kernel and MCP frame decoding: newline framing with a size limit, then
//! JSON-RPC classification and (for MCP tool calls) argument validation.
#![no_main]

use futures_util::FutureExt;
use libfuzzer_sys::fuzz_target;
use shoal::proto::frame::{Frame, FrameReader};
use shoal::proto::{mcp, rpc};

fuzz_target!(|data: &[u8]| {
    // The first byte picks a small frame limit so the oversized path runs.
    let Some((&l, rest)) = data.split_first() else {
        return;
    };
    let limit = 16 + l as usize * 8;
    let mut r = FrameReader::new(rest, limit);
    loop {
        // A byte slice never blocks: every poll completes.
        let next = r.next().now_or_never().expect("a slice never pends");
        match next {
            Ok(Some(Frame::Line(line))) => {
                assert!(line.len() <= limit);
                assert!(!line.contains(&b'\n'));
                if let rpc::Incoming::Request { method, params, .. } = rpc::classify(&line) {
                    if method == "tools/call" {
                        if let (Some(name), Some(args)) =
                            (params["name"].as_str(), params.get("arguments"))
                        {
                            let _ = mcp::validate_args(name, args);
                        }
                    }
                    let _ = mcp::is_mcp_method(&method);
                }
            }
            Ok(Some(Frame::Oversized { len })) => assert!(len as usize > limit),
            Ok(None) | Err(_) => break,
        }
    }
});
