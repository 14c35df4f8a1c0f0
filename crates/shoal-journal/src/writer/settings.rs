//! The writer's settings ([`WriterConfig`], [`Durability`]) and the counters it reports
//! ([`WriterStats`]), kept apart from the thread that honours them.

use serde::{Deserialize, Serialize};

/// `journal.durability`.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    Immediate,
    #[default]
    Batched,
}

impl Durability {
    /// Its config and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Immediate => "immediate",
            Durability::Batched => "batched",
        }
    }
}

/// Writer settings (`journal.durability`, `journal.flush_ms`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WriterConfig {
    pub durability: Durability,
    /// Batched mode: the longest an acknowledged op waits for its durable commit.
    pub flush_ms: u64,
    /// Most ops per commit (batched mode commits as soon as this many are pending).
    pub max_batch: usize,
    /// Capacity of the submit queue (immediate mode: the channel; batched mode: the inbox).
    pub queue: usize,
}

impl Default for WriterConfig {
    fn default() -> Self {
        WriterConfig {
            durability: Durability::Batched,
            flush_ms: 100,
            max_batch: 4096,
            queue: 8192,
        }
    }
}

/// Counters for operator status (`shoal status`: last commit latency, ...).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct WriterStats {
    pub durability: Durability,
    /// Submitted but not yet committed.
    pub queued: u64,
    pub submitted: u64,
    pub committed_ops: u64,
    pub commits: u64,
    pub failed_commits: u64,
    pub failed_ops: u64,
    pub last_commit_us: u64,
    pub last_commit_ops: u64,
    /// ns since the epoch, 0 before the first commit.
    pub last_commit_at: i64,
    pub last_error: Option<String>,
    /// The last commit failed and the writer is retrying (cleared by the next good commit).
    pub degraded: bool,
    /// When the writer became degraded (ns since the epoch, 0 when healthy).
    pub degraded_since: i64,
    /// Times the store was closed and opened again after a failure.
    pub reopens: u64,
    /// Acknowledged ops given up because too many piled up while degraded.
    pub dropped_ops: u64,
    /// Batched mode: times a submitter woke the writer thread (the first op after it went
    /// idle, or a full batch); a steady stream of ops wakes it about once per `flush_ms`.
    pub wakes: u64,
    /// Batched mode: at the end of the last durable commit, how long its oldest
    /// acknowledged op had waited (the durability window it kept), in µs.
    pub last_window_us: u64,
    /// The longest such wait since the writer started.
    pub worst_window_us: u64,
    /// Batched mode, now: how long the oldest acknowledged op that is not yet durable has
    /// waited (what a crash at this moment would lose), in µs; 0 when everything is durable.
    /// Unlike the windows above it counts a commit still running.
    pub at_risk_us: u64,
}
