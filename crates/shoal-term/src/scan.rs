//! A mirror of vte 0.15's parser states over every byte fed to vt100, for
//! the fast path (`fast.rs`): where vte is in its ground state at a line
//! start (a run may start there), and the sequences that change what vt100
//! does not expose but a run depends on: DECSTBM (the scroll region) and
//! RIS.

/// vte's parser states (vte 0.15), with the CSI parameters DECSTBM needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum St {
    Ground,
    Esc,
    EscInt,
    CsiEntry,
    CsiParam,
    CsiInt,
    CsiIgnore,
    DcsEntry,
    DcsParam,
    DcsInt,
    DcsIgnore,
    DcsPass,
    Osc,
    /// SOS, PM and APC strings.
    Str,
}

/// Why [`Scanner::scan`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The input ended.
    End,
    /// A line feed in the ground state: the next byte may start a run.
    LineFeed(usize),
    /// The final byte (at this index, already consumed) of a DECSTBM
    /// (`CSI Pt;Pb r`) that vt100 will dispatch: its two parameters
    /// (`None`: too many parameters to be sure of them).
    ScrollRegion {
        at: usize,
        params: Option<(u16, u16)>,
    },
    /// RIS (`ESC c`) was consumed (the index after it): vt100 builds a
    /// fresh screen.
    Reset(usize),
}

/// Parameters counted in a CSI before DECSTBM's are no longer trusted
/// (vte keeps 32).
const MAX_TRUSTED_PARAMS: u16 = 16;

/// A mirror of vte's state machine, carried across chunks.
pub(crate) struct Scanner {
    st: St,
    /// The CSI collected an intermediate or private marker.
    inter: bool,
    /// Parameter group, subparameter within it, value being read.
    group: u16,
    sub: u16,
    val: u16,
    /// First subparameter of the first two groups.
    first: [u16; 2],
    /// Subparameters so far.
    count: u16,
    /// The previous byte was a line feed in the ground state, or nothing
    /// was fed yet: vte is in its ground state with no partial UTF-8.
    pub(crate) line_start: bool,
}

impl Scanner {
    pub(crate) fn new() -> Scanner {
        Scanner {
            st: St::Ground,
            inter: false,
            group: 0,
            sub: 0,
            val: 0,
            first: [0; 2],
            count: 0,
            line_start: true,
        }
    }

    /// The state after a run of simple lines (ground, after `\n`).
    pub(crate) fn after_lines(&mut self) {
        self.st = St::Ground;
        self.line_start = true;
    }

    fn csi_start(&mut self) {
        self.inter = false;
        self.group = 0;
        self.sub = 0;
        self.val = 0;
        self.first = [0; 2];
        self.count = 0;
    }

    /// End of a subparameter (`:`, `;` or the final byte).
    fn end_sub(&mut self) {
        if self.sub == 0 && (self.group as usize) < self.first.len() {
            self.first[self.group as usize] = self.val;
        }
        self.count = self.count.saturating_add(1);
        self.val = 0;
    }

    fn digit(&mut self, b: u8) {
        self.val = self
            .val
            .saturating_mul(10)
            .saturating_add((b - b'0') as u16);
    }

    /// CAN, SUB and ESC leave any state (vte's "anywhere").
    fn anywhere(&mut self, b: u8) {
        match b {
            0x18 | 0x1a => self.st = St::Ground,
            0x1b => self.st = St::Esc,
            _ => {}
        }
    }

    /// A CSI final byte that vte dispatches.
    fn csi_final(&mut self, b: u8, at: usize) -> Option<Stop> {
        self.st = St::Ground;
        if b != b'r' || self.inter {
            return None;
        }
        self.end_sub();
        let params = (self.count <= MAX_TRUSTED_PARAMS).then_some((self.first[0], self.first[1]));
        Some(Stop::ScrollRegion { at, params })
    }

    /// Advance over `bytes[from..]` until the input ends or something the
    /// caller must act on.
    pub(crate) fn scan(&mut self, bytes: &[u8], from: usize) -> Stop {
        let mut i = from;
        while i < bytes.len() {
            if self.st == St::Ground {
                // Only ESC leaves the ground state; only `\n` matters in it.
                match memchr::memchr2(0x1b, b'\n', &bytes[i..]) {
                    None => {
                        self.line_start = false;
                        return Stop::End;
                    }
                    Some(k) => {
                        let at = i + k;
                        if bytes[at] == b'\n' {
                            self.line_start = true;
                            return Stop::LineFeed(at + 1);
                        }
                        self.line_start = false;
                        self.st = St::Esc;
                        i = at + 1;
                        continue;
                    }
                }
            }
            let b = bytes[i];
            let at = i;
            i += 1;
            match self.st {
                St::Ground => unreachable!("handled above"),
                St::Esc => match b {
                    0x20..=0x2f => self.st = St::EscInt,
                    b'P' => self.st = St::DcsEntry,
                    b'X' | b'^' | b'_' => self.st = St::Str,
                    b'[' => {
                        self.csi_start();
                        self.st = St::CsiEntry;
                    }
                    b']' => self.st = St::Osc,
                    b'c' => {
                        self.st = St::Ground;
                        return Stop::Reset(i);
                    }
                    0x30..=0x7e => self.st = St::Ground,
                    0x18 | 0x1a => self.st = St::Ground,
                    _ => {}
                },
                St::EscInt => match b {
                    0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x20..=0x2f | 0x7f => {}
                    0x30..=0x7e => self.st = St::Ground,
                    _ => self.anywhere(b),
                },
                St::CsiEntry | St::CsiParam => match b {
                    0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x7f => {}
                    0x20..=0x2f => {
                        self.inter = true;
                        self.st = St::CsiInt;
                    }
                    b'0'..=b'9' => {
                        self.digit(b);
                        self.st = St::CsiParam;
                    }
                    b':' => {
                        self.end_sub();
                        self.sub = self.sub.saturating_add(1);
                        self.st = St::CsiParam;
                    }
                    b';' => {
                        self.end_sub();
                        self.group = self.group.saturating_add(1);
                        self.sub = 0;
                        self.st = St::CsiParam;
                    }
                    0x3c..=0x3f => {
                        if self.st == St::CsiEntry {
                            self.inter = true;
                            self.st = St::CsiParam;
                        } else {
                            self.st = St::CsiIgnore;
                        }
                    }
                    0x40..=0x7e => {
                        if let Some(stop) = self.csi_final(b, at) {
                            return stop;
                        }
                    }
                    _ => self.anywhere(b),
                },
                St::CsiInt => match b {
                    0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x20..=0x2f | 0x7f => {}
                    0x30..=0x3f => self.st = St::CsiIgnore,
                    0x40..=0x7e => {
                        if let Some(stop) = self.csi_final(b, at) {
                            return stop;
                        }
                    }
                    _ => self.anywhere(b),
                },
                St::CsiIgnore => match b {
                    0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x20..=0x3f | 0x7f => {}
                    0x40..=0x7e => self.st = St::Ground,
                    _ => self.anywhere(b),
                },
                St::DcsEntry | St::DcsParam => match b {
                    0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x7f => {}
                    0x20..=0x2f => self.st = St::DcsInt,
                    0x30..=0x3b => self.st = St::DcsParam,
                    0x3c..=0x3f => {
                        self.st = if self.st == St::DcsEntry {
                            St::DcsParam
                        } else {
                            St::DcsIgnore
                        }
                    }
                    0x40..=0x7e => self.st = St::DcsPass,
                    _ => self.anywhere(b),
                },
                St::DcsInt => match b {
                    0x00..=0x17 | 0x19 | 0x1c..=0x1f | 0x20..=0x2f | 0x7f => {}
                    0x30..=0x3f => self.st = St::DcsIgnore,
                    0x40..=0x7e => self.st = St::DcsPass,
                    _ => self.anywhere(b),
                },
                St::DcsPass => match b {
                    0x9c => self.st = St::Ground,
                    _ => self.anywhere(b),
                },
                St::Osc => match b {
                    0x07 => self.st = St::Ground,
                    _ => self.anywhere(b),
                },
                St::DcsIgnore | St::Str => self.anywhere(b),
            }
        }
        self.line_start = false;
        Stop::End
    }
}
