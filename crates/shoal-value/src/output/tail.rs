//! The bounded tail of a running program's output (a background task's
//! record shows it while the task runs).

use std::sync::Arc;

use shoal_base::sync::Locked;

/// Bytes of stdout (and, separately, of stderr) an [`OutputTail`] keeps.
pub const TAIL_BYTES: usize = 4 << 10;

/// The last [`TAIL_BYTES`] of a running program's stdout and stderr, shared
/// between the thread that drains its pipes and whoever shows it (a
/// background task's record). Bounded: older bytes are dropped as new ones
/// arrive.
#[derive(Default)]
pub struct OutputTail {
    bufs: std::sync::Mutex<[Vec<u8>; 2]>,
    /// Where each push goes as well (a worker process's task: to the
    /// daemon, which keeps the tail its readers see).
    forward: Option<Forward>,
}

/// Where a forwarding tail's pushes go: (stderr?, bytes).
type Forward = Box<dyn Fn(bool, &[u8]) + Send + Sync>;

impl std::fmt::Debug for OutputTail {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OutputTail")
            .field("forwards", &self.forward.is_some())
            .finish()
    }
}

impl OutputTail {
    pub fn new() -> Arc<OutputTail> {
        Arc::new(OutputTail::default())
    }

    /// A tail whose every push also goes to `forward` (stderr?, bytes).
    pub fn forwarding(forward: impl Fn(bool, &[u8]) + Send + Sync + 'static) -> Arc<OutputTail> {
        Arc::new(OutputTail {
            forward: Some(Box::new(forward)),
            ..OutputTail::default()
        })
    }

    /// Append bytes of stdout (`stderr` false) or stderr.
    pub fn push(&self, stderr: bool, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        if let Some(f) = &self.forward {
            f(stderr, bytes);
        }
        let mut g = self.bufs.locked();
        let b = &mut g[usize::from(stderr)];
        if bytes.len() >= TAIL_BYTES {
            b.clear();
            b.extend_from_slice(&bytes[bytes.len() - TAIL_BYTES..]);
            return;
        }
        let over = (b.len() + bytes.len()).saturating_sub(TAIL_BYTES);
        b.drain(..over);
        b.extend_from_slice(bytes);
    }

    /// `(stdout, stderr)` as text (invalid UTF-8 replaced; a character cut
    /// at the front is dropped).
    pub fn snapshot(&self) -> (String, String) {
        let g = self.bufs.locked();
        let text = |b: &[u8]| {
            let skip = b
                .iter()
                .take(3)
                .take_while(|c| (0x80..0xc0).contains(*c))
                .count();
            String::from_utf8_lossy(&b[skip..]).into_owned()
        };
        (text(&g[0]), text(&g[1]))
    }
}
