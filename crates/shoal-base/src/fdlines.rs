//! Lines over a Unix stream socket, each optionally carrying descriptors
//! (`SCM_RIGHTS`): what the daemon and a token's worker speak over their
//! socketpair, and a spawning process and its namespace broker over theirs.
//!
//! A sender attaches a line's descriptors to its first byte; the kernel
//! delivers them with that byte, so they have arrived by the time the
//! receiver has the whole line. How many belong to a line is for the line
//! to say (the receiver takes them with [`Lines::take_fds`]).

use std::collections::VecDeque;
use std::io::{self, Write};
use std::os::fd::{BorrowedFd, OwnedFd};
use std::os::unix::net::UnixStream;

/// The most descriptors one line carries.
pub const MAX_FDS: usize = 6;

/// Write `line` (ending in `\n`) to `stream` with `fds` (at most
/// [`MAX_FDS`]) attached to its first byte. The caller keeps writers of
/// one stream apart (a lock around it).
pub fn send(mut stream: &UnixStream, line: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags};
    if fds.is_empty() {
        return stream.write_all(line);
    }
    if fds.len() > MAX_FDS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("at most {MAX_FDS} descriptors go with a line"),
        ));
    }
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    control.push(SendAncillaryMessage::ScmRights(fds));
    let n = loop {
        match rustix::net::sendmsg(
            stream,
            &[io::IoSlice::new(line)],
            &mut control,
            SendFlags::NOSIGNAL,
        ) {
            Err(rustix::io::Errno::INTR) => continue,
            r => break r?,
        }
    };
    stream.write_all(&line[n..])
}

/// The lines one end reads, and the descriptors that came with them.
#[derive(Default)]
pub struct Lines {
    buf: Vec<u8>,
    /// How much of `buf` holds no newline (each byte is looked at once).
    scanned: usize,
    fds: VecDeque<OwnedFd>,
}

/// Why [`Lines::next`] has no line.
#[derive(Debug, PartialEq, Eq)]
pub enum End {
    /// The other end closed the stream (or reading it failed).
    Closed,
    /// A line grew past the limit: the other end is not speaking the
    /// protocol.
    TooLong,
}

impl Lines {
    /// The next line, without its `\n`; a line longer than `max` bytes ends
    /// the reading.
    pub fn next(&mut self, stream: &UnixStream, max: usize) -> Result<Vec<u8>, End> {
        use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags};
        loop {
            if let Some(i) = self.buf[self.scanned..].iter().position(|b| *b == b'\n') {
                let nl = self.scanned + i;
                let mut line: Vec<u8> = self.buf.drain(..=nl).collect();
                line.pop();
                self.scanned = 0;
                return Ok(line);
            }
            self.scanned = self.buf.len();
            if self.buf.len() > max {
                return Err(End::TooLong);
            }
            let mut chunk = vec![0u8; 64 << 10];
            let mut space =
                [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS))];
            let mut control = RecvAncillaryBuffer::new(&mut space);
            let got = rustix::net::recvmsg(
                stream,
                &mut [io::IoSliceMut::new(&mut chunk)],
                &mut control,
                RecvFlags::CMSG_CLOEXEC,
            );
            match got {
                Ok(m) if m.bytes == 0 => return Err(End::Closed),
                Ok(m) => {
                    for msg in control.drain() {
                        if let RecvAncillaryMessage::ScmRights(fds) = msg {
                            self.fds.extend(fds);
                        }
                    }
                    self.buf.extend_from_slice(&chunk[..m.bytes]);
                }
                Err(rustix::io::Errno::INTR) => {}
                Err(_) => return Err(End::Closed),
            }
        }
    }

    /// The first `n` descriptors received and not yet taken (fewer when
    /// fewer came).
    pub fn take_fds(&mut self, n: usize) -> Vec<OwnedFd> {
        self.fds.drain(..n.min(self.fds.len())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::os::fd::AsFd;

    /// Lines arrive whole and in order, a descriptor with its line, and a
    /// line past the limit ends the reading.
    #[test]
    fn lines_carry_descriptors_and_a_long_line_ends_the_reading() {
        let (a, b) = UnixStream::pair().unwrap();
        let (mut r, w) = UnixStream::pair().unwrap();
        send(&a, b"one\n", &[]).unwrap();
        send(&a, b"two\n", &[w.as_fd()]).unwrap();
        let big = vec![b'x'; 200_000];
        let writer = std::thread::spawn(move || {
            let mut line = big;
            line.push(b'\n');
            send(&a, &line, &[]).unwrap();
            send(&a, &[b'y'; 300], &[]).unwrap();
        });
        let mut lines = Lines::default();
        assert_eq!(lines.next(&b, 1 << 20).unwrap(), b"one");
        assert_eq!(lines.next(&b, 1 << 20).unwrap(), b"two");
        let fd = lines.take_fds(1).pop().expect("the descriptor came");
        drop(w);
        let mut passed = UnixStream::from(fd);
        passed.write_all(b"hi").unwrap();
        let mut got = [0u8; 2];
        r.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"hi");
        assert_eq!(lines.next(&b, 1 << 20).unwrap().len(), 200_000);
        assert_eq!(lines.next(&b, 100), Err(End::TooLong));
        writer.join().unwrap();
    }
}
