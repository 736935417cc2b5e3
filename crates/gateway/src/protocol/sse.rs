//! Server-sent events as the WHATWG HTML standard defines them: an incremental parser that can be
//! fed any split of the bytes, and a writer that cannot produce a stream that parses differently.
//!
//! Parser rules (§9.2.6): lines end at CRLF, LF or a lone CR, also when the CR and the LF come
//! in different reads; one leading BOM is dropped; a line starting with `:` is a comment; a line
//! without a colon is a field with an empty value; one space after the colon is dropped; `data`
//! lines join with LF; `retry` counts only if it is all ASCII digits; an `id` containing NUL is
//! ignored; an event is dispatched at a blank line only, so an event cut off by the end of the
//! stream is never seen; an event with no data is not dispatched.

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// The event type; `message` when the stream gave none.
    pub event: String,
    /// The event's data lines, joined with LF.
    pub data: String,
    /// The last event ID buffer at dispatch (the id of this or an earlier event), if any.
    pub id: Option<String>,
}

/// Why the parser gave up on a stream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line longer than the parser's bound.
    #[error("event-stream line longer than {0} bytes")]
    LineTooLong(usize),
    /// An event whose data grew past the parser's bound.
    #[error("event-stream event larger than {0} bytes")]
    EventTooLarge(usize),
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// The incremental parser. Bounded: a line or an event over `max_bytes` is an error (the
/// caller drops the stream) rather than a buffer that grows with whatever the peer sends.
#[derive(Debug)]
pub struct Parser {
    line: Vec<u8>,
    /// The previous chunk ended with CR: an LF starting the next one belongs to it.
    after_cr: bool,
    /// Bytes seen at the start of the stream while deciding whether they are a BOM.
    start: Option<Vec<u8>>,
    data: String,
    event: String,
    last_id: Option<String>,
    retry: Option<u64>,
    max_bytes: usize,
}

impl Parser {
    /// A parser that refuses lines and events over `max_bytes`.
    pub fn new(max_bytes: usize) -> Parser {
        Parser {
            line: Vec::new(),
            after_cr: false,
            start: Some(Vec::with_capacity(3)),
            data: String::new(),
            event: String::new(),
            last_id: None,
            retry: None,
            max_bytes,
        }
    }

    /// The reconnection time the stream asked for, if it did.
    pub fn retry(&self) -> Option<u64> {
        self.retry
    }

    /// The last event ID buffer: what to send as `Last-Event-ID` when reconnecting.
    pub fn last_id(&self) -> Option<&str> {
        self.last_id.as_deref()
    }

    /// Feed the next bytes of the stream; complete events are appended to `out`.
    pub fn feed(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if chunk.is_empty() {
            // An empty read (an empty HTTP/2 DATA frame) must not end a pending CR's line.
            return Ok(());
        }
        if let Some(mut start) = self.start.take() {
            // Up to three bytes may be held back until it is clear whether they are a BOM.
            let need = 3 - start.len();
            let take = need.min(chunk.len());
            start.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
            if start.len() < 3 && BOM.starts_with(&start) {
                self.start = Some(start);
                return Ok(());
            }
            let rest = if start == BOM { &[][..] } else { &start[..] };
            let held = rest.to_vec();
            self.scan(&held, out)?;
        }
        self.scan(chunk, out)
    }

    fn scan(&mut self, mut chunk: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if self.after_cr {
            self.after_cr = false;
            if chunk.first() == Some(&b'\n') {
                chunk = &chunk[1..];
            }
        }
        while let Some(i) = chunk.iter().position(|&b| b == b'\r' || b == b'\n') {
            self.push_line_bytes(&chunk[..i])?;
            self.end_line(out)?;
            if chunk[i] == b'\r' {
                match chunk.get(i + 1) {
                    Some(b'\n') => chunk = &chunk[i + 2..],
                    Some(_) => chunk = &chunk[i + 1..],
                    None => {
                        self.after_cr = true;
                        chunk = &[];
                    }
                }
            } else {
                chunk = &chunk[i + 1..];
            }
        }
        self.push_line_bytes(chunk)
    }

    fn push_line_bytes(&mut self, bytes: &[u8]) -> Result<(), SseError> {
        if self.line.len() + bytes.len() > self.max_bytes {
            return Err(SseError::LineTooLong(self.max_bytes));
        }
        self.line.extend_from_slice(bytes);
        Ok(())
    }

    fn end_line(&mut self, out: &mut Vec<Event>) -> Result<(), SseError> {
        let line = std::mem::take(&mut self.line);
        let result = self.process(&line, out);
        // Keep the allocation for the next line.
        self.line = line;
        self.line.clear();
        result
    }

    fn process(&mut self, line: &[u8], out: &mut Vec<Event>) -> Result<(), SseError> {
        if line.is_empty() {
            self.dispatch(out);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => {
                let v = &line[i + 1..];
                (&line[..i], v.strip_prefix(b" ").unwrap_or(v))
            }
            None => (line, &[][..]),
        };
        let value = String::from_utf8_lossy(value);
        match field {
            b"event" => self.event = value.into_owned(),
            b"data" => {
                if self.data.len() + value.len() + 1 > self.max_bytes {
                    return Err(SseError::EventTooLarge(self.max_bytes));
                }
                self.data.push_str(&value);
                self.data.push('\n');
            }
            b"id" if !value.contains('\0') => self.last_id = Some(value.into_owned()),
            b"retry" if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) => {
                self.retry = value.parse().ok();
            }
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, out: &mut Vec<Event>) {
        let event = std::mem::take(&mut self.event);
        if self.data.is_empty() {
            return;
        }
        let mut data = std::mem::take(&mut self.data);
        data.pop(); // the LF after the last data line
        out.push(Event {
            event: if event.is_empty() {
                "message".to_owned()
            } else {
                event
            },
            data,
            id: self.last_id.clone(),
        });
    }
}

/// Append one event to `out`, safely: `id` and `event` lose any CR, LF or NUL (they would end
/// the field early, or make the id ignored), and `data` becomes one `data:` line per line of it,
/// whatever its line ends, so the receiver parses back exactly `data` (line ends as LF).
pub fn write_event(out: &mut Vec<u8>, id: Option<&str>, event: Option<&str>, data: &str) {
    let clean = |s: &str, out: &mut Vec<u8>| {
        out.extend(s.bytes().filter(|b| !matches!(b, b'\r' | b'\n' | b'\0')))
    };
    if let Some(id) = id {
        out.extend_from_slice(b"id: ");
        clean(id, out);
        out.push(b'\n');
    }
    if let Some(ev) = event.filter(|e| !e.is_empty()) {
        out.extend_from_slice(b"event: ");
        clean(ev, out);
        out.push(b'\n');
    }
    let mut rest = data;
    loop {
        let end = rest.find(['\r', '\n']);
        out.extend_from_slice(b"data: ");
        out.extend_from_slice(&rest.as_bytes()[..end.unwrap_or(rest.len())]);
        out.push(b'\n');
        match end {
            None => break,
            Some(i) => {
                let skip = if rest[i..].starts_with("\r\n") { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
        }
    }
    out.push(b'\n');
}

/// Append the spec's keep-alive event: `event: ping` with `{"timestamp": ...}`, no id (a ping
/// is not an event to resume after).
pub fn write_ping(out: &mut Vec<u8>, timestamp: &str) {
    let data = format!("{{\"timestamp\": \"{timestamp}\"}}");
    write_event(out, None, Some("ping"), &data);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_in(chunks: &[&[u8]]) -> Vec<Event> {
        let mut p = Parser::new(1 << 20);
        let mut out = Vec::new();
        for c in chunks {
            p.feed(c, &mut out).expect("parses");
        }
        out
    }

    /// Every split of the input gives the same events as the whole.
    fn parse_every_split(input: &[u8]) -> Vec<Event> {
        let whole = parse_in(&[input]);
        for i in 0..=input.len() {
            assert_eq!(parse_in(&[&input[..i], &input[i..]]), whole, "split at {i}");
        }
        let bytes: Vec<&[u8]> = input.chunks(1).collect();
        assert_eq!(parse_in(&bytes), whole, "byte by byte");
        whole
    }

    fn ev(event: &str, data: &str, id: Option<&str>) -> Event {
        Event {
            event: event.into(),
            data: data.into(),
            id: id.map(Into::into),
        }
    }

    #[test]
    fn line_ends_of_every_kind_also_split_across_reads() {
        let got = parse_every_split(b"data: a\r\n\r\ndata: b\n\ndata: c\r\rdata: d\r\n\n");
        assert_eq!(
            got,
            [
                ev("message", "a", None),
                ev("message", "b", None),
                ev("message", "c", None),
                ev("message", "d", None)
            ]
        );
    }

    #[test]
    fn an_empty_read_between_cr_and_lf_changes_nothing() {
        let got = parse_in(&[b"data: a\r", b"", b"\ndata: b\n\n"]);
        assert_eq!(got, [ev("message", "a\nb", None)]);
    }

    #[test]
    fn one_leading_bom_is_dropped_and_only_one() {
        let got = parse_every_split(b"\xEF\xBB\xBFdata: x\n\n");
        assert_eq!(got, [ev("message", "x", None)]);
        // A second BOM is part of the first line's field name: not `data`, so nothing.
        assert!(parse_every_split(b"\xEF\xBB\xBF\xEF\xBB\xBFdata: x\n\n").is_empty());
        // Bytes that only start like a BOM are kept.
        assert_eq!(parse_every_split(b"\xEF\n"), []);
    }

    #[test]
    fn fields_comments_and_values_follow_the_standard() {
        let got = parse_every_split(
            b": a comment\nevent: log\ndata:no space\ndata:  two spaces\ndata\nid: 7\n\n\
              event\ndata: x\n\nretry: 1x0\nretry: 2500\nid: bad\0id\ndata: y\n\n",
        );
        assert_eq!(
            got,
            [
                ev("log", "no space\n two spaces\n", Some("7")),
                ev("message", "x", Some("7")),
                ev("message", "y", Some("7")),
            ]
        );
        let mut p = Parser::new(1024);
        let mut out = Vec::new();
        p.feed(b"retry: 1x0\n\nretry: 2500\n\nretry:\n\n", &mut out)
            .expect("parses");
        assert_eq!(p.retry(), Some(2500));
    }

    #[test]
    fn events_without_data_or_without_their_blank_line_are_not_dispatched() {
        assert!(parse_every_split(b"event: log\n\nid: 3\n\n").is_empty());
        let got = parse_every_split(b"data: complete\n\ndata: cut off");
        assert_eq!(got, [ev("message", "complete", None)]);
        let got = parse_every_split(b"data: cut off\n");
        assert!(got.is_empty());
    }

    #[test]
    fn sizes_are_bounded() {
        let mut p = Parser::new(16);
        let mut out = Vec::new();
        assert!(p.feed(&[b'x'; 17], &mut out).is_err());
        let mut p = Parser::new(16);
        assert!(p
            .feed(b"data: 0123456789\ndata: 0123456789\n", &mut out)
            .is_err());
    }

    #[test]
    fn the_writer_cannot_be_tricked_and_round_trips() {
        let mut out = Vec::new();
        write_event(
            &mut out,
            Some("1\r\nevent: evil"),
            Some("log\ndata: injected"),
            "a\r\nb\rc\nd",
        );
        assert_eq!(
            out,
            b"id: 1event: evil\nevent: logdata: injected\ndata: a\ndata: b\ndata: c\ndata: d\n\n"
        );
        let back = parse_in(&[&out]);
        assert_eq!(
            back,
            [ev("logdata: injected", "a\nb\nc\nd", Some("1event: evil"))]
        );
        let mut out = Vec::new();
        write_event(&mut out, None, None, "");
        assert_eq!(out, b"data: \n\n");
    }
}
