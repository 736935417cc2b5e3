//! One subscriber of a topic: a cursor into its ring, read as the response body of the
//! subscriber's event stream (the lean path and hyper both poll it), framed for its binding.

use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::Bytes;
use hyper::body::Frame;

use super::{ending, Cursor, Dialect, Inner, Topic, ACCESS_REVOKED, SLOW_CONSUMER};
use crate::protocol::a2a::stream as a2a;

/// One subscriber's read position: the response body of its event stream.
pub struct Subscription {
    pub(super) topic: Arc<Topic>,
    pub(super) cursor: Arc<Cursor>,
    pub(super) next: u64,
    pub(super) ping_gen: u64,
    /// The round in which this subscriber's waker was registered.
    pub(super) round: u64,
    pub(super) done: bool,
    /// A2A: the task as it is now comes first (a subscriber that joined).
    pub(super) snapshot_first: bool,
    /// The client's stream slot (`max_streams`): free again when the subscription ends.
    pub(super) permit: Option<crate::auth::StreamPermit>,
    /// A2A: whether the subscriber reads an agent's own error text when the agent ends the
    /// stream with one (else it gets the error withheld: docs/security.md).
    pub(super) agent_texts: bool,
}

/// Why a subscription ended early.
#[derive(Debug)]
pub struct SlowConsumer;

impl std::fmt::Display for SlowConsumer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("subscriber fell too far behind the stream; resume with Last-Event-ID")
    }
}

impl std::error::Error for SlowConsumer {}

impl Subscription {
    /// Hold the client's stream slot for as long as this subscription lives.
    pub fn hold(&mut self, permit: Option<crate::auth::StreamPermit>) {
        self.permit = permit;
    }

    /// Let this subscriber read the agent's own error text should the agent end the stream with
    /// one: a caller with `metrics` or `admin` (`Caller::reads_agents_texts`).
    pub fn show_agents_texts(&mut self) {
        self.agent_texts = true;
    }

    /// The topic this subscription reads.
    pub fn topic(&self) -> &Arc<Topic> {
        &self.topic
    }

    /// The next frame's data for this subscriber, `Ready(None)` at the end of the stream (an
    /// ending in trailers, gRPC's, reads as empty data: the HTTP/1 readers of this never
    /// speak gRPC).
    pub fn poll_next(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Bytes, SlowConsumer>>> {
        self.poll_any(cx)
            .map(|o| o.map(|r| r.map(|f| f.into_data().unwrap_or_default())))
    }

    /// The next frame for this subscriber, `Ready(None)` at the end of the stream.
    fn poll_any(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, SlowConsumer>>> {
        if self.done {
            return Poll::Ready(None);
        }
        // Credentials withdrawn: the last event says so (on A2A, ErrorInfo ACCESS_REVOKED with
        // the `access_revoked` event's reason as metadata `reason`), and the stream ends.
        if let Some(Poll::Ready(why)) = self.permit.as_ref().map(|p| p.poll_revoked(cx)) {
            self.done = true;
            if self.topic.dialect == Dialect::A2a {
                let e = ending(
                    ACCESS_REVOKED,
                    403,
                    &format!(
                        "the credentials that opened this stream were withdrawn ({})",
                        why.reason()
                    ),
                )
                .with_metadata("reason", why.reason());
                return Poll::Ready(self.cursor.framing.last(Some(&e)).map(Ok));
            }
            return Poll::Ready(Some(Ok(Frame::data(why.event()))));
        }
        if self.cursor.cut.load(Ordering::Acquire) {
            return self.cut_now();
        }
        let topic = self.topic.clone();
        let mut inner = topic.lock();
        if self.snapshot_first {
            if let Some(task) = inner.snapshot.clone() {
                // The task as it is now, then what comes after it.
                self.snapshot_first = false;
                self.next = inner.next_seq;
                self.cursor.next.store(self.next, Ordering::Release);
                drop(inner);
                let stored = Bytes::from(a2a::task_frame(&task));
                return Poll::Ready(Some(Ok(Frame::data(self.cursor.framing.frame(&stored)))));
            }
            if !inner.closed {
                if self.round != inner.round {
                    self.round = inner.round;
                    inner.wakers.push(cx.waker().clone());
                }
                return Poll::Pending;
            }
        }
        let oldest = inner.ring.front().map_or(inner.next_seq, |s| s.seq);
        if self.next < oldest {
            return self.cut(inner);
        }
        if self.next < inner.next_seq {
            let i = (self.next - oldest) as usize;
            if let Some(s) = inner.ring.get(i) {
                let behind = inner.total - s.end;
                if behind > topic.limits.lag_bytes {
                    return self.cut(inner);
                }
                self.next += 1;
                self.cursor.next.store(self.next, Ordering::Release);
                let (bytes, at) = (s.bytes.clone(), s.at);
                drop(inner);
                let m = &topic.metrics;
                m.stream_events_out.inc();
                m.stream_fanout_seconds.observe(at.elapsed().as_secs_f64());
                return Poll::Ready(Some(Ok(Frame::data(self.cursor.framing.frame(&bytes)))));
            }
        }
        if inner.ping_gen != self.ping_gen {
            self.ping_gen = inner.ping_gen;
            if self.cursor.framing.pings() {
                return Poll::Ready(Some(Ok(Frame::data(inner.ping.clone()))));
            }
        }
        if inner.closed {
            self.done = true;
            let (texts, agent) = (self.agent_texts, &*self.topic.key.0);
            let ending = inner.ending.as_ref().map(|e| e.error(texts, agent));
            drop(inner);
            return Poll::Ready(self.cursor.framing.last(ending.as_ref()).map(Ok));
        }
        if self.round != inner.round {
            self.round = inner.round;
            inner.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn cut(
        &mut self,
        inner: MutexGuard<'_, Inner>,
    ) -> Poll<Option<Result<Frame<Bytes>, SlowConsumer>>> {
        drop(inner);
        if !self.cursor.cut.swap(true, Ordering::AcqRel) {
            self.topic.metrics.stream_slow_consumers.inc();
        }
        self.cut_now()
    }

    /// The end of a subscriber cut as a slow consumer: a Clawpedia stream ends incomplete (the
    /// client resumes with its last id); an A2A stream ends with `event: error` SLOW_CONSUMER
    /// (its client subscribes again, and gets the task as it is now).
    fn cut_now(&mut self) -> Poll<Option<Result<Frame<Bytes>, SlowConsumer>>> {
        self.done = true;
        if self.topic.dialect == Dialect::A2a {
            let e = ending(
                SLOW_CONSUMER,
                429,
                "this subscriber fell too far behind the stream: subscribe again",
            );
            return Poll::Ready(self.cursor.framing.last(Some(&e)).map(Ok));
        }
        Poll::Ready(Some(Err(SlowConsumer)))
    }

    /// As a hyper body frame.
    pub fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, SlowConsumer>>> {
        self.get_mut().poll_any(cx)
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut inner = self.topic.lock();
        if self.topic.subscribers.fetch_sub(1, Ordering::AcqRel) == 1 {
            inner.last_left = Some(Instant::now());
        }
        drop(inner);
        self.topic.metrics.stream_subscribers.dec();
    }
}
