//! gRPC's length-prefixed messages: a flag byte (1: compressed), a 4-byte big-endian length,
//! the message. The gateway and the sample agent send no compressed message and accept none
//! (they announce `grpc-accept-encoding: identity`).

use bytes::{Buf, BufMut, Bytes, BytesMut};

/// Why bytes are not gRPC messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FrameError {
    /// A compressed message: the caller did not ask which encodings are accepted.
    Compressed,
    /// A message longer than the reader takes.
    TooLarge(usize),
    /// The bytes end inside a message.
    Truncated,
    /// More than the one message a unary call carries.
    Trailing,
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Compressed => f.write_str("compressed gRPC messages are not accepted"),
            FrameError::TooLarge(max) => write!(f, "a gRPC message over {max} bytes"),
            FrameError::Truncated => f.write_str("the body ends inside a gRPC message"),
            FrameError::Trailing => f.write_str("more than one message in a unary call"),
        }
    }
}

impl std::error::Error for FrameError {}

/// `message` as one length-prefixed, uncompressed gRPC message.
pub fn encode(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(5 + message.len());
    out.put_u8(0);
    out.put_u32(message.len() as u32);
    out.put_slice(message);
    out.freeze()
}

/// The one message of a unary call's whole body (an empty body is an empty message, as gRPC
/// clients send a message with no fields set).
pub fn read_one(body: &[u8], max: usize) -> Result<&[u8], FrameError> {
    if body.is_empty() {
        return Ok(&[]);
    }
    let (message, used) = split(body, max)?.ok_or(FrameError::Truncated)?;
    if used != body.len() {
        return Err(FrameError::Trailing);
    }
    Ok(message)
}

/// The first message of `buf` and the bytes it took, `None` if `buf` does not hold it whole.
fn split(buf: &[u8], max: usize) -> Result<Option<(&[u8], usize)>, FrameError> {
    if buf.len() < 5 {
        return Ok(None);
    }
    if buf[0] != 0 {
        return Err(FrameError::Compressed);
    }
    let len = u32::from_be_bytes([buf[1], buf[2], buf[3], buf[4]]) as usize;
    if len > max {
        return Err(FrameError::TooLarge(max));
    }
    if buf.len() < 5 + len {
        return Ok(None);
    }
    Ok(Some((&buf[5..5 + len], 5 + len)))
}

/// Messages read from a stream's data as it arrives, each at most `max` bytes: it holds at
/// most one message and a prefix.
#[derive(Debug)]
pub struct Deframer {
    buf: BytesMut,
    max: usize,
}

impl Deframer {
    /// A reader of messages at most `max` bytes long.
    pub fn new(max: usize) -> Deframer {
        Deframer {
            buf: BytesMut::new(),
            max,
        }
    }

    /// Adds data as it came.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole message, `Ok(None)` until one has arrived.
    pub fn next_message(&mut self) -> Result<Option<Bytes>, FrameError> {
        let used = match split(&self.buf, self.max)? {
            Some((_, used)) => used,
            None => return Ok(None),
        };
        let mut whole = self.buf.split_to(used);
        whole.advance(5);
        Ok(Some(whole.freeze()))
    }

    /// Whether data is held that is not yet a whole message (at the stream's end: truncated).
    pub fn holds_partial(&self) -> bool {
        !self.buf.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_read_back_whole_however_the_data_is_cut() {
        let a = encode(b"hello");
        let b = encode(b"");
        let c = encode(&[7u8; 300]);
        let all: Vec<u8> = [a.as_ref(), b.as_ref(), c.as_ref()].concat();
        for cut in 1..all.len() {
            let mut d = Deframer::new(1024);
            let mut got = Vec::new();
            for chunk in all.chunks(cut) {
                d.push(chunk);
                while let Some(m) = d.next_message().expect("valid") {
                    got.push(m);
                }
            }
            assert_eq!(got.len(), 3, "cut {cut}");
            assert_eq!(&got[0][..], b"hello");
            assert!(got[1].is_empty());
            assert_eq!(got[2].len(), 300);
            assert!(!d.holds_partial());
        }
    }

    #[test]
    fn compressed_oversized_truncated_and_trailing_bodies_are_refused() {
        let mut d = Deframer::new(4);
        d.push(&encode(b"hello"));
        assert_eq!(d.next_message(), Err(FrameError::TooLarge(4)));
        let mut z = encode(b"x").to_vec();
        z[0] = 1;
        assert_eq!(read_one(&z, 10), Err(FrameError::Compressed));
        assert_eq!(
            read_one(&encode(b"abc")[..6], 10),
            Err(FrameError::Truncated)
        );
        let two = [encode(b"a").as_ref(), encode(b"b").as_ref()].concat();
        assert_eq!(read_one(&two, 10), Err(FrameError::Trailing));
        assert_eq!(read_one(&encode(b"abc"), 10), Ok(&b"abc"[..]));
        assert_eq!(read_one(b"", 10), Ok(&b""[..]));
    }
}
