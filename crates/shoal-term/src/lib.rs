//! shoal-term: the terminal emulator of one Shoal PTY, in its own crate so
//! that it (and vt100's generic parser, instantiated here) is optimised even
//! in debug builds of the daemon.
//!
//! The emulator: a `vt100` parser with no scrollback of
//! its own (its grid stays one screen of cells) plus a bounded buffer of the
//! plain-text lines that scrolled off the top, filled by `on_scroll`.
//!
//! Rendering the screen (trimmed rows, cursor, a content hash) is cached per
//! generation, so repeated reads of an unchanged screen cost a copy.
//!
//! Floods take a fast path (`fast.rs`): runs of complete plain or SGR lines
//! that scroll straight through the screen go to the scrollback without
//! vt100 drawing them, and vt100 draws only the rows that stay visible.
//! Everything a `Term` exposes is what feeding every byte to vt100 gives
//! (`Term::without_fast_path` is that reference; the differential test in
//! `diff_tests.rs` holds them equal).

pub mod ansi;
#[cfg(test)]
mod diff_tests;
mod fast;
mod scan;

use std::collections::hash_map::DefaultHasher;
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};
use std::num::NonZeroU16;
use std::sync::Arc;

/// Scrolled-off lines kept per PTY.
pub const SCROLLBACK_LINES: usize = 1000;
/// Bytes of scrolled-off text kept per PTY (the oldest lines go first).
pub const SCROLLBACK_BYTES: usize = 1 << 20;
/// Columns and rows are clamped to `1..=MAX_DIM`.
pub const MAX_DIM: u16 = 1000;
/// Cells (rows × cols) a screen may have at most: vt100 keeps a 32-byte
/// cell for each, on the main and on the alternate screen.
pub const MAX_CELLS: u32 = 250_000;
/// Bytes of one vt100 cell.
const CELL_BYTES: u64 = 32;
/// Bytes charged per cell for the rendered screen text: the rendering the
/// readers share and the next one being built, at up to 4 bytes a cell
/// with the slack of a growing `String` (one code point per cell).
const RENDER_CELL_BYTES: u64 = 8;
/// Per row: vt100's `Row` on both screens and the rendered row's `String`
/// (twice).
const ROW_BYTES: u64 = 2 * 32 + 2 * 24;

/// The most bytes the emulator of a `rows` × `cols` screen holds, when its
/// rows may still be `row_cap` cells wide (see [`row_capacity`]): both
/// grids, the rendered text, and the scrollback at its caps. Buffers
/// outside the emulator (the I/O thread's) are the caller's to add.
pub fn bound(rows: u16, row_cap: u16) -> u64 {
    let (rows, cap) = (rows.max(1) as u64, row_cap.max(1) as u64);
    let cells = rows * cap;
    let scrollback = SCROLLBACK_BYTES as u64
        // A `Box<str>` per line in a `VecDeque` that may have doubled,
        // and the row being captured.
        + 2 * SCROLLBACK_LINES as u64 * 16
        + cap * 22;
    cells * (2 * CELL_BYTES + RENDER_CELL_BYTES) + rows * ROW_BYTES + scrollback
}

/// How wide (in cells) the rows of a screen may be allocated after it is
/// resized to `cols` columns, when they could be `cap` wide before: vt100
/// widens a row with `Vec::resize`, which at least doubles the allocation,
/// and narrows it without giving memory back. Rows made later are exact.
pub fn row_capacity(cap: u16, cols: u16) -> u16 {
    if cols > cap {
        cols.max(cap.saturating_mul(2))
    } else {
        cap
    }
}

/// `Err` with a message when a `rows` × `cols` screen has more than
/// [`MAX_CELLS`] cells.
pub fn check_cells(rows: u16, cols: u16) -> Result<(), String> {
    let cells = rows as u32 * cols as u32;
    if cells > MAX_CELLS {
        return Err(format!(
            "a {cols}x{rows} screen has {cells} cells; a PTY has at most {MAX_CELLS} cells (cols x rows, e.g. 1000x250 or 500x500)"
        ));
    }
    Ok(())
}

/// Clamp a requested size to `1..=MAX_DIM`.
pub fn clamp_dim(v: u64) -> u16 {
    v.clamp(1, MAX_DIM as u64) as u16
}

fn nz(v: u16) -> NonZeroU16 {
    NonZeroU16::new(v.clamp(1, MAX_DIM)).unwrap_or(NonZeroU16::MIN)
}

/// Lines that left the top of the main screen, oldest first, as plain text
/// with trailing blanks trimmed (each an exact-size allocation).
struct Scrolled {
    lines: VecDeque<Box<str>>,
    cap: usize,
    /// Bytes of text in `lines`, at most [`SCROLLBACK_BYTES`].
    bytes: usize,
    /// Reused for the row being captured.
    scratch: String,
    /// Scrolls to drop: blank rows the fast path scrolls off, not history.
    skip: usize,
}

impl Scrolled {
    fn push(&mut self, line: Box<str>) {
        while self.lines.len() >= self.cap
            || (self.bytes + line.len() > SCROLLBACK_BYTES && !self.lines.is_empty())
        {
            match self.lines.pop_front() {
                Some(old) => self.bytes -= old.len(),
                None => return,
            }
        }
        self.bytes += line.len();
        self.lines.push_back(line);
    }
}

impl vt100::Callbacks for Scrolled {
    fn on_scroll(&mut self, contents: vt100::capture::RowContents<'_>, alternate_screen: bool) {
        if self.skip > 0 {
            self.skip -= 1;
            return;
        }
        if alternate_screen || self.cap == 0 {
            return;
        }
        // vt100 only hands out a scrolled row as "basic formatted" text; its
        // SGR sequences are dropped as they are written, so the stored line
        // is already plain (what `basic_formatted_to_plain` would give).
        self.scratch.clear();
        let mut sink = PlainSink {
            out: &mut self.scratch,
            in_esc: false,
        };
        let mut state = vt100::capture::BasicFormattedCaptureState::new();
        if contents
            .write_formatted_basic(&mut sink, &mut state)
            .is_err()
        {
            return;
        }
        let line: Box<str> = self.scratch.trim_end().into();
        self.push(line);
    }
}

/// A `fmt::Write` that keeps the text of vt100's basic formatted output and
/// drops its escape sequences (each `ESC` through the next `m`, as
/// `vt100::capture::basic_formatted_to_plain` splits them).
struct PlainSink<'a> {
    out: &'a mut String,
    in_esc: bool,
}

impl std::fmt::Write for PlainSink<'_> {
    fn write_str(&mut self, mut s: &str) -> std::fmt::Result {
        // Most writes are one cell's text outside an escape.
        if !self.in_esc && !s.as_bytes().contains(&0x1b) {
            self.out.push_str(s);
            return Ok(());
        }
        loop {
            if self.in_esc {
                match s.find('m') {
                    Some(i) => {
                        self.in_esc = false;
                        s = &s[i + 1..];
                    }
                    None => return Ok(()),
                }
            }
            match s.find('\x1b') {
                Some(i) => {
                    self.out.push_str(&s[..i]);
                    self.in_esc = true;
                    s = &s[i + 1..];
                }
                None => {
                    self.out.push_str(s);
                    return Ok(());
                }
            }
        }
    }

    fn write_char(&mut self, c: char) -> std::fmt::Result {
        if self.in_esc {
            self.in_esc = c != 'm';
        } else if c == '\x1b' {
            self.in_esc = true;
        } else {
            self.out.push(c);
        }
        Ok(())
    }
}

/// The rendered screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rendered {
    /// Exactly `rows` strings, trailing blanks trimmed.
    pub rows: Vec<String>,
    pub cols: u16,
    pub cursor_row: u16,
    pub cursor_col: u16,
    pub cursor_hidden: bool,
    pub alternate: bool,
    pub hash: u64,
}

impl Rendered {
    /// The rows joined by newlines (what `wait_for` matches).
    pub fn text(&self) -> String {
        self.rows.join("\n")
    }
}

/// A read of the screen: the rendering, whether it changed since the
/// previous read, and the requested scrollback.
#[derive(Clone, Debug)]
pub struct Snapshot {
    pub screen: Rendered,
    pub changed: bool,
    pub scrollback: Option<Vec<String>>,
}

pub struct Term {
    parser: vt100::Parser<Scrolled>,
    /// `None`: every byte goes to vt100 (the reference).
    fast: Option<Fast>,
    gen: u64,
    /// The rendering of generation `.0`, shared with the readers it is
    /// published to (one copy, not one per holder).
    cache: Option<(u64, Arc<Rendered>)>,
    last_read: Option<u64>,
}

/// The fast path's state: the scan of every byte fed, what vt100 does not
/// expose, and reused buffers.
struct Fast {
    scan: scan::Scanner,
    /// The main screen's scroll region is the whole screen.
    region_full: bool,
    /// A cell as vt100 makes a blank one (for the bottom-row check).
    blank: vt100::Cell,
    lines: Vec<fast::Line>,
    text: Vec<u8>,
    /// Input after a run's row boundary that vt100 has not been fed yet
    /// (simple line content; see `Fast::materialize`).
    pending: Vec<u8>,
    /// Reused for pending input plus the next chunk.
    buf: Vec<u8>,
    /// Runs taken, and chunks fed after undrawn input (the differential
    /// test checks that both have work).
    runs: u64,
    carried: u64,
}

/// Simple lines parsed per run at most (bounds the line records; a run
/// needs fewer than `2 * MAX_DIM` rows to pay).
const MAX_RUN_LINES: usize = 2048;
/// Input is scanned in pieces of at most this many bytes (offsets in the
/// line records are `u32`, printable counts 31 bits).
const MAX_PIECE: usize = 1 << 30;

/// `SHOAL_NO_FAST_PATHS=1` ([`shoal_base::fast_paths`]): every [`Term::new`]
/// is [`Term::without_fast_path`], the general path the flood fast path is
/// tested against, so the whole suite can run without it.
pub fn fast_paths_off() -> bool {
    !shoal_base::fast_paths()
}

impl Term {
    /// A terminal with the flood fast path, unless [`fast_paths_off`].
    pub fn new(rows: u16, cols: u16, scrollback: usize) -> Term {
        if fast_paths_off() {
            return Term::without_fast_path(rows, cols, scrollback);
        }
        Term::with_fast_path(rows, cols, scrollback)
    }

    /// A terminal that takes the flood fast path whatever the switch says.
    pub fn with_fast_path(rows: u16, cols: u16, scrollback: usize) -> Term {
        let mut t = Term::without_fast_path(rows, cols, scrollback);
        let blank = vt100::Parser::new(NonZeroU16::MIN, NonZeroU16::MIN, 0)
            .screen()
            .cell(0, 0)
            .cloned();
        t.fast = blank.map(|blank| Fast {
            scan: scan::Scanner::new(),
            region_full: true,
            blank,
            lines: Vec::new(),
            text: Vec::new(),
            pending: Vec::new(),
            buf: Vec::new(),
            runs: 0,
            carried: 0,
        });
        t
    }

    /// A `Term` that feeds every byte to vt100: what `new` gives, more
    /// slowly (the specification of the fast path, for tests and
    /// measurements).
    pub fn without_fast_path(rows: u16, cols: u16, scrollback: usize) -> Term {
        Term {
            parser: vt100::Parser::new_with_callbacks(
                nz(rows),
                nz(cols),
                0,
                Scrolled {
                    lines: VecDeque::new(),
                    cap: scrollback,
                    bytes: 0,
                    scratch: String::new(),
                    skip: 0,
                },
            ),
            fast: None,
            gen: 0,
            cache: None,
            last_read: None,
        }
    }

    /// Feed program output.
    pub fn process(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match &mut self.fast {
            None => self.parser.process(bytes),
            Some(f) => f.feed(&mut self.parser, bytes),
        }
        self.gen += 1;
    }

    /// Resize the grid (rows leaving the top go to the scrollback).
    pub fn set_size(&mut self, rows: u16, cols: u16) {
        let (rows, cols) = (nz(rows), nz(cols));
        if let Some(f) = &mut self.fast {
            f.materialize(&mut self.parser);
            // vt100 resets both scroll regions when the size changes.
            if self.parser.screen().size() != (rows, cols) {
                f.region_full = true;
            }
        }
        self.parser.set_size(rows, cols);
        self.gen += 1;
    }

    /// `(rows, cols)`.
    pub fn size(&self) -> (u16, u16) {
        let (r, c) = self.parser.screen().size();
        (r.get(), c.get())
    }

    /// Bumps on every change.
    pub fn generation(&self) -> u64 {
        self.gen
    }

    /// vt100's screen with every byte fed so far applied: colours, cursor
    /// and modes, for `state_formatted` and `state_diff` (a live view).
    pub fn vt_screen(&mut self) -> &vt100::Screen {
        if let Some(f) = &mut self.fast {
            f.materialize(&mut self.parser);
        }
        self.parser.screen()
    }

    /// Lines in the scrollback buffer.
    pub fn scrollback_len(&self) -> usize {
        self.parser.callbacks().lines.len()
    }

    /// The screen now (cached while nothing changed).
    pub fn render(&mut self) -> &Rendered {
        self.render_cached()
    }

    /// The screen now, shared with the cache (what the I/O thread
    /// publishes: the rendering is kept once).
    pub fn render_shared(&mut self) -> Arc<Rendered> {
        self.render_cached().clone()
    }

    fn render_cached(&mut self) -> &Arc<Rendered> {
        if let Some(f) = &mut self.fast {
            f.materialize(&mut self.parser);
        }
        if self.cache.as_ref().is_none_or(|(g, _)| *g != self.gen) {
            let screen = self.parser.screen();
            let (_, cols) = screen.size();
            let rows: Vec<String> = screen
                .rows(0, cols.get())
                .map(|mut r| {
                    r.truncate(r.trim_end().len());
                    r
                })
                .collect();
            let mut h = DefaultHasher::new();
            rows.hash(&mut h);
            let (cursor_row, cursor_col) = screen.cursor_position();
            let r = Rendered {
                rows,
                cols: cols.get(),
                cursor_row,
                cursor_col,
                cursor_hidden: screen.hide_cursor(),
                alternate: screen.alternate_screen(),
                hash: h.finish(),
            };
            self.cache = Some((self.gen, Arc::new(r)));
        }
        match &self.cache {
            Some((_, r)) => r,
            None => unreachable!("the cache was just filled"),
        }
    }

    /// A read: consumes the `changed` bit (true on the first read and when
    /// the contents differ from the previous read); `scrollback` asks for up
    /// to that many of the newest scrolled-off lines, oldest first.
    pub fn read(&mut self, scrollback: Option<usize>) -> Snapshot {
        let screen = self.render().clone();
        let changed = self.last_read != Some(screen.hash);
        self.last_read = Some(screen.hash);
        let scrollback = scrollback.map(|n| self.scrollback(n));
        Snapshot {
            screen,
            changed,
            scrollback,
        }
    }

    /// Up to `n` of the newest scrolled-off lines, oldest first, as plain text.
    pub fn scrollback(&self, n: usize) -> Vec<String> {
        let lines = &self.parser.callbacks().lines;
        let skip = lines.len().saturating_sub(n);
        lines.iter().skip(skip).map(|l| l.to_string()).collect()
    }

    /// Approximate heap bytes held (grid cells and scrollback text).
    pub fn approx_bytes(&self) -> usize {
        let (r, c) = self.size();
        // Main and alternate grids, 32 bytes a cell (vt100's `Cell`).
        let grid = 2 * r as usize * c as usize * 32;
        let lines: usize = self
            .parser
            .callbacks()
            .lines
            .iter()
            .map(|l| l.len() + std::mem::size_of::<Box<str>>())
            .sum();
        grid + lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_are_exact_and_trimmed() {
        let mut t = Term::new(5, 20, 10);
        t.process(b"hello   \r\nworld");
        let r = t.render().clone();
        assert_eq!(r.rows.len(), 5);
        assert_eq!(r.rows[0], "hello");
        assert_eq!(r.rows[1], "world");
        assert_eq!(r.rows[4], "");
        assert_eq!((r.cursor_row, r.cursor_col), (1, 5));
        assert!(!r.cursor_hidden);
        t.process(b"\x1b[?25l");
        assert!(t.render().cursor_hidden);
    }

    #[test]
    fn changed_is_consumed() {
        let mut t = Term::new(3, 10, 0);
        assert!(t.read(None).changed, "first read");
        assert!(!t.read(None).changed);
        t.process(b"x");
        assert!(t.read(None).changed);
        assert!(!t.read(None).changed);
        // Output that leaves the contents as they were is not a change.
        t.process(b"\x1b[m");
        assert!(!t.read(None).changed);
    }

    #[test]
    fn scrollback_is_bounded_and_in_order() {
        let mut t = Term::new(3, 10, 4);
        for i in 0..10 {
            t.process(format!("line{i}\r\n").as_bytes());
        }
        // Screen: line8, line9, "" (cursor on the last row).
        let s = t.read(Some(100));
        assert_eq!(s.screen.rows, vec!["line8", "line9", ""]);
        assert_eq!(
            s.scrollback.unwrap(),
            vec!["line4", "line5", "line6", "line7"]
        );
        assert_eq!(t.read(Some(2)).scrollback.unwrap(), vec!["line6", "line7"]);
        assert_eq!(t.read(None).scrollback, None);
        assert_eq!(t.scrollback_len(), 4);
    }

    #[test]
    fn styled_scrollback_is_plain() {
        let mut t = Term::new(1, 20, 5);
        t.process(b"\x1b[1;31mred\x1b[m plain  \r\nnext");
        assert_eq!(t.read(Some(5)).scrollback.unwrap(), vec!["red plain"]);
    }

    #[test]
    fn alternate_screen_does_not_scroll_into_history() {
        let mut t = Term::new(2, 10, 10);
        t.process(b"\x1b[?1049h");
        for i in 0..5 {
            t.process(format!("alt{i}\r\n").as_bytes());
        }
        assert!(t.render().alternate);
        assert_eq!(t.scrollback_len(), 0);
        t.process(b"\x1b[?1049l");
        assert!(!t.render().alternate);
    }

    #[test]
    fn resize_changes_the_grid() {
        let mut t = Term::new(24, 80, 10);
        t.set_size(10, 40);
        assert_eq!(t.size(), (10, 40));
        assert_eq!(t.render().rows.len(), 10);
        assert_eq!(clamp_dim(0), 1);
        assert_eq!(clamp_dim(5000), 1000);
        let mut t = Term::new(0, 0, 0);
        assert_eq!(t.size(), (1, 1));
        t.process(b"abc");
        assert_eq!(t.render().rows.len(), 1);
    }

    /// The capture as it was first written: vt100's basic formatted text
    /// per scrolled row, SGR stripped and trailing blanks trimmed on read.
    struct Formatted(Vec<String>);

    impl vt100::Callbacks for Formatted {
        fn on_scroll(&mut self, contents: vt100::capture::RowContents<'_>, alternate: bool) {
            if alternate {
                return;
            }
            let mut line = String::new();
            let mut state = vt100::capture::BasicFormattedCaptureState::new();
            contents
                .write_formatted_basic(&mut line, &mut state)
                .unwrap();
            let mut plain: String = vt100::capture::basic_formatted_to_plain(&line).collect();
            plain.truncate(plain.trim_end().len());
            self.0.push(plain);
        }
    }

    #[test]
    fn plain_capture_matches_the_formatted_one() {
        let inputs: [&[u8]; 6] = [
            b"\x1b[1;31mred\x1b[m plain  \r\n\x1b[44m   \x1b[m x\r\n",
            "wide \u{4e16}\u{754c} and \u{1f600} emoji\r\ncombining e\u{301}\r\n".as_bytes(),
            b"\x1b[7minverse\x1b[27m \x1b[38;5;200mcol\x1b[48;2;1;2;3mrgb\x1b[m\r\n",
            b"a line long enough to wrap past the twenty columns of this screen\r\n",
            b"tab\tstop\x1b[5Gover\r\n\x1b[2K\x1b[3mital\x1b[23m\x1b[4munder\x1b[24m   \r\n",
            b"\x1b[1mbold\x1b[22m\x1b[2mdim\x1b[0m  trailing  \x1b[41m  \x1b[m\r\n",
        ];
        let mut t = Term::new(2, 20, 1000);
        let mut want = vt100::Parser::new_with_callbacks(nz(2), nz(20), 0, Formatted(Vec::new()));
        for _ in 0..3 {
            for inp in inputs {
                t.process(inp);
                want.process(inp);
            }
        }
        assert!(want.callbacks().0.len() > 30);
        assert_eq!(t.scrollback(usize::MAX), want.callbacks().0);
        // The capture's own sink, fed escapes split across writes.
        let mut out = String::new();
        let mut sink = PlainSink {
            out: &mut out,
            in_esc: false,
        };
        use std::fmt::Write;
        sink.write_str("a\x1b[1").unwrap();
        sink.write_char(';').unwrap();
        sink.write_str("31mb\x1b[mc").unwrap();
        sink.write_char('\x1b').unwrap();
        sink.write_char('m').unwrap();
        sink.write_char('d').unwrap();
        assert_eq!(out, "abcd");
    }

    #[test]
    fn scrollback_bytes_are_bounded() {
        let mut t = Term::new(24, 80, SCROLLBACK_LINES);
        let line = "\x1b[1;32m".to_string() + &"x".repeat(79) + "\x1b[m\r\n";
        for _ in 0..3 * SCROLLBACK_LINES {
            t.process(line.as_bytes());
        }
        assert_eq!(t.scrollback_len(), SCROLLBACK_LINES);
        // Plain text only: 79 bytes a line plus the line's own header.
        assert!(t.approx_bytes() < 2 * 24 * 80 * 32 + SCROLLBACK_LINES * 100);
    }

    #[test]
    fn wide_scrollback_is_capped_in_bytes_on_both_paths() {
        // Two bytes a cell: the byte cap binds before the line cap.
        let line = "é".repeat(999) + "\r\n";
        let input = line.repeat(3 * SCROLLBACK_LINES);
        for mut t in [
            Term::new(250, 1000, SCROLLBACK_LINES),
            Term::without_fast_path(250, 1000, SCROLLBACK_LINES),
        ] {
            t.process(input.as_bytes());
            let kept = t.scrollback(usize::MAX);
            let bytes: usize = kept.iter().map(String::len).sum();
            assert!(bytes <= SCROLLBACK_BYTES, "{bytes}");
            // The newest lines that fit, not fewer.
            assert_eq!(kept.len(), SCROLLBACK_BYTES / 1998);
            assert_eq!(t.scrollback_len(), kept.len());
        }
    }

    #[test]
    fn screens_are_capped_in_cells_and_bounded_in_bytes() {
        assert!(check_cells(250, 1000).is_ok());
        assert!(check_cells(500, 500).is_ok());
        let e = check_cells(1000, 1000).unwrap_err();
        assert!(e.contains("1000000 cells") && e.contains("250000"), "{e}");
        assert!(check_cells(251, 1000).is_err());
        // The largest screen's emulator is bounded by ~20 MB.
        let max = bound(250, 1000);
        assert!((16_000_000..21_000_000).contains(&max), "{max}");
        assert!(bound(24, 80) < 2 << 20);
        // Widening at least doubles a row's allocation; narrowing keeps it.
        assert_eq!(row_capacity(80, 100), 160);
        assert_eq!(row_capacity(80, 500), 500);
        assert_eq!(row_capacity(500, 100), 500);
        assert_eq!(row_capacity(600, 1000), 1200);
    }

    #[test]
    fn the_published_rendering_is_the_cached_one() {
        let mut t = Term::new(3, 10, 0);
        t.process(b"x");
        let a = t.render_shared();
        assert!(Arc::ptr_eq(&a, &t.render_shared()));
        t.process(b"y");
        assert!(!Arc::ptr_eq(&a, &t.render_shared()));
    }
}
