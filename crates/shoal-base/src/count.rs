//! A writer that keeps nothing and counts the bytes written to it: how an
//! encoder's output is measured without a buffer.

/// The bytes written so far.
#[derive(Debug, Default)]
pub struct ByteCount(pub usize);

impl std::io::Write for ByteCount {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0 += b.len();
        Ok(b.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
