//! Byte payloads that may live on disk: the `bytes` value and an outcome's
//! `.stdout` / `.stderr` (docs/rules.md §8).
//!
//! [`OutputBytes`] is either an in-memory `Arc<[u8]>` or a *spilled* stream:
//! a private file in the spill directory plus a small in-memory head. The
//! file is deleted when the last clone of the value is dropped (the
//! [`SpillFile`] handle is shared through an `Arc` and removes the file in its
//! `Drop`).
//!
//! Cheap operations never touch the file contents: [`OutputBytes::len`]
//! (length recorded at capture time), [`OutputBytes::head`] (served from the
//! in-memory head when it is long enough). [`OutputBytes::reader`] streams the
//! file. Only an explicit request for the whole contents
//! ([`OutputBytes::read_all`], or `Deref` to `[u8]`) loads it into memory;
//! the loaded copy is cached with the value.
//!
//! [`OutputSink`] builds an `OutputBytes` from a stream of chunks: it keeps up
//! to [`MEM_LIMIT`] bytes in memory and, past that, writes everything to a
//! spill file through a `BufWriter`.
//!
//! The spill directory is `$TMPDIR/shoal-<uid>/spill` (mode 0700, owner
//! checked) unless [`set_spill_dir`] chose another one.

use rustix::io::Errno;
use rustix::pipe::SpliceFlags;
use shoal_base::sync::Locked;
use std::borrow::Cow;
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

/// Bytes of one captured stream kept in memory before it spills to a file.
pub const MEM_LIMIT: usize = 8 << 20;

/// Bytes of a spilled stream kept in memory as its head (previews, sniffing).
pub const HEAD_KEEP: usize = 64 << 10;

/// A byte string, in memory or spilled to a private file. Cloning is cheap.
#[derive(Clone)]
pub struct OutputBytes(Repr);

#[derive(Clone)]
enum Repr {
    Mem(Arc<[u8]>),
    Spilled(Arc<Spilled>),
}

struct Spilled {
    file: SpillFile,
    len: u64,
    head: Arc<[u8]>,
    /// The whole contents, once somebody asked for them.
    loaded: OnceLock<Arc<[u8]>>,
}

mod tail;
pub use tail::{OutputTail, TAIL_BYTES};

/// A session's allowance of bytes in spill files (`[limits] spill_bytes`).
/// Bytes are taken before they are written and given back when the spill
/// file holding them is removed.
#[derive(Debug)]
pub struct SpillQuota {
    limit: u64,
    used: AtomicU64,
}

impl SpillQuota {
    /// The default of `[limits] spill_bytes` (4 GiB).
    pub const DEFAULT_LIMIT: u64 = 4 << 30;

    /// A quota of `limit` bytes (0: [`Self::DEFAULT_LIMIT`]).
    pub fn new(limit: u64) -> Arc<SpillQuota> {
        Arc::new(SpillQuota {
            limit: if limit == 0 {
                Self::DEFAULT_LIMIT
            } else {
                limit
            },
            used: AtomicU64::new(0),
        })
    }

    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes in this session's spill files now.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Relaxed)
    }

    /// Take up to `n` bytes; returns how many were granted.
    pub fn take_up_to(&self, n: u64) -> u64 {
        let mut cur = self.used.load(Ordering::Relaxed);
        loop {
            let grant = n.min(self.limit.saturating_sub(cur));
            if grant == 0 {
                return 0;
            }
            match self.used.compare_exchange_weak(
                cur,
                cur + grant,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return grant,
                Err(now) => cur = now,
            }
        }
    }

    /// Take exactly `n` bytes or nothing.
    pub fn take_all(&self, n: u64) -> bool {
        let got = self.take_up_to(n);
        if got < n {
            self.give_back(got);
            return false;
        }
        true
    }

    pub fn give_back(&self, n: u64) {
        let _ = self
            .used
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
                Some(u.saturating_sub(n))
            });
    }
}

/// A spill file; removed from disk when dropped (its bytes go back to the
/// quota they were charged to).
pub struct SpillFile {
    path: PathBuf,
    file: File,
    quota: Option<(Arc<SpillQuota>, u64)>,
}

impl SpillFile {
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        if let Some((q, n)) = self.quota.take() {
            q.give_back(n);
        }
    }
}

impl std::fmt::Debug for SpillFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("SpillFile").field(&self.path).finish()
    }
}

impl OutputBytes {
    pub fn empty() -> OutputBytes {
        OutputBytes(Repr::Mem(Arc::from(&b""[..])))
    }

    /// Length in bytes (never reads a spill file).
    #[allow(clippy::len_without_is_empty)]
    pub fn len(&self) -> usize {
        match &self.0 {
            Repr::Mem(b) => b.len(),
            Repr::Spilled(s) => s.len as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_spilled(&self) -> bool {
        matches!(self.0, Repr::Spilled(_))
    }

    /// The spill file, when spilled.
    pub fn spill_path(&self) -> Option<&Path> {
        match &self.0 {
            Repr::Mem(_) => None,
            Repr::Spilled(s) => Some(&s.file.path),
        }
    }

    /// The first `n` bytes (fewer when shorter). Served from memory when
    /// possible; reads at most `n` bytes of a spill file otherwise.
    pub fn head(&self, n: usize) -> Cow<'_, [u8]> {
        match &self.0 {
            Repr::Mem(b) => Cow::Borrowed(&b[..n.min(b.len())]),
            Repr::Spilled(s) => {
                if let Some(all) = s.loaded.get() {
                    return Cow::Borrowed(&all[..n.min(all.len())]);
                }
                let want = n.min(s.len as usize);
                if want <= s.head.len() {
                    return Cow::Borrowed(&s.head[..want]);
                }
                let mut buf = vec![0u8; want];
                match read_exact_at(&s.file.file, &mut buf, 0) {
                    Ok(got) => {
                        buf.truncate(got);
                        Cow::Owned(buf)
                    }
                    Err(_) => Cow::Borrowed(&s.head[..]),
                }
            }
        }
    }

    /// The whole contents. Loads (and caches) a spilled file.
    pub fn read_all(&self) -> io::Result<Arc<[u8]>> {
        match &self.0 {
            Repr::Mem(b) => Ok(b.clone()),
            Repr::Spilled(s) => {
                if let Some(all) = s.loaded.get() {
                    return Ok(all.clone());
                }
                let mut buf = vec![0u8; s.len as usize];
                let got = read_exact_at(&s.file.file, &mut buf, 0)?;
                if got != buf.len() {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "spill file is shorter than recorded",
                    ));
                }
                let all: Arc<[u8]> = Arc::from(buf);
                Ok(s.loaded.get_or_init(|| all).clone())
            }
        }
    }

    /// A streaming reader over the contents (keeps the spill file alive).
    pub fn reader(&self) -> Box<dyn Read + Send> {
        match &self.0 {
            Repr::Mem(b) => Box::new(io::Cursor::new(b.clone())),
            Repr::Spilled(s) => Box::new(SpillReader {
                s: s.clone(),
                pos: 0,
            }),
        }
    }

    /// Copy the contents to `w` without loading a spill file into memory.
    pub fn write_to(&self, w: &mut dyn Write) -> io::Result<u64> {
        match &self.0 {
            Repr::Mem(b) => {
                w.write_all(b)?;
                Ok(b.len() as u64)
            }
            Repr::Spilled(_) => {
                let mut r = self.reader();
                io::copy(&mut r, w)
            }
        }
    }

    /// A fresh read-only handle on the spill file (e.g. as a child's stdin),
    /// positioned at the start; `None` for in-memory bytes.
    pub fn open_spill(&self) -> Option<io::Result<File>> {
        match &self.0 {
            Repr::Mem(_) => None,
            Repr::Spilled(s) => Some(File::open(&s.file.path)),
        }
    }

    /// At most `limit` bytes for an error message or a preview: the whole
    /// contents when they fit, else the head plus a note with the total.
    pub fn bounded(&self, limit: usize) -> Arc<[u8]> {
        if let Repr::Mem(b) = &self.0 {
            if b.len() <= limit {
                return b.clone();
            }
        }
        if self.len() <= limit {
            if let Ok(all) = self.read_all() {
                return all;
            }
        }
        let mut v = self.head(limit).into_owned();
        v.extend_from_slice(
            format!(
                "\n… ({} bytes in all; {} more not shown)\n",
                self.len(),
                self.len().saturating_sub(v.len())
            )
            .as_bytes(),
        );
        Arc::from(v)
    }
}

fn read_exact_at(f: &File, buf: &mut [u8], mut off: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], off) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                off += n as u64;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

struct SpillReader {
    s: Arc<Spilled>,
    pos: u64,
}

impl Read for SpillReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let left = self.s.len.saturating_sub(self.pos);
        if left == 0 || buf.is_empty() {
            return Ok(0);
        }
        let n = buf.len().min(left.min(usize::MAX as u64) as usize);
        let got = self.s.file.file.read_at(&mut buf[..n], self.pos)?;
        self.pos += got as u64;
        Ok(got)
    }
}

impl std::ops::Deref for OutputBytes {
    type Target = [u8];
    /// The whole contents. A spilled value is loaded on first use (use
    /// [`OutputBytes::len`], [`OutputBytes::head`] or
    /// [`OutputBytes::reader`] to avoid that); if the file cannot be read the
    /// in-memory head is all there is.
    fn deref(&self) -> &[u8] {
        match &self.0 {
            Repr::Mem(b) => b,
            Repr::Spilled(s) => {
                if s.loaded.get().is_none() {
                    if let Err(e) = self.read_all() {
                        tracing::warn!(path = %s.file.path.display(), "cannot read spill file: {e}");
                        return &s.head;
                    }
                }
                match s.loaded.get() {
                    Some(all) => all,
                    None => &s.head,
                }
            }
        }
    }
}

impl AsRef<[u8]> for OutputBytes {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl PartialEq for OutputBytes {
    fn eq(&self, other: &OutputBytes) -> bool {
        if self.len() != other.len() {
            return false;
        }
        if let (Repr::Mem(a), Repr::Mem(b)) = (&self.0, &other.0) {
            return a == b;
        }
        // Compare chunk by chunk without loading either side.
        let (mut a, mut b) = (self.reader(), other.reader());
        let mut ba = vec![0u8; 64 << 10];
        let mut bb = vec![0u8; 64 << 10];
        loop {
            let n = match fill(&mut a, &mut ba) {
                Ok(n) => n,
                Err(_) => return false,
            };
            let m = match fill(&mut b, &mut bb) {
                Ok(m) => m,
                Err(_) => return false,
            };
            if n != m || ba[..n] != bb[..m] {
                return false;
            }
            if n == 0 {
                return true;
            }
        }
    }
}

fn fill(r: &mut dyn Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match r.read(&mut buf[done..]) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

impl std::fmt::Debug for OutputBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Repr::Mem(b) => write!(f, "OutputBytes({} bytes)", b.len()),
            Repr::Spilled(s) => write!(
                f,
                "OutputBytes({} bytes, spilled to {})",
                s.len,
                s.file.path.display()
            ),
        }
    }
}

impl From<Arc<[u8]>> for OutputBytes {
    fn from(b: Arc<[u8]>) -> OutputBytes {
        OutputBytes(Repr::Mem(b))
    }
}

impl From<Vec<u8>> for OutputBytes {
    fn from(b: Vec<u8>) -> OutputBytes {
        OutputBytes(Repr::Mem(Arc::from(b)))
    }
}

impl From<&[u8]> for OutputBytes {
    fn from(b: &[u8]) -> OutputBytes {
        OutputBytes(Repr::Mem(Arc::from(b)))
    }
}

impl From<&str> for OutputBytes {
    fn from(s: &str) -> OutputBytes {
        OutputBytes::from(s.as_bytes())
    }
}

impl Default for OutputBytes {
    fn default() -> OutputBytes {
        OutputBytes::empty()
    }
}

// ---- spill files ---------------------------------------------------------

pub use super::spill_dir::{default_spill_dir, private_temp_dir, set_spill_dir, spill_dir};
use super::spill_dir::{ready_dir, READY};

static SPILL_SEQ: AtomicU64 = AtomicU64::new(0);

/// Create a new, empty spill file (mode 0600, read-write).
pub fn create_spill_file() -> io::Result<SpillFile> {
    let dir = ready_dir()?;
    loop {
        let n = SPILL_SEQ.fetch_add(1, Ordering::Relaxed);
        let path = dir.join(format!("{}-{n}.out", std::process::id()));
        match OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                return Ok(SpillFile {
                    path,
                    file,
                    quota: None,
                })
            }
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                // The directory may have been removed under us: retry once.
                READY.locked().take();
                let dir2 = ready_dir()?;
                let path = dir2.join(format!("{}-{n}.out", std::process::id()));
                return OpenOptions::new()
                    .read(true)
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&path)
                    .map(|file| SpillFile {
                        path,
                        file,
                        quota: None,
                    })
                    .map_err(|_| e);
            }
        }
    }
}

// ---- building ------------------------------------------------------------

/// Accumulates a stream: in memory up to `mem_limit`, then in a spill file.
pub struct OutputSink {
    mem: Vec<u8>,
    mem_limit: usize,
    spill: Option<(BufWriter<File>, SpillFile)>,
    head: Option<Arc<[u8]>>,
    len: u64,
    /// Bytes that could not be stored (spill file unavailable or failing).
    dropped: u64,
    error: Option<String>,
    /// `splice(2)` is not available for this pipe/file pair.
    no_splice: bool,
    /// The session's spill allowance; `None`: unlimited.
    quota: Option<Arc<SpillQuota>>,
    /// The quota ran out: later bytes are discarded (the reader closes the
    /// pipe, so the child sees EPIPE).
    truncated: bool,
}

impl Default for OutputSink {
    fn default() -> OutputSink {
        OutputSink::new(MEM_LIMIT)
    }
}

impl OutputSink {
    pub fn new(mem_limit: usize) -> OutputSink {
        OutputSink {
            mem: Vec::new(),
            mem_limit,
            spill: None,
            head: None,
            len: 0,
            dropped: 0,
            error: None,
            no_splice: false,
            quota: None,
            truncated: false,
        }
    }

    /// Charge spilled bytes to `quota` (`[limits] spill_bytes`).
    pub fn with_quota(mut self, quota: Option<Arc<SpillQuota>>) -> OutputSink {
        self.quota = quota;
        self
    }

    /// Whether bytes were cut because the spill quota ran out.
    pub fn is_truncated(&self) -> bool {
        self.truncated
    }

    /// Take `n` bytes from the quota for the spill file; the granted count.
    fn charge(&mut self, n: u64) -> u64 {
        let Some(q) = &self.quota else { return n };
        let got = q.take_up_to(n);
        if got > 0 {
            if let Some((_, sf)) = &mut self.spill {
                if let Some((_, c)) = &mut sf.quota {
                    *c += got;
                }
            }
        }
        got
    }

    /// Give back `n` granted bytes that were not written.
    fn uncharge(&mut self, n: u64) {
        if n == 0 {
            return;
        }
        if let (Some(q), Some((_, sf))) = (&self.quota, &mut self.spill) {
            if let Some((_, c)) = &mut sf.quota {
                *c = c.saturating_sub(n);
            }
            q.give_back(n);
        }
    }

    /// Bytes stored so far.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the stream went to a spill file.
    pub fn is_spilling(&self) -> bool {
        self.spill.is_some()
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.is_empty() || self.truncated {
            return;
        }
        if self.spill.is_some() {
            if self.error.is_some() {
                // After a failed write the file is no longer a faithful copy.
                self.dropped += chunk.len() as u64;
                return;
            }
            let granted = self.charge(chunk.len() as u64) as usize;
            if granted < chunk.len() {
                self.truncated = true;
            }
            let chunk = &chunk[..granted];
            let Some((w, _)) = &mut self.spill else {
                return;
            };
            match w.write_all(chunk) {
                Ok(()) => self.len += chunk.len() as u64,
                Err(e) => self.fail(chunk.len() as u64, e),
            }
            return;
        }
        if self.error.is_some() || self.mem.len() + chunk.len() > self.mem_limit {
            if self.error.is_none() {
                // The bytes held in memory move to the file: they need room.
                let need = self.mem.len() as u64;
                if self.quota.as_ref().is_some_and(|q| !q.take_all(need)) {
                    self.truncated = true;
                    return;
                }
                self.start_spill();
                match (&self.quota, &mut self.spill) {
                    (Some(q), Some((_, sf))) => sf.quota = Some((q.clone(), need)),
                    (Some(q), None) => q.give_back(need),
                    _ => {}
                }
            }
            if self.spill.is_some() {
                return self.push(chunk);
            }
            // No spill file: keep what fits, count the rest.
            let room = self
                .mem_limit
                .saturating_sub(self.mem.len())
                .min(chunk.len());
            self.mem.extend_from_slice(&chunk[..room]);
            self.len += room as u64;
            self.dropped += (chunk.len() - room) as u64;
            return;
        }
        self.mem.extend_from_slice(chunk);
        self.len += chunk.len() as u64;
    }

    /// Once spilling, move up to `max` bytes from the pipe `fd` straight
    /// into the spill file with `splice(2)` (no copy through user space).
    /// `None` when not spilling or when splicing is not possible (the caller
    /// then reads and [`push`](Self::push)es); `Some(Ok(0))` at end of input.
    pub fn splice_from(
        &mut self,
        fd: std::os::fd::BorrowedFd<'_>,
        max: usize,
    ) -> Option<io::Result<usize>> {
        if self.error.is_some() || self.no_splice || self.spill.is_none() {
            return None;
        }
        let max = self.charge(max as u64) as usize;
        if max == 0 {
            // The quota is spent: end of input as far as the caller goes.
            self.truncated = true;
            return Some(Ok(0));
        }
        let r = self.splice_charged(fd, max);
        let moved = match &r {
            Some(Ok(n)) => *n,
            _ => 0,
        };
        self.uncharge((max - moved) as u64);
        r
    }

    fn splice_charged(
        &mut self,
        fd: std::os::fd::BorrowedFd<'_>,
        max: usize,
    ) -> Option<io::Result<usize>> {
        let (w, _) = self.spill.as_mut()?;
        // Buffered bytes go first; the file offset is shared with `w`.
        if let Err(e) = w.flush() {
            self.error = Some(format!("cannot write spill file: {e}"));
            return None;
        }
        loop {
            // No offsets: the files' own offsets are used (and advanced).
            let r = rustix::pipe::splice(fd, None, w.get_ref(), None, max, SpliceFlags::MOVE);
            let e = match r {
                Ok(n) => {
                    self.len += n as u64;
                    return Some(Ok(n));
                }
                Err(e) => e,
            };
            match e {
                Errno::INTR => continue,
                Errno::INVAL | Errno::NOSYS | Errno::BADF => {
                    self.no_splice = true;
                    return None;
                }
                _ => {
                    // A write-side failure (disk full, …): count nothing
                    // more as stored; the caller drains the rest by reading.
                    self.error = Some(format!("cannot write spill file: {e}"));
                    return None;
                }
            }
        }
    }

    fn start_spill(&mut self) {
        match create_spill_file() {
            Ok(sf) => match sf.file.try_clone() {
                Ok(f) => {
                    let mut w = BufWriter::with_capacity(1 << 20, f);
                    let keep = HEAD_KEEP.min(self.mem.len());
                    self.head = Some(Arc::from(&self.mem[..keep]));
                    if let Err(e) = w.write_all(&self.mem) {
                        self.error = Some(format!("cannot write spill file: {e}"));
                        self.head = None;
                        return;
                    }
                    self.mem = Vec::new();
                    self.spill = Some((w, sf));
                }
                Err(e) => self.error = Some(format!("cannot use spill file: {e}")),
            },
            Err(e) => self.error = Some(format!("cannot create spill file: {e}")),
        }
    }

    fn fail(&mut self, n: u64, e: io::Error) {
        // Keep the stored prefix; count everything else as dropped.
        if self.error.is_none() {
            self.error = Some(format!("cannot write spill file: {e}"));
        }
        self.dropped += n;
    }

    /// Why bytes were dropped, if they were.
    pub fn error(&self) -> Option<&str> {
        self.error.as_deref()
    }

    /// The finished value and the number of bytes that could not be stored.
    pub fn finish(mut self) -> (OutputBytes, u64) {
        let Some((mut w, sf)) = self.spill.take() else {
            let mem = std::mem::take(&mut self.mem);
            return (OutputBytes::from(mem), self.dropped);
        };
        if let Err(e) = w.flush() {
            // What reached the file is unknown; trust its size.
            self.error
                .get_or_insert(format!("cannot write spill file: {e}"));
        }
        drop(w);
        let on_disk = sf.file.metadata().map(|m| m.len()).unwrap_or(0);
        if on_disk < self.len {
            self.dropped += self.len - on_disk;
            self.len = on_disk;
        }
        let head = self.head.take().unwrap_or_else(|| Arc::from(&b""[..]));
        let s = Spilled {
            file: sf,
            len: self.len,
            head,
            loaded: OnceLock::new(),
        };
        (OutputBytes(Repr::Spilled(Arc::new(s))), self.dropped)
    }
}

#[cfg(test)]
mod tests;
