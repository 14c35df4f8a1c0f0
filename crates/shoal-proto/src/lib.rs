//! Protocol edges: framing, JSON-RPC envelopes and error codes, the tagged
//! wire encoding of values, render bounding and the MCP tool surface.
//!
//! Everything here is pure (or generic over tokio I/O traits): no actors, no
//! sockets of its own. Serialization happens here and at no other layer.

pub mod bound;
pub mod elide;
pub use shoal_journal::event;
pub mod frame;
pub mod kernel;
pub mod mcp;
pub mod mcp_era;
pub mod mcp_pty;
pub mod mcp_tasks;
pub mod mcp_tasks_ext;
pub mod rpc;
pub mod syntax;
pub mod uri;
pub mod valpath;
pub mod wire;

#[cfg(test)]
mod deep_tests;
