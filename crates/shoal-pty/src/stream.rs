//! The live screen of a watched PTY (`pty.watch`, docs/protocol.md §8): the
//! escape sequences that repaint a real terminal, colours and modes
//! included, as vt100 makes them.
//!
//! A watcher gets the whole screen once ([`Update::full`]), then the diffs
//! from each published screen to the next (`Screen::state_diff`). Only the
//! PTY's I/O thread touches a [`Stream`]: it is made by the first watch,
//! fed at every publish (so a flood costs one diff per publish, not one per
//! chunk) and dropped at the first publish with nobody watching. While a
//! PTY is watched it keeps one copy of its vt100 screen (the previous one).
//! A watcher that falls more than [`BACKLOG`] updates behind is told so
//! (`Lagged`) and watches again, from a whole screen.

use std::sync::Arc;

use tokio::sync::broadcast;

/// Updates queued for a slow watcher before it must start over.
pub const BACKLOG: usize = 256;

/// One step of the live screen.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Update {
    /// Counts the updates of this stream (a whole screen has the number of
    /// the update it stands for).
    pub seq: u64,
    /// The whole screen (clears first), else a diff from update `seq - 1`.
    pub full: bool,
    /// The bytes to write to a terminal showing the previous state.
    pub ansi: String,
    pub rows: u16,
    pub cols: u16,
}

/// What a new watcher gets: the screen now and the updates after it.
pub type Watching = (Update, broadcast::Receiver<Arc<Update>>);

/// The stream of one PTY (owned by its I/O thread).
pub struct Stream {
    prev: vt100::Screen,
    seq: u64,
    tx: broadcast::Sender<Arc<Update>>,
}

fn whole(screen: &vt100::Screen, seq: u64) -> Update {
    let (rows, cols) = screen.size();
    Update {
        seq,
        full: true,
        ansi: screen.state_formatted(),
        rows: rows.get(),
        cols: cols.get(),
    }
}

impl Stream {
    pub fn new(screen: &vt100::Screen) -> Stream {
        Stream {
            prev: screen.clone(),
            seq: 0,
            tx: broadcast::Sender::new(BACKLOG),
        }
    }

    /// A new watcher of `screen`, the screen as of the last publish (the
    /// caller publishes first).
    pub fn watch(&mut self, screen: &vt100::Screen) -> Watching {
        if screen.size() != self.prev.size() {
            self.publish(screen);
        }
        (whole(screen, self.seq), self.tx.subscribe())
    }

    /// Send what changed since the last publish; false when nobody watches
    /// any more (the stream can go).
    pub fn publish(&mut self, screen: &vt100::Screen) -> bool {
        if self.tx.receiver_count() == 0 {
            return false;
        }
        let update = if screen.size() != self.prev.size() {
            whole(screen, self.seq + 1)
        } else {
            let ansi = screen.state_diff(&self.prev);
            if ansi.is_empty() {
                return true;
            }
            let (rows, cols) = screen.size();
            Update {
                seq: self.seq + 1,
                full: false,
                ansi,
                rows: rows.get(),
                cols: cols.get(),
            }
        };
        self.seq += 1;
        self.prev = screen.clone();
        // No receiver left between the check and now: the next publish ends it.
        let _ = self.tx.send(Arc::new(update));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parser(rows: u16, cols: u16) -> vt100::Parser {
        let nz = |v: u16| std::num::NonZeroU16::new(v).unwrap();
        vt100::Parser::new(nz(rows), nz(cols), 0)
    }

    /// A terminal fed the whole screen and then every update shows what the
    /// PTY's emulator shows.
    #[test]
    fn whole_then_diffs_reproduce_the_screen() {
        let mut pty = parser(5, 20);
        pty.process(b"\x1b[31mred\x1b[m plain\r\n");
        let mut s = Stream::new(pty.screen());
        let (first, mut rx) = s.watch(pty.screen());
        assert!(first.full);
        let mut human = parser(5, 20);
        human.process(first.ansi.as_bytes());
        pty.process(b"\x1b[1;32mgreen\x1b[m\r\n>>> ");
        assert!(s.publish(pty.screen()));
        pty.process(b"print(6*7)\r\n42\r\n>>> ");
        assert!(s.publish(pty.screen()));
        let mut seqs = Vec::new();
        while let Ok(u) = rx.try_recv() {
            assert!(!u.full);
            seqs.push(u.seq);
            human.process(u.ansi.as_bytes());
        }
        assert_eq!(seqs, vec![1, 2]);
        assert_eq!(human.screen().contents(), pty.screen().contents());
        assert_eq!(
            human.screen().contents_formatted(),
            pty.screen().contents_formatted()
        );
        assert_eq!(human.screen().cursor_position(), (4, 4));
        assert_eq!(
            human.screen().cursor_position(),
            pty.screen().cursor_position()
        );
        // Nobody watching: the stream says it can go.
        drop(rx);
        pty.process(b"x");
        assert!(!s.publish(pty.screen()));
    }

    #[test]
    fn a_resize_sends_the_whole_screen() {
        let mut pty = parser(5, 20);
        let mut s = Stream::new(pty.screen());
        let (_, mut rx) = s.watch(pty.screen());
        pty.set_size(
            std::num::NonZeroU16::new(10).unwrap(),
            std::num::NonZeroU16::new(40).unwrap(),
        );
        pty.process(b"hi");
        assert!(s.publish(pty.screen()));
        let u = rx.try_recv().unwrap();
        assert!(u.full);
        assert_eq!((u.rows, u.cols, u.seq), (10, 40, 1));
    }
}
