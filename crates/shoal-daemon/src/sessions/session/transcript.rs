//! A session's transcript: the values behind its `out:N` refs, with the
//! memory bound that lets old values leave memory (they are read back from the
//! journal). Plain data: it never reads the journal itself and takes no lock.

use shoal_value::Value;

/// The values behind a session's `out:N` refs. With a journal, memory is
/// bounded: past `session.resident_values` values or [`RESIDENT_WEIGHT_MAX`] weight
/// units the oldest values leave memory (their slot stays, `None`) and are
/// read back from the journal's content store on demand. Without a journal
/// every value stays resident.
#[derive(Debug)]
pub struct Transcript {
    pub(super) items: Vec<Option<Value>>,
    /// Values kept in memory at most (`session.resident_values`).
    max_resident: usize,
    /// Index of the oldest value still in memory.
    oldest: usize,
    resident: usize,
    weight: u64,
}

/// About 32 bytes a unit: ~128 MB of values per session.
const RESIDENT_WEIGHT_MAX: u64 = 4 << 20;

/// A cheap, top-level estimate of a value's memory in ~32-byte units.
fn weight(v: &Value) -> u64 {
    let n = match v {
        Value::List(l) => l.len() as u64,
        Value::Table(t) => t.len() as u64 * t.first().map_or(1, |r| r.len().max(1)) as u64,
        Value::Record(r) => r.len() as u64,
        Value::Str(s) => s.len() as u64 / 32,
        Value::Bytes(b) => b.len() as u64 / 32,
        Value::Outcome(o) => (o.stdout.len() + o.stderr.len()) as u64 / 32,
        _ => 0,
    };
    1 + n
}

impl Transcript {
    pub fn new(max_resident: usize) -> Transcript {
        Transcript {
            items: Vec::new(),
            max_resident: max_resident.max(1),
            oldest: 0,
            resident: 0,
            weight: 0,
        }
    }

    pub(super) fn push(&mut self, v: Value, can_evict: bool) {
        self.weight += weight(&v);
        self.resident += 1;
        self.items.push(Some(v));
        if !can_evict {
            return;
        }
        // Keep at least the newest value resident.
        while (self.resident > self.max_resident || self.weight > RESIDENT_WEIGHT_MAX)
            && self.oldest + 1 < self.items.len()
        {
            if let Some(old) = self.items[self.oldest].take() {
                self.weight = self.weight.saturating_sub(weight(&old));
                self.resident -= 1;
            }
            self.oldest += 1;
        }
    }
}
