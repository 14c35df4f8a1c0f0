//! The flood fast path: what `Term::process` does instead of making vt100
//! draw rows that scroll off the screen before anyone can see them.
//!
//! A flood is mostly complete *simple lines* (printable ASCII, SGR
//! sequences, each line ending in `\r\n`) written at the bottom of a
//! full-height scroll region. For a run of such lines making `T` screen rows
//! (autowrap: `max(1, ceil(len / cols))` per line) on a screen of `R` rows,
//! with the cursor at the start of a blank bottom row on the main screen and
//! `T >= 2(R-1) + 1`, the outcome of feeding every byte to vt100 is known
//! without drawing most of them:
//!
//! - the `R-1` rows above the cursor scroll off first, as they are: their
//!   plain text (vt100's `rows()`, trimmed: the same text the capture in
//!   `on_scroll` makes of a row) goes to the scrollback;
//! - rows `0..T-(R-1)` of the run scroll off next: their plain text goes
//!   straight into the scrollback (only the newest `cap` are built);
//! - vt100 then makes the run's `T` scrolls without history (`Scrolled::skip`
//!   drops them): scroll-ups (`CSI n S`) of the screen, which bring its count
//!   of rows an unbounded scrollback would hold (a resize that grows the
//!   screen pulls that many rows down) to what the run would have made;
//! - the last `R-1` rows end on the screen above a blank bottom row: vt100
//!   draws those from the run's own bytes (from the row boundary, possibly
//!   mid-line), after the SGR sequences before that boundary from the last
//!   full reset on, so the pen is what it would have been;
//! - when those rows print nothing, the run's last printed character is
//!   printed on a row that scrolls off (vt100 remembers it for `CSI b`).
//!
//! Those last rows are not drawn at once when the input after the run is
//! the start of a simple line that fits the bottom row (a PTY read ends
//! mid-line): they wait, with that start, in `Fast::pending`, vt100 standing
//! on its blank screen with `R-1` scrolls still to drop. The next chunk is
//! scanned after them, so a flood in 4 KiB reads is one long run; reading
//! the screen, resizing, or input that is not simple lines first feeds them
//! (`Fast::materialize`). The scrollback is complete meanwhile: nothing
//! pending has scrolled anything off.
//!
//! Whether a run may start is decided from vt100's public state (main
//! screen, cursor, bottom row cells) plus what vt100 does not expose: the
//! main screen's scroll region, tracked by `scan::Scanner`, a mirror of vte's
//! parser states over every byte fed (split across chunks). vt100 0.18 has
//! no autowrap-off or insert mode (`CSI ?7 l`, `CSI 4 h` are no-ops in it),
//! and origin mode only moves cursor addressing, so neither changes what a
//! simple line does. `diff_tests.rs` holds the result equal to vt100 fed
//! every byte.

use crate::scan::Stop;

/// One simple line of a run: where it starts, its printable characters, and
/// where its last full SGR reset (`ESC[m` / `ESC[0m`) starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Line {
    pub(crate) start: u32,
    /// Printable characters; the top bit says the line holds SGR sequences.
    vis: u32,
    /// `u32::MAX`: no full reset in the line.
    reset: u32,
}

const SGR_BIT: u32 = 1 << 31;

impl Line {
    pub(crate) fn vis(&self) -> usize {
        (self.vis & !SGR_BIT) as usize
    }
    pub(crate) fn has_sgr(&self) -> bool {
        self.vis & SGR_BIT != 0
    }
    pub(crate) fn reset(&self) -> Option<usize> {
        (self.reset != u32::MAX).then_some(self.reset as usize)
    }
    /// Screen rows the line takes (autowrap at `cols`).
    pub(crate) fn rows(&self, cols: usize) -> usize {
        self.vis().div_ceil(cols).max(1)
    }
}

/// One simple line starting at `at`: its record and the index after its
/// `\n`; `None` when the bytes there are anything else or end first.
/// `bytes` must be shorter than `2^31`.
fn parse_line(bytes: &[u8], at: usize) -> Option<(Line, usize)> {
    let mut i = at;
    let mut vis = 0u32;
    let mut sgr = false;
    let mut reset = u32::MAX;
    loop {
        let run = bytes[i..].iter().position(|b| !(0x20..=0x7e).contains(b))?;
        vis += run as u32;
        i += run;
        match bytes[i] {
            0x1b => {
                if bytes.get(i + 1) != Some(&b'[') {
                    return None;
                }
                let p = i + 2;
                let n = bytes
                    .get(p..)?
                    .iter()
                    .position(|b| !(b'0'..=b';').contains(b))?;
                if bytes[p + n] != b'm' {
                    return None;
                }
                if matches!(&bytes[p..p + n], b"" | b"0") {
                    reset = i as u32;
                }
                sgr = true;
                i = p + n + 1;
            }
            b'\r' => {
                if bytes.get(i + 1) != Some(&b'\n') {
                    return None;
                }
                let line = Line {
                    start: at as u32,
                    vis: vis | if sgr { SGR_BIT } else { 0 },
                    reset,
                };
                return Some((line, i + 2));
            }
            _ => return None,
        }
    }
}

/// Simple lines from `at`, at most `max` of them, into `out` (cleared).
/// Returns the index after the last one and whether `max` stopped it.
pub(crate) fn parse_lines(
    bytes: &[u8],
    at: usize,
    max: usize,
    out: &mut Vec<Line>,
) -> (usize, bool) {
    out.clear();
    let mut i = at;
    while out.len() < max {
        match parse_line(bytes, i) {
            Some((line, next)) => {
                out.push(line);
                i = next;
            }
            None => return (i, false),
        }
    }
    (i, true)
}

/// The printable bytes of a simple line (SGR sequences left out), appended
/// to `out`.
pub(crate) fn visible(bytes: &[u8], line: &Line, out: &mut Vec<u8>) {
    let mut i = line.start as usize;
    loop {
        match bytes[i] {
            b'\r' => return,
            0x1b => {
                while bytes[i] != b'm' {
                    i += 1;
                }
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
}

/// The index of printable character `n` (0-based) of a simple line.
pub(crate) fn char_index(bytes: &[u8], line: &Line, n: usize) -> usize {
    let mut i = line.start as usize;
    let mut seen = 0;
    loop {
        match bytes[i] {
            0x1b => {
                while bytes[i] != b'm' {
                    i += 1;
                }
                i += 1;
            }
            _ => {
                if seen == n {
                    return i;
                }
                seen += 1;
                i += 1;
            }
        }
    }
}

/// The SGR sequences of a simple line within `from..to`, in order, as
/// index ranges.
pub(crate) fn sgrs(
    bytes: &[u8],
    line: &Line,
    from: usize,
    to: usize,
    mut each: impl FnMut(usize, usize),
) {
    let mut i = (line.start as usize).max(from);
    while i < to {
        match memchr::memchr2(0x1b, b'\r', &bytes[i..to]) {
            Some(k) if bytes[i + k] == 0x1b => {
                let s = i + k;
                let mut e = s;
                while bytes[e] != b'm' {
                    e += 1;
                }
                each(s, e + 1);
                i = e + 1;
            }
            _ => return,
        }
    }
}

/// The last printable character of a simple line, if any.
pub(crate) fn last_char(bytes: &[u8], line: &Line) -> Option<u8> {
    if line.vis() == 0 {
        return None;
    }
    Some(bytes[char_index(bytes, line, line.vis() - 1)])
}

/// Does DECSTBM with these parameters leave the whole screen as the scroll
/// region (as vt100 0.18 canonicalises and applies them)?
fn region_is_full(top: u16, bottom: u16, rows: u16) -> bool {
    let top = top.max(1) - 1;
    let bottom = if bottom == 0 { rows } else { bottom };
    let bottom = (bottom - 1).min(rows - 1);
    top >= bottom || (top == 0 && bottom == rows - 1)
}

type Parser = vt100::Parser<crate::Scrolled>;

fn size(parser: &Parser) -> (usize, usize) {
    let (r, c) = parser.screen().size();
    (r.get() as usize, c.get() as usize)
}

impl crate::Fast {
    /// Feed `bytes` (shorter than 2^30) to vt100, taking the fast path for
    /// every run of simple lines where it is exact.
    pub(crate) fn process(&mut self, parser: &mut Parser, bytes: &[u8]) {
        let n = bytes.len();
        let (mut pos, mut fed) = (0, 0);
        let mut may_try = self.scan.line_start;
        loop {
            if may_try {
                let (end, capped) = parse_lines(bytes, pos, crate::MAX_RUN_LINES, &mut self.lines);
                if !self.lines.is_empty() {
                    if self.region_full {
                        parser.process(&bytes[fed..pos]);
                        fed = self.try_run(parser, bytes, end);
                    }
                    pos = end;
                    self.scan.after_lines();
                    if !self.pending.is_empty() {
                        // The run's visible rows and the rest of the input
                        // wait for the next chunk (or a read).
                        return;
                    }
                    // A run cut by the line cap goes on at once.
                    may_try = capped;
                    continue;
                }
            }
            may_try = false;
            if pos >= n {
                break;
            }
            match self.scan.scan(bytes, pos) {
                Stop::End => break,
                Stop::LineFeed(next) => {
                    pos = next;
                    may_try = true;
                }
                Stop::ScrollRegion { at, params } => {
                    // It applies to the screen vt100 is on when it gets there.
                    parser.process(&bytes[fed..at]);
                    fed = at;
                    if !parser.screen().alternate_screen() {
                        let (rows, _) = parser.screen().size();
                        self.region_full =
                            params.is_some_and(|(t, b)| region_is_full(t, b, rows.get()));
                    }
                    pos = at + 1;
                }
                Stop::Reset(next) => {
                    self.region_full = true;
                    pos = next;
                }
            }
        }
        parser.process(&bytes[fed..]);
        // A very long styled line grew the text buffer: do not keep it.
        if self.text.capacity() > 1 << 16 {
            self.text = Vec::new();
        }
    }

    /// The run in `self.lines` (ending at `end`), vt100 having been fed up
    /// to its start: feed its lines one by one until the fast path's
    /// conditions hold and enough rows remain, then take it. Returns how far
    /// vt100 has been fed.
    fn try_run(&mut self, parser: &mut Parser, bytes: &[u8], end: usize) -> usize {
        let (rows, cols) = size(parser);
        let need = rows - 1;
        // At least one scroll of a blank screen beyond the rows drawn.
        let threshold = 2 * need + 1;
        let mut t: usize = self.lines.iter().map(|l| l.rows(cols)).sum();
        let mut fed = self.lines[0].start as usize;
        if parser.screen().alternate_screen() {
            return fed;
        }
        for first in 0..self.lines.len() {
            if t < threshold {
                break;
            }
            if self.ready(parser, rows, cols) {
                self.run(parser, bytes, first, end, t);
                self.runs += 1;
                return if self.pending.is_empty() {
                    end
                } else {
                    bytes.len()
                };
            }
            let next = self.lines.get(first + 1).map_or(end, |l| l.start as usize);
            parser.process(&bytes[fed..next]);
            fed = next;
            t -= self.lines[first].rows(cols);
        }
        fed
    }

    /// Cursor at the start of the bottom row, and that row blank.
    fn ready(&self, parser: &Parser, rows: usize, cols: usize) -> bool {
        let s = parser.screen();
        let bottom = (rows - 1) as u16;
        s.cursor_position() == (bottom, 0)
            && (0..cols as u16).all(|c| s.cell(bottom, c) == Some(&self.blank))
    }

    /// Take the fast path for `self.lines[first..]`, `t` rows ending at
    /// `end`.
    fn run(&mut self, parser: &mut Parser, bytes: &[u8], first: usize, end: usize, t: usize) {
        let (rows, cols) = size(parser);
        let need = rows - 1;
        let lines = &self.lines[first..];
        let (cb_cap, pushed) = (parser.callbacks().cap, t - need);
        // Rows above the cursor that are already blank rows to drop: the
        // screen of a deferred run (see `materialize`).
        let dropped = parser.callbacks().skip.min(need);
        // The rows above the cursor scroll off first, as they are: their
        // plain text is what the capture in `on_scroll` makes of them
        // (vt100's plain rendering of a row, trimmed, is the same text as
        // its basic formatted one with the SGR sequences dropped).
        if cb_cap > 0 {
            let old: Vec<String> = parser
                .screen()
                .rows(0, cols as u16)
                .take(need)
                .skip(dropped)
                .collect();
            let cb = parser.callbacks_mut();
            for mut row in old {
                row.truncate(row.trim_end().len());
                cb.push(row.into_boxed_str());
            }
        }
        // The run's rows up to the last `need` follow them.
        push_rows(
            parser.callbacks_mut(),
            bytes,
            lines,
            pushed,
            cols,
            &mut self.text,
        );
        // What vt100 does from here makes the run's `t` scrolls, none of
        // them history: scroll-ups (`CSI n S`) clear the screen, bringing
        // vt100's count of rows an unbounded scrollback would hold (a resize
        // that grows the screen pulls that many down) to what the run would
        // have made, then the `need` rows drawn scroll off the last blanks.
        parser.callbacks_mut().skip = t;
        let (bl, bpos) = boundary(bytes, lines, need, cols, end);
        let mut scrolls = pushed;
        let draws_a_char = bpos < end
            && (bpos > lines[bl].start as usize || lines[bl..].iter().any(|l| l.vis() > 0));
        if !draws_a_char {
            // vt100 remembers the last character printed (`CSI b`): print
            // it on the bottom row, which then scrolls off.
            if let Some(ch) = lines[..bl].iter().rev().find_map(|l| last_char(bytes, l)) {
                parser.process(&[ch, b'\r', b'\n']);
                scrolls -= 1;
            }
        }
        self.text.clear();
        while scrolls > 0 {
            let k = scrolls.min(rows);
            self.text.extend_from_slice(b"\x1b[");
            self.text.extend_from_slice(k.to_string().as_bytes());
            self.text.push(b'S');
            scrolls -= k;
            if self.text.len() >= 4096 || scrolls == 0 {
                parser.process(&self.text);
                self.text.clear();
            }
        }
        // The pen at the boundary: the SGR sequences before it, from the
        // last full reset on.
        let (last_line, reset) = match lines.get(bl) {
            Some(l) => {
                let mut r = None;
                sgrs(bytes, l, 0, bpos, |s, e| {
                    if matches!(&bytes[s + 2..e - 1], b"" | b"0") {
                        r = Some(s);
                    }
                });
                (bl, r)
            }
            None => (lines.len() - 1, None),
        };
        let from = reset
            .or_else(|| {
                lines[..bl.min(lines.len())]
                    .iter()
                    .rev()
                    .find_map(|l| l.reset())
            })
            .unwrap_or(lines[0].start as usize);
        let k0 = lines
            .partition_point(|l| l.start as usize <= from)
            .saturating_sub(1);
        for l in &lines[k0..=last_line] {
            if l.has_sgr() {
                sgrs(bytes, l, from, bpos, |s, e| parser.process(&bytes[s..e]));
            }
        }
        // The rows that stay on the screen, drawn by vt100, or kept with
        // the rest of the input when that is the start of a simple line
        // (the next chunk likely continues the flood, and then vt100 never
        // draws them): the scrollback is then already what it would be.
        // Only a tail that fits on the bottom row: one that wrapped would
        // have scrolled rows into the scrollback already.
        let tail_fits = line_prefix(&bytes[end..]).is_some_and(|vis| vis <= cols);
        if bytes.len() - bpos <= MAX_PENDING && tail_fits {
            self.pending.extend_from_slice(&bytes[bpos..]);
            return;
        }
        parser.process(&bytes[bpos..end]);
        debug_assert_eq!(parser.callbacks().skip, 0);
        parser.callbacks_mut().skip = 0;
    }

    /// Feed vt100 the input a run left undrawn (before anything reads the
    /// screen or resizes it, or input that is not simple lines). vt100 then
    /// draws the rows it left on its blank screen, their scrolls dropping
    /// the blank rows still to drop.
    pub(crate) fn materialize(&mut self, parser: &mut Parser) {
        if self.pending.is_empty() {
            return;
        }
        let p = std::mem::take(&mut self.pending);
        parser.process(&p);
        debug_assert_eq!(parser.callbacks().skip, 0);
        parser.callbacks_mut().skip = 0;
        // The scan resumes after those bytes (simple line content).
        let mut i = 0;
        while i < p.len() {
            i = match self.scan.scan(&p, i) {
                Stop::End => p.len(),
                Stop::LineFeed(next) | Stop::Reset(next) => next,
                Stop::ScrollRegion { at, .. } => at + 1,
            };
        }
        self.pending = p;
        self.pending.clear();
    }

    /// Feed input, after what a run left undrawn.
    pub(crate) fn feed(&mut self, parser: &mut Parser, bytes: &[u8]) {
        if self.pending.is_empty() {
            for piece in bytes.chunks(crate::MAX_PIECE) {
                self.process(parser, piece);
            }
            return;
        }
        if bytes.len() > crate::MAX_PIECE {
            self.materialize(parser);
            return self.feed(parser, bytes);
        }
        // vt100 stands where the undrawn input starts: go on from there.
        self.carried += 1;
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend_from_slice(&self.pending);
        buf.extend_from_slice(bytes);
        self.pending.clear();
        self.process(parser, &buf);
        if buf.capacity() > 1 << 17 {
            buf = Vec::new();
        }
        self.buf = buf;
    }
}

/// Input a run leaves undrawn at most.
const MAX_PENDING: usize = 16 << 10;

/// If these bytes are the start of a simple line (printable ASCII and
/// complete SGR sequences, possibly ending inside an SGR sequence or with
/// its `\r`), its printable characters so far.
fn line_prefix(bytes: &[u8]) -> Option<usize> {
    let (mut i, mut vis) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            0x20..=0x7e => {
                vis += 1;
                i += 1;
            }
            b'\r' if i + 1 == bytes.len() => return Some(vis),
            0x1b => {
                match bytes.get(i + 1) {
                    None => return Some(vis),
                    Some(b'[') => {}
                    Some(_) => return None,
                }
                let p = i + 2;
                match bytes[p..].iter().position(|b| !(b'0'..=b';').contains(b)) {
                    None => return Some(vis),
                    Some(k) if bytes[p + k] == b'm' => i = p + k + 1,
                    Some(_) => return None,
                }
            }
            _ => return None,
        }
    }
    Some(vis)
}

/// Where the last `need` rows of the run start: the line and the byte
/// (a line start, or the printable character that begins a wrapped row).
fn boundary(bytes: &[u8], lines: &[Line], need: usize, cols: usize, end: usize) -> (usize, usize) {
    if need == 0 {
        return (lines.len(), end);
    }
    let mut acc = 0;
    for k in (0..lines.len()).rev() {
        let r = lines[k].rows(cols);
        if acc + r == need {
            return (k, lines[k].start as usize);
        }
        if acc + r > need {
            let skip_rows = r - (need - acc);
            return (k, char_index(bytes, &lines[k], skip_rows * cols));
        }
        acc += r;
    }
    // The caller's run has more rows than `need`.
    (0, lines[0].start as usize)
}

/// The plain text of the run's rows `0..pushed` into the scrollback (only
/// the newest `cap` of them are built).
fn push_rows(
    cb: &mut crate::Scrolled,
    bytes: &[u8],
    lines: &[Line],
    pushed: usize,
    cols: usize,
    text: &mut Vec<u8>,
) {
    if cb.cap == 0 || pushed == 0 {
        return;
    }
    let from = pushed - pushed.min(cb.cap);
    let mut r0 = 0;
    for l in lines {
        if r0 >= pushed {
            break;
        }
        let r = l.rows(cols);
        if r0 + r > from {
            let start = l.start as usize;
            let vis: &[u8] = if l.has_sgr() {
                text.clear();
                visible(bytes, l, text);
                text
            } else {
                &bytes[start..start + l.vis()]
            };
            for row in from.max(r0)..pushed.min(r0 + r) {
                let j = row - r0;
                let seg = &vis[(j * cols).min(vis.len())..((j + 1) * cols).min(vis.len())];
                let keep = seg.iter().rposition(|&b| b != b' ').map_or(0, |p| p + 1);
                let line = std::str::from_utf8(&seg[..keep]).unwrap_or_default();
                cb.push(line.into());
            }
        }
        r0 += r;
    }
}
