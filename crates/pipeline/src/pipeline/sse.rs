//! Splits a `text/event-stream` into whole events without changing a byte of
//! them, so that an event the inspector passes is forwarded exactly as the
//! upstream wrote it, and each event is handed on as soon as it is complete.

use bytes::{Buf, Bytes, BytesMut};

/// One complete event: the raw bytes (including its terminating blank line)
/// and the payload of its `data:` lines joined with `\n`, if it had any.
#[derive(Debug, PartialEq, Eq)]
pub struct SseEvent {
    pub raw: Bytes,
    pub data: Option<String>,
    /// The `id` field (what a client resumes from with `Last-Event-ID`).
    pub(crate) id: Option<String>,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SseError {
    #[error("an event is larger than the inspection limit of {0} bytes")]
    TooLarge(usize),
    #[error("an event's data is not UTF-8")]
    NotUtf8,
    /// A line no event-stream reader should act on: what one client
    /// ignores another may read as data, so the event is not forwarded.
    #[error("an event has a line that is neither a data, event, id or retry field nor a comment")]
    UnknownField,
}

/// A UTF-8 byte order mark, which a client's decoder drops at the start of
/// a stream (so `\u{feff}data:` is a data line to it).
const BOM: &[u8] = b"\xef\xbb\xbf";

/// Incremental event splitter. Lines end in CRLF, LF or CR (per the HTML
/// living standard's event stream grammar); an empty line ends an event; a
/// BOM that starts the stream is dropped, as decoders do; a line that is
/// no known field is an error, not an ignored line (fail closed).
#[derive(Debug)]
pub struct SseFramer {
    buf: BytesMut,
    /// Where scanning resumes; bytes before it hold no line end of interest.
    scan: usize,
    /// Start of the line being scanned.
    line_start: usize,
    max_event: usize,
    /// Whether the stream's first bytes were looked at for a BOM.
    started: bool,
}

impl SseFramer {
    pub fn new(max_event: usize) -> Self {
        SseFramer {
            buf: BytesMut::new(),
            scan: 0,
            line_start: 0,
            max_event,
            started: false,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.buf.extend_from_slice(chunk);
    }

    /// Bytes held that do not yet form a whole event.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next whole event, if one is buffered.
    pub fn next_event(&mut self) -> Result<Option<SseEvent>, SseError> {
        if !self.started {
            // The stream is read as its clients decode it: without a BOM.
            if self.buf.len() < BOM.len() && BOM.starts_with(&self.buf) {
                return Ok(None);
            }
            if self.buf.starts_with(BOM) {
                self.buf.advance(BOM.len());
            }
            self.started = true;
        }
        loop {
            let Some(rel) = memchr::memchr2(b'\n', b'\r', &self.buf[self.scan..]) else {
                self.scan = self.buf.len();
                return self.check_size();
            };
            let at = self.scan + rel;
            let end = if self.buf[at] == b'\r' {
                match self.buf.get(at + 1) {
                    Some(b'\n') => at + 2,
                    Some(_) => at + 1,
                    // A CR at the end of what we have may be half of a CRLF.
                    None => {
                        self.scan = at;
                        return self.check_size();
                    }
                }
            } else {
                at + 1
            };
            let empty_line = at == self.line_start;
            self.scan = end;
            self.line_start = end;
            if empty_line {
                let raw = self.buf.split_to(end).freeze();
                self.scan = 0;
                self.line_start = 0;
                if raw.len() > self.max_event {
                    return Err(SseError::TooLarge(self.max_event));
                }
                let (data, id) = fields_of(&raw)?;
                return Ok(Some(SseEvent { raw, data, id }));
            }
        }
    }

    fn check_size(&self) -> Result<Option<SseEvent>, SseError> {
        if self.buf.len() > self.max_event {
            Err(SseError::TooLarge(self.max_event))
        } else {
            Ok(None)
        }
    }
}

/// The event's `data` field (every `data` line's value, joined with `\n`)
/// and its last `id` field.
type Fields = (Option<String>, Option<String>);

fn fields_of(raw: &[u8]) -> Result<Fields, SseError> {
    let mut data: Option<String> = None;
    let mut id: Option<String> = None;
    let mut rest = raw;
    while !rest.is_empty() {
        let (line, next) = match memchr::memchr2(b'\n', b'\r', rest) {
            Some(i) => {
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') {
                    2
                } else {
                    1
                };
                (&rest[..i], &rest[i + skip..])
            }
            None => (rest, &rest[rest.len()..]),
        };
        rest = next;
        if line.is_empty() {
            continue; // the blank line that ends the event
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(0) => continue, // comment
            Some(i) => {
                let mut v = &line[i + 1..];
                if v.first() == Some(&b' ') {
                    v.advance(1);
                }
                (&line[..i], v)
            }
            None => (line, &line[line.len()..]),
        };
        if !matches!(field, b"data" | b"event" | b"id" | b"retry") {
            return Err(SseError::UnknownField);
        }
        if field == b"id" && !value.contains(&0) {
            id = Some(
                std::str::from_utf8(value)
                    .map_err(|_| SseError::NotUtf8)?
                    .to_owned(),
            );
        }
        if field == b"data" {
            let v = std::str::from_utf8(value).map_err(|_| SseError::NotUtf8)?;
            match &mut data {
                Some(d) => {
                    d.push('\n');
                    d.push_str(v);
                }
                None => data = Some(v.to_owned()),
            }
        }
    }
    Ok((data, id))
}

/// An event carrying one JSON-RPC message, in the form the gateway writes.
pub(crate) fn event_for(message: &[u8]) -> Bytes {
    event_with_id(None, message)
}

/// An event carrying one JSON-RPC message, keeping the `id` of the event it
/// replaces (so a client can still resume from it).
pub(crate) fn event_with_id(id: Option<&str>, message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(message.len() + 32);
    if let Some(id) = id.filter(|i| !i.contains(['\n', '\r'])) {
        out.extend_from_slice(b"id: ");
        out.extend_from_slice(id.as_bytes());
        out.extend_from_slice(b"\n");
    }
    out.extend_from_slice(b"event: message\ndata: ");
    out.extend_from_slice(message);
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

/// An event that only moves the client's last event id (the message it
/// carried was withheld).
pub(crate) fn event_id_only(id: &str) -> Bytes {
    if id.contains(['\n', '\r']) {
        return Bytes::new();
    }
    let mut out = BytesMut::with_capacity(id.len() + 6);
    out.extend_from_slice(b"id: ");
    out.extend_from_slice(id.as_bytes());
    out.extend_from_slice(b"\n\n");
    out.freeze()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(input: &[&[u8]]) -> Vec<SseEvent> {
        let mut f = SseFramer::new(1 << 20);
        let mut out = Vec::new();
        for chunk in input {
            f.push(chunk);
            while let Some(e) = f.next_event().unwrap() {
                out.push(e);
            }
        }
        out
    }

    #[test]
    fn events_keep_their_bytes_and_join_data_lines() {
        let ev = all(&[b"id: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\n: ping\n\n"]);
        assert_eq!(ev.len(), 2);
        assert_eq!(
            &ev[0].raw[..],
            b"id: 1\nevent: message\ndata: {\"a\":\ndata: 1}\n\n"
        );
        assert_eq!(ev[0].data.as_deref(), Some("{\"a\":\n1}"));
        assert_eq!(ev[0].id.as_deref(), Some("1"));
        assert_eq!(ev[1].data, None);
        assert_eq!(
            &event_with_id(Some("7"), b"{}")[..],
            b"id: 7\nevent: message\ndata: {}\n\n"
        );
    }

    #[test]
    fn every_line_ending_and_every_split_point_work() {
        let stream: &[u8] = b"data:x\r\n\r\ndata: y\r\rdata:z\n\n";
        for cut in 0..stream.len() {
            let ev = all(&[&stream[..cut], &stream[cut..]]);
            let data: Vec<_> = ev.iter().map(|e| e.data.clone().unwrap()).collect();
            assert_eq!(data, ["x", "y", "z"], "cut at {cut}");
            let joined: Vec<u8> = ev.iter().flat_map(|e| e.raw.to_vec()).collect();
            assert_eq!(joined, stream);
        }
    }

    /// Clients decode a stream without its BOM, so the gateway reads it
    /// the same way, however the BOM is split.
    #[test]
    fn a_bom_that_starts_the_stream_is_dropped_wherever_it_is_cut() {
        let stream: &[u8] = b"\xef\xbb\xbfdata: {\"a\":1}\n\ndata: 2\n\n";
        for cut in 0..stream.len() {
            let ev = all(&[&stream[..cut], &stream[cut..]]);
            let data: Vec<_> = ev.iter().map(|e| e.data.clone().unwrap()).collect();
            assert_eq!(data, ["{\"a\":1}", "2"], "cut at {cut}");
            let joined: Vec<u8> = ev.iter().flat_map(|e| e.raw.to_vec()).collect();
            assert_eq!(joined, &stream[3..]);
        }
        // Only at the very start: later it is part of a field name.
        let mut f = SseFramer::new(1 << 20);
        f.push(b"data: 1\n\n\xef\xbb\xbfdata: 2\n\n");
        assert_eq!(f.next_event().unwrap().unwrap().data.as_deref(), Some("1"));
        assert_eq!(f.next_event().unwrap_err(), SseError::UnknownField);
        // Not a BOM after all: the bytes stay.
        let mut f = SseFramer::new(1 << 20);
        f.push(b"\xef");
        assert_eq!(f.next_event().unwrap(), None);
        f.push(b"x: 1\n\n");
        assert_eq!(f.next_event().unwrap_err(), SseError::UnknownField);
    }

    /// What one reader ignores another may take for data: a line that is no
    /// known field fails the stream instead of being forwarded.
    #[test]
    fn a_line_that_is_no_known_field_is_an_error() {
        for line in [
            &b" data: {}"[..],
            b"DATA: {}",
            b"Data:{}",
            b"data : {}",
            b"\tdata: {}",
            b"\xc2\xa0data: {}",
            b"\xe2\x80\x8bdata: {}",
            b"foo: bar",
            b"message",
            b"",
        ] {
            if line.is_empty() {
                continue;
            }
            let mut f = SseFramer::new(1 << 20);
            f.push(line);
            f.push(b"\n\n");
            assert_eq!(
                f.next_event(),
                Err(SseError::UnknownField),
                "{:?}",
                String::from_utf8_lossy(line)
            );
        }
        let known = all(&[b"event: message\nid: 3\nretry: 100\n: note\ndata: x\n\n"]);
        assert_eq!(known[0].data.as_deref(), Some("x"));
    }

    #[test]
    fn an_unfinished_event_waits_and_an_oversized_one_is_an_error() {
        let mut f = SseFramer::new(16);
        f.push(b"data: 12345");
        assert_eq!(f.next_event().unwrap(), None);
        f.push(b"678901234567890");
        assert_eq!(f.next_event().unwrap_err(), SseError::TooLarge(16));
    }

    #[test]
    fn data_without_colon_and_non_utf8() {
        assert_eq!(all(&[b"data\n\n"])[0].data.as_deref(), Some(""));
        let mut f = SseFramer::new(64);
        f.push(b"data: \xff\n\n");
        assert_eq!(f.next_event().unwrap_err(), SseError::NotUtf8);
    }
}
