//! The fast path against its specification: a `Term` that feeds every byte
//! to vt100, over generated floods mixed with everything else a program
//! writes, split into chunks at every kind of boundary, compared after every
//! chunk on all a `Term` exposes and on vt100's whole state.

use super::*;

/// xorshift64*: enough randomness for generated terminal output.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }
}

const SGRS: &[&str] = &[
    "\x1b[m",
    "\x1b[0m",
    "\x1b[1m",
    "\x1b[1;31m",
    "\x1b[4m",
    "\x1b[24m",
    "\x1b[7m",
    "\x1b[27m",
    "\x1b[44m",
    "\x1b[41m",
    "\x1b[49m",
    "\x1b[39m",
    "\x1b[48;5;200m",
    "\x1b[38;2;1;2;3m",
    "\x1b[38:5:9m",
    "\x1b[5m",
    "\x1b[38;9m",
    "\x1b[0;1;4;7;3;2m",
    "\x1b[;m",
    "\x1b[00m",
    "\x1b[22;23m",
    "\x1b[97;104m",
];

/// Escape sequences and controls that are not simple lines.
const OTHER: &[&[u8]] = &[
    b"\t",
    b"\n",
    b"\r",
    b"\x08",
    b"\x07",
    b"\x1b[H",
    b"\x1b[5;3H",
    b"\x1b[2J",
    b"\x1b[J",
    b"\x1b[K",
    b"\x1b[1K",
    b"\x1b[A",
    b"\x1b[3B",
    b"\x1b[10C",
    b"\x1b[2D",
    b"\x1b[?25l",
    b"\x1b[?25h",
    b"\x1b[r",
    b"\x1b[2;5r",
    b"\x1b[1;3r",
    b"\x1b[3;1r",
    b"\x1b[0;0r",
    b"\x1b[1;999r",
    b"\x1b[2r",
    b"\x1b[?1049h",
    b"\x1b[?1049l",
    b"\x1b[?47h",
    b"\x1b[?47l",
    b"\x1b[?7l",
    b"\x1b[?7h",
    b"\x1b[4h",
    b"\x1b[4l",
    b"\x1b[?6h",
    b"\x1b[?6l",
    b"\x1bc",
    b"\x1b[3b",
    b"\x1b[3J",
    b"\x1b]0;title\x07",
    b"\x1b]2;t\x1b\\",
    b"\x1bPqabc\x1b\\",
    b"\x1bP1;2q\x9c",
    b"\x1bXsos\x1b\\",
    b"\x1b_apc\x1b\\",
    b"\x1b[1;2\x18",
    b"\x1b[3\x1a",
    b"\x1b7",
    b"\x1b8",
    b"\x1bM",
    b"\x1bD",
    b"\x1bE",
    b"\x1b(B",
    b"\x1b[2S",
    b"\x1b[T",
    b"\x1b[2L",
    b"\x1b[M",
    b"\x1b[3P",
    b"\x1b[2@",
    b"\x1b[4X",
    b"\x1b[?1h",
    b"\x1b[>1r",
    b"\x1b[1 r",
    b"\x1b[1:2;3r",
    b"\x1b[1;2;3;4;5;6;7;8;9;10;11;12;13;14;15;16;17;18;19;20r",
    b"\x1b[5\x7fr",
    b"\x9b",
    "\u{4e16}\u{754c}".as_bytes(),
    "\u{1f600}".as_bytes(),
    "e\u{301}".as_bytes(),
    "\u{a0}".as_bytes(),
    "\u{9b}".as_bytes(),
    "\u{e4}".as_bytes(),
    "\u{3000}x".as_bytes(),
];

fn printable(rng: &mut Rng) -> u8 {
    match rng.below(10) {
        0..=1 => b' ',
        2 => 0x20 + rng.below(95) as u8,
        _ => b'a' + rng.below(26) as u8,
    }
}

/// A simple line (printable ASCII and SGR, ending in `\r\n`).
fn simple_line(rng: &mut Rng, cols: usize, out: &mut Vec<u8>) {
    let len = match rng.below(9) {
        0 => 0,
        1 => rng.range(1, 5),
        2 => cols.saturating_sub(1),
        3 => cols,
        4 => cols + 1,
        5 => 2 * cols,
        6 => rng.range(0, 3 * cols + 3),
        _ => rng.range(1, cols.min(100) + 10),
    };
    let sgr = rng.chance(40);
    for i in 0..len {
        if sgr && rng.chance(15) {
            out.extend_from_slice(rng.pick(SGRS).as_bytes());
        }
        // Trailing blanks now and then.
        out.push(if i + 3 > len && rng.chance(30) {
            b' '
        } else {
            printable(rng)
        });
    }
    if sgr && rng.chance(30) {
        out.extend_from_slice(rng.pick(SGRS).as_bytes());
    }
    out.extend_from_slice(b"\r\n");
}

/// Generated output: floods of simple lines mixed with everything else.
fn generate(rng: &mut Rng, cols: usize, rows: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for _ in 0..rng.range(3, 9) {
        match rng.below(12) {
            0..=6 => {
                let n = match rng.below(4) {
                    0 => rng.range(1, 2 * rows + 3),
                    1 => 2 * rows + rng.range(0, 4),
                    _ => rng.range(2 * rows, 5 * rows + 40),
                };
                for _ in 0..n {
                    simple_line(rng, cols, &mut out);
                    if rng.chance(2) {
                        out.extend_from_slice(OTHER[rng.below(OTHER.len())]);
                    }
                }
            }
            7..=9 => {
                for _ in 0..rng.range(1, 8) {
                    out.extend_from_slice(OTHER[rng.below(OTHER.len())]);
                    if rng.chance(50) {
                        out.push(printable(rng));
                    }
                }
            }
            10 => {
                // A line with a bare `\n`, a `\r` or a tab inside.
                simple_line(rng, cols, &mut out);
                let at = out.len() - 2 - rng.below(3).min(out.len() - 2);
                let b = [b'\n', b'\r', b'\t', 0x7f, 0x1b][rng.below(5)];
                out.insert(at, b);
            }
            _ => {
                // Bytes of any kind.
                for _ in 0..rng.range(1, 30) {
                    out.push(rng.below(256) as u8);
                }
            }
        }
    }
    out
}

/// Chunk lengths: single bytes, small, large, the whole input.
fn chunks(rng: &mut Rng, len: usize) -> Vec<usize> {
    let mut v = Vec::new();
    let mut left = len;
    // Byte-sized chunks for short inputs only (the test's time).
    let style = match rng.below(4) {
        1 if len > 20_000 => 2,
        s => s,
    };
    while left > 0 {
        let n = match style {
            0 => left,
            1 => rng.range(1, 8),
            2 => rng.range(1, 600),
            _ => {
                if rng.chance(20) {
                    rng.range(1, 3)
                } else {
                    rng.range(100, 9000)
                }
            }
        }
        .min(left);
        v.push(n);
        left -= n;
    }
    v
}

/// What a `Term` exposes without reading the screen (which would make
/// vt100 draw what a run left undrawn).
fn assert_same_unread(fast: &Term, slow: &Term, what: &str) {
    assert_eq!(fast.size(), slow.size(), "{what}: size");
    assert_eq!(fast.generation(), slow.generation(), "{what}: generation");
    assert_eq!(
        fast.scrollback_len(),
        slow.scrollback_len(),
        "{what}: scrollback length"
    );
    assert_eq!(
        fast.scrollback(3),
        slow.scrollback(3),
        "{what}: newest scrollback"
    );
    assert_eq!(
        fast.approx_bytes(),
        slow.approx_bytes(),
        "{what}: approx_bytes"
    );
}

fn assert_same(fast: &mut Term, slow: &mut Term, deep: bool, what: &str) {
    assert_same_unread(fast, slow, what);
    assert_eq!(fast.render(), slow.render(), "{what}: screen");
    if deep {
        assert_eq!(
            fast.scrollback(usize::MAX),
            slow.scrollback(usize::MAX),
            "{what}: scrollback"
        );
        let (a, b) = (fast.parser.screen(), slow.parser.screen());
        let (rows, cols) = fast.size();
        if rows as usize * cols as usize <= 2400 {
            // vt100's whole state: every cell and row flag, cursor, saved
            // cursor, pen, modes, scroll regions, the unbounded scrollback
            // count, the last character printed.
            assert_eq!(format!("{a:?}"), format!("{b:?}"), "{what}: vt100 state");
        } else {
            // The same through the public API (cheaper on big screens).
            assert_eq!(
                a.contents_formatted(),
                b.contents_formatted(),
                "{what}: formatted"
            );
            assert_eq!(
                a.attributes_formatted(),
                b.attributes_formatted(),
                "{what}: pen"
            );
            assert_eq!(
                a.input_mode_formatted(),
                b.input_mode_formatted(),
                "{what}: modes"
            );
            for r in 0..rows {
                assert_eq!(
                    a.row_wrapped(r),
                    b.row_wrapped(r),
                    "{what}: row {r} wrapped"
                );
            }
        }
    }
}

fn case(seed: u64) -> (u64, u64, u64) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let sizes = [
        (1, 1),
        (1, 7),
        (2, 1),
        (3, 5),
        (24, 80),
        (60, 200),
        (10, 40),
    ];
    let (rows, cols) = if rng.chance(50) {
        sizes[rng.below(sizes.len())]
    } else {
        (rng.range(1, 60), rng.range(1, 200))
    };
    let cap = [0, 1, 3, 17, 1000][rng.below(5)];
    let mut fast = Term::with_fast_path(rows as u16, cols as u16, cap);
    let mut slow = Term::without_fast_path(rows as u16, cols as u16, cap);
    let input = generate(&mut rng, cols, rows);
    let runs = |t: &Term| t.fast.as_ref().map_or(0, |f| f.runs);
    let mut at = 0;
    for (i, n) in chunks(&mut rng, input.len()).into_iter().enumerate() {
        let chunk = &input[at..at + n];
        at += n;
        let before = runs(&fast);
        fast.process(chunk);
        slow.process(chunk);
        let what = format!(
            "seed {seed}, {rows}x{cols}, scrollback {cap}, chunk {i} at {}",
            at - n
        );
        // The screen after a third of the chunks (reading it makes vt100
        // draw what a run left undrawn; unread, that carries over to the
        // next chunk), with all of vt100's state after those that took the
        // fast path.
        if rng.chance(33) {
            let deep = runs(&fast) != before || i % 32 == 0;
            assert_same(&mut fast, &mut slow, deep, &what);
        } else {
            assert_same_unread(&fast, &slow, &what);
        }
        if rng.chance(3) {
            let (r, c) = match rng.below(3) {
                0 => (rows as u16, cols as u16),
                1 => (rng.range(1, 60) as u16, rng.range(1, 200) as u16),
                _ => (fast.size().0 + rng.range(1, 30) as u16, fast.size().1),
            };
            fast.set_size(r, c);
            slow.set_size(r, c);
            assert_same(
                &mut fast,
                &mut slow,
                true,
                &format!("{what}, resized to {r}x{c}"),
            );
        }
        if rng.chance(10) {
            let n = rng.below(50);
            let (a, b) = (fast.read(Some(n)), slow.read(Some(n)));
            assert_eq!(a.changed, b.changed, "{what}: changed");
            assert_eq!(a.scrollback, b.scrollback, "{what}: read scrollback");
        }
    }
    // Growing the screen pulls rows down by vt100's unbounded count.
    let (r, c) = fast.size();
    fast.set_size(r.saturating_add(700), c);
    slow.set_size(r.saturating_add(700), c);
    assert_same(
        &mut fast,
        &mut slow,
        true,
        &format!("seed {seed}: grown at the end"),
    );
    let carried = fast.fast.as_ref().map_or(0, |f| f.carried);
    (runs(&fast), carried, input.len() as u64)
}

const CASES: u64 = 400;

#[test]
fn fast_path_matches_vt100_fed_every_byte() {
    let (mut runs, mut carried, mut bytes, mut cases_with_runs) = (0, 0, 0, 0);
    for seed in 0..CASES {
        let (r, c, b) = case(seed);
        runs += r;
        carried += c;
        bytes += b;
        cases_with_runs += u64::from(r > 0);
    }
    eprintln!("{CASES} cases, {bytes} bytes, {runs} fast runs in {cases_with_runs} cases, {carried} chunks after undrawn input");
    // The comparison proves something only if the fast path ran.
    assert!(runs > CASES, "{runs} runs over {bytes} bytes");
    assert!(carried > CASES / 10, "{carried} chunks after undrawn input");
    assert!(
        cases_with_runs > CASES / 3,
        "{cases_with_runs} cases took the fast path"
    );
}

/// Floods in PTY-sized reads: runs that leave rows undrawn for the next
/// chunk, which continues them or does something else.
#[test]
fn floods_in_pty_sized_chunks_match() {
    let (mut runs, mut carried) = (0, 0);
    for seed in 0..400u64 {
        let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1);
        let (rows, cols) = if rng.chance(50) {
            (24, 80)
        } else {
            (rng.range(1, 40), rng.range(1, 160))
        };
        let cap = [0, 5, 1000][rng.below(3)];
        let mut fast = Term::with_fast_path(rows as u16, cols as u16, cap);
        let mut slow = Term::without_fast_path(rows as u16, cols as u16, cap);
        let mut input = Vec::new();
        let long = rng.chance(30);
        for _ in 0..rng.range(50, 1500) {
            if long {
                simple_line(&mut rng, cols, &mut input);
            } else {
                // Lines that mostly fit a row, as in logs.
                let n = rng.range(0, cols.saturating_sub(1));
                for _ in 0..n {
                    if rng.chance(5) {
                        input.extend_from_slice(rng.pick(SGRS).as_bytes());
                    }
                    input.push(printable(&mut rng));
                }
                input.extend_from_slice(b"\r\n");
            }
            if rng.chance(1) {
                input.extend_from_slice(OTHER[rng.below(OTHER.len())]);
            }
        }
        let mut at = 0;
        let mut i = 0;
        while at < input.len() {
            let n = rng.range(1, 4095).min(input.len() - at);
            fast.process(&input[at..at + n]);
            slow.process(&input[at..at + n]);
            let what = format!("seed {seed}, {rows}x{cols}, scrollback {cap}, chunk {i} at {at}");
            if rng.chance(10) {
                assert_same(&mut fast, &mut slow, true, &what);
            } else {
                assert_same_unread(&fast, &slow, &what);
            }
            if rng.chance(1) {
                let (r, c) = (rng.range(1, 40) as u16, rng.range(1, 160) as u16);
                fast.set_size(r, c);
                slow.set_size(r, c);
            }
            at += n;
            i += 1;
        }
        assert_same(&mut fast, &mut slow, true, &format!("seed {seed}: end"));
        let f = fast
            .fast
            .as_ref()
            .map(|f| (f.runs, f.carried))
            .unwrap_or_default();
        runs += f.0;
        carried += f.1;
    }
    eprintln!("{runs} fast runs, {carried} chunks after undrawn input");
    assert!(
        runs > 1500 && carried > 700,
        "{runs} runs, {carried} carried"
    );
}

#[test]
fn floods_take_the_fast_path() {
    for sgr in [false, true] {
        let mut fast = Term::with_fast_path(24, 80, SCROLLBACK_LINES);
        let mut slow = Term::without_fast_path(24, 80, SCROLLBACK_LINES);
        let mut data = Vec::new();
        for i in 0..20_000u32 {
            if sgr {
                data.extend_from_slice(
                    format!(
                        "\x1b[1;3{}m{i:08}\x1b[m some \x1b[4mstyled\x1b[24m text\r\n",
                        i % 8
                    )
                    .as_bytes(),
                );
            } else {
                data.extend_from_slice(
                    format!("{i:08} flood-line flood-line flood-line\r\n").as_bytes(),
                );
            }
        }
        // PTY reads come in pieces of up to 4095 bytes.
        for c in data.chunks(4095) {
            fast.process(c);
            slow.process(c);
            assert_same_unread(&fast, &slow, "flood");
        }
        assert_same(
            &mut fast,
            &mut slow,
            true,
            if sgr { "sgr" } else { "plain" },
        );
        let runs = fast.fast.as_ref().map_or(0, |f| f.runs);
        assert!(runs as usize >= data.len() / 4095, "{runs} runs");
        assert_eq!(
            fast.render().rows[22],
            if sgr {
                "00019999 some styled text"
            } else {
                "00019999 flood-line flood-line flood-line"
            }
        );
    }
}

#[test]
fn scroll_region_on_the_alternate_screen_leaves_the_main_one_alone() {
    // A region set on the main screen, reset on the alternate one: the main
    // screen still scrolls only its region, so no fast path there.
    let mut fast = Term::with_fast_path(5, 10, 100);
    let mut slow = Term::without_fast_path(5, 10, 100);
    let mut data = b"\x1b[2;4r\x1b[?1049h\x1b[r\x1b[?1049l\x1b[5;1H".to_vec();
    for i in 0..200 {
        data.extend_from_slice(format!("l{i}\r\n").as_bytes());
    }
    fast.process(&data);
    slow.process(&data);
    assert_same(&mut fast, &mut slow, true, "region");
    assert_eq!(fast.fast.as_ref().map_or(0, |f| f.runs), 0);
    // RIS clears the region: floods are fast again.
    let mut data = b"\x1bc\x1b[5;1H".to_vec();
    for i in 0..200 {
        data.extend_from_slice(format!("m{i}\r\n").as_bytes());
    }
    fast.process(&data);
    slow.process(&data);
    assert_same(&mut fast, &mut slow, true, "after RIS");
    assert_eq!(fast.fast.as_ref().map_or(0, |f| f.runs), 1);
}

#[test]
fn the_scanner_splits_nothing_it_cannot_see_whole() {
    // A DECSTBM split across chunks at every byte.
    let seq = b"\x1b[2;4r";
    for cut in 0..=seq.len() {
        let mut fast = Term::with_fast_path(5, 10, 10);
        let mut slow = Term::without_fast_path(5, 10, 10);
        for t in [&mut fast, &mut slow] {
            t.process(&seq[..cut]);
            t.process(&seq[cut..]);
            t.process(b"\x1b[5;1H");
            for i in 0..40 {
                t.process(format!("x{i}\r\n").as_bytes());
            }
        }
        assert_same(&mut fast, &mut slow, true, &format!("cut {cut}"));
    }
}
