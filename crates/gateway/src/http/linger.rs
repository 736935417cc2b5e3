//! The lingering close, as nginx does it: an answer sent before the request's body was read
//! (a 413, a 401 to an upload) is followed by reading and discarding what the client still
//! sends, up to [`MAX_BYTES`] or [`MAX_WAIT`], before the socket closes. Closed at once, a
//! socket with unread bytes answers the client's next segments with a reset, and the reset
//! throws away the answer before a client that writes its whole body before reading (Python's
//! `http.client`) has read it: it sees a broken pipe instead of the 413.
//!
//! [`Lingering`] wraps a connection's transport: its shutdown first shuts the write side (the
//! answer and the FIN go out, so the client reads the answer whole), then drains. A client
//! that has sent everything closes on the FIN, and the drain ends at once.

use std::future::Future;
use std::mem::MaybeUninit;
use std::pin::Pin;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::time::Sleep;

/// The most a lingering close reads and discards.
pub const MAX_BYTES: usize = 8 << 20;
/// The longest a lingering close waits for the client to finish.
pub const MAX_WAIT: Duration = Duration::from_secs(5);
/// How long a close waits for a first byte from a client that was not sending.
pub const QUIET: Duration = Duration::from_millis(100);

/// A transport whose shutdown lingers (see the module doc).
pub struct Lingering<I> {
    io: I,
    drain: Drain,
}

enum Drain {
    /// Serving.
    Open,
    /// Write side shut; reading until EOF, `left` bytes or the deadline; or until `quiet`
    /// passes with nothing read (a client that was not sending: an idle keep-alive closed by
    /// a drain, say, need not hold its slot for the whole deadline).
    Reading {
        left: usize,
        deadline: Pin<Box<Sleep>>,
        quiet: Option<Pin<Box<Sleep>>>,
    },
    Done,
}

impl<I> Lingering<I> {
    pub fn new(io: I) -> Self {
        Lingering {
            io,
            drain: Drain::Open,
        }
    }
}

impl<I: hyper::rt::Read + Unpin> hyper::rt::Read for Lingering<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<I: hyper::rt::Read + hyper::rt::Write + Unpin> hyper::rt::Write for Lingering<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            match &mut this.drain {
                Drain::Open => {
                    ready!(Pin::new(&mut this.io).poll_shutdown(cx))?;
                    this.drain = Drain::Reading {
                        left: MAX_BYTES,
                        deadline: Box::pin(tokio::time::sleep(MAX_WAIT)),
                        quiet: Some(Box::pin(tokio::time::sleep(QUIET))),
                    };
                }
                Drain::Reading {
                    left,
                    deadline,
                    quiet,
                } => {
                    let quiet_over = quiet
                        .as_mut()
                        .is_some_and(|q| q.as_mut().poll(cx).is_ready());
                    if quiet_over || deadline.as_mut().poll(cx).is_ready() {
                        this.drain = Drain::Done;
                        continue;
                    }
                    let mut scratch = [MaybeUninit::<u8>::uninit(); 8192];
                    let mut rb = hyper::rt::ReadBuf::uninit(&mut scratch);
                    match Pin::new(&mut this.io).poll_read(cx, rb.unfilled()) {
                        Poll::Pending => return Poll::Pending,
                        Poll::Ready(Ok(())) if !rb.filled().is_empty() => {
                            // Still sending: drained to its end, the deadline or the bound.
                            *quiet = None;
                            *left = left.saturating_sub(rb.filled().len());
                            if *left == 0 {
                                this.drain = Drain::Done;
                            }
                        }
                        // EOF, or an error: the client is done.
                        Poll::Ready(_) => this.drain = Drain::Done,
                    }
                }
                Drain::Done => return Poll::Ready(Ok(())),
            }
        }
    }
}

/// The lingering close of a plain socket (the lean path's refusals): shut the write side,
/// then read and discard as [`Lingering`] does.
pub async fn close(mut stream: tokio::net::TcpStream) {
    use tokio::io::AsyncWriteExt;
    if tokio::time::timeout(Duration::from_secs(1), stream.shutdown())
        .await
        .is_err()
    {
        return;
    }
    let drain = async {
        let mut scratch = [0u8; 8192];
        let mut left = MAX_BYTES;
        while left > 0 {
            match stream.read(&mut scratch).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(MAX_WAIT, drain).await;
}
