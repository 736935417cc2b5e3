//! Reading an event stream in tests: the raw text as received, and the events parsed from it.

use std::collections::VecDeque;
use std::time::Duration;

use a2a_gateway::protocol::sse::{Event, Parser};
use http_body_util::BodyExt;
use hyper::body::Incoming;

pub struct Events {
    body: Incoming,
    parser: Parser,
    ready: VecDeque<Event>,
    /// Everything received so far, as text.
    pub raw: String,
    pub ended: bool,
    /// The stream ended with an error (cut by the server).
    pub failed: bool,
}

impl std::fmt::Debug for Events {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Events")
            .field("raw", &self.raw)
            .field("ended", &self.ended)
            .finish()
    }
}

impl Events {
    pub fn new(res: hyper::Response<Incoming>) -> Events {
        assert_eq!(res.status(), 200, "an event stream");
        Events {
            body: res.into_body(),
            parser: Parser::new(1 << 24),
            ready: VecDeque::new(),
            raw: String::new(),
            ended: false,
            failed: false,
        }
    }

    /// The next event (pings included), or `None` if the stream ended or `wait` passed.
    pub async fn next(&mut self, wait: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(e);
            }
            if self.ended {
                return None;
            }
            match tokio::time::timeout_at(deadline, self.body.frame()).await {
                Err(_) => return None,
                Ok(None) => self.ended = true,
                Ok(Some(Err(_))) => {
                    self.ended = true;
                    self.failed = true;
                }
                Ok(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        self.raw.push_str(&String::from_utf8_lossy(&data));
                        let mut out = Vec::new();
                        self.parser
                            .feed(&data, &mut out)
                            .expect("the gateway's stream parses");
                        self.ready.extend(out);
                    }
                }
            }
        }
    }

    /// The next event that is not a ping.
    pub async fn next_event(&mut self, wait: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let e = self.next(left).await?;
            if e.event != "ping" {
                return Some(e);
            }
        }
    }

    /// Read until the stream ends (or `wait` passes); whether it ended.
    pub async fn until_end(&mut self, wait: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + wait;
        while !self.ended {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return false;
            }
            let _ = self.next(left).await;
            self.ready.clear();
        }
        true
    }
}
