//! Newline-delimited framing with a hard size limit.
//!
//! One JSON value per line. A line longer than the limit is never buffered
//! whole: the reader keeps discarding until the next newline and reports
//! [`Frame::Oversized`], so one hostile client cannot make the daemon allocate
//! without bound.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line without its terminator (trailing `\r` and spaces stripped).
    Line(Vec<u8>),
    /// A line over the limit; its bytes were discarded. `len` counts what was seen.
    Oversized { len: u64 },
}

/// Reads frames from a buffered reader, never holding more than `limit` bytes.
pub struct FrameReader<R> {
    inner: R,
    limit: usize,
    buf: Vec<u8>,
}

impl<R: AsyncBufRead + Unpin> FrameReader<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        FrameReader {
            inner,
            limit,
            buf: Vec::new(),
        }
    }

    /// The next frame; `Ok(None)` at end of stream (a final unterminated line
    /// is returned as a frame first). Blank lines are skipped.
    pub async fn next(&mut self) -> std::io::Result<Option<Frame>> {
        loop {
            match self.next_raw().await? {
                Some(Frame::Line(l)) if l.iter().all(|b| b.is_ascii_whitespace()) => continue,
                other => return Ok(other),
            }
        }
    }

    async fn next_raw(&mut self) -> std::io::Result<Option<Frame>> {
        self.buf.clear();
        let mut discarding: Option<u64> = None;
        loop {
            let chunk = self.inner.fill_buf().await?;
            if chunk.is_empty() {
                // EOF.
                if let Some(len) = discarding {
                    return Ok(Some(Frame::Oversized { len }));
                }
                if self.buf.is_empty() {
                    return Ok(None);
                }
                return Ok(Some(Frame::Line(trim(std::mem::take(&mut self.buf)))));
            }
            let (take, done) = match memchr(chunk) {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let body = if done {
                &chunk[..take - 1]
            } else {
                &chunk[..take]
            };
            match discarding.as_mut() {
                Some(len) => *len += body.len() as u64,
                None if self.buf.len() + body.len() > self.limit => {
                    discarding = Some((self.buf.len() + body.len()) as u64);
                    self.buf = Vec::new();
                }
                None => self.buf.extend_from_slice(body),
            }
            self.inner.consume(take);
            if done {
                return Ok(Some(match discarding {
                    Some(len) => Frame::Oversized { len },
                    None => Frame::Line(trim(std::mem::take(&mut self.buf))),
                }));
            }
        }
    }
}

fn memchr(b: &[u8]) -> Option<usize> {
    b.iter().position(|&c| c == b'\n')
}

fn trim(mut v: Vec<u8>) -> Vec<u8> {
    while v.last().is_some_and(|b| b.is_ascii_whitespace()) {
        v.pop();
    }
    v
}

/// Serialize one frame: compact JSON plus `\n`.
pub fn encode<T: serde::Serialize + ?Sized>(v: &T) -> Vec<u8> {
    let mut out = serde_json::to_vec(v).unwrap_or_else(|_| b"null".to_vec());
    out.push(b'\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn frames(input: &[u8], limit: usize, cap: usize) -> Vec<Frame> {
        let reader = tokio::io::BufReader::with_capacity(cap, input);
        let mut fr = FrameReader::new(reader, limit);
        let mut out = Vec::new();
        while let Some(f) = fr.next().await.unwrap() {
            out.push(f);
        }
        out
    }

    #[test]
    fn splits_limits_and_recovers() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(async {
            let got = frames(b"{\"a\":1}\r\n\n  \n0123456789ABC\nok\nlast", 10, 4).await;
            assert_eq!(
                got,
                vec![
                    Frame::Line(b"{\"a\":1}".to_vec()),
                    Frame::Oversized { len: 13 },
                    Frame::Line(b"ok".to_vec()),
                    Frame::Line(b"last".to_vec()),
                ]
            );
            let got = frames(b"0123456789", 10, 3).await;
            assert_eq!(got, vec![Frame::Line(b"0123456789".to_vec())]);
            let got = frames(b"0123456789X", 10, 3).await;
            assert_eq!(got, vec![Frame::Oversized { len: 11 }]);
        });
    }
}
