//! Helpers shared by the fuzz targets: building a request head from text, an
//! offline gateway, and the independent checks the targets' properties use.
//! Nothing here calls the code under test to decide whether it was right.

pub mod forbidden;
pub mod form_oracle;
pub mod offline;

/// A request head and body from fuzz input written like an HTTP message:
/// `Name: value` lines, a blank line, then the body. Lines that are not a
/// valid header are skipped (the request check never sees what hyper would
/// refuse).
pub fn split_head(data: &[u8]) -> (http::request::Parts, bytes::Bytes) {
    let (head, body) = match find(data, b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (&data[..0], data),
    };
    let mut builder = http::Request::builder().method("POST").uri("/mcp");
    for line in head.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let value = trim(&line[colon + 1..]);
        let (Ok(name), Ok(value)) = (
            http::HeaderName::from_bytes(trim(&line[..colon])),
            http::HeaderValue::from_bytes(value),
        ) else {
            continue;
        };
        builder = builder.header(name, value);
    }
    let parts = match builder.body(()) {
        Ok(r) => r.into_parts().0,
        Err(_) => http::Request::new(()).into_parts().0,
    };
    (parts, bytes::Bytes::copy_from_slice(body))
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn trim(b: &[u8]) -> &[u8] {
    let start = b.iter().position(|c| *c != b' ').unwrap_or(b.len());
    let end = b.iter().rposition(|c| *c != b' ').map_or(start, |i| i + 1);
    &b[start..end.max(start)]
}

/// A tiny deterministic generator of chunk sizes, seeded from the input, so
/// a crash reproduces from its file alone.
pub struct Chunks(u32);

impl Chunks {
    pub fn new(seed: u8) -> Chunks {
        Chunks(u32::from(seed).wrapping_mul(2_654_435_761) | 1)
    }

    /// The next chunk length, 1..=max.
    pub fn next_len(&mut self, max: usize) -> usize {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 17;
        self.0 ^= self.0 << 5;
        1 + (self.0 as usize) % max.max(1)
    }
}

/// A config refusal says what and where; when it names `file` (and not
/// another file the config points to), its line and column (in bytes) are
/// inside `text` (line 0: the whole file).
pub fn config_error_points_inside(
    err: Option<&portcullis::config::ConfigError>,
    file: &str,
    text: &str,
) {
    let Some(e) = err else { return };
    assert!(
        !e.message.is_empty() && !e.field.is_empty(),
        "an empty error: {e:?}"
    );
    if !e.file.ends_with(file) || e.line == 0 {
        return;
    }
    let lines: Vec<&str> = text.split('\n').collect();
    assert!(
        e.line <= lines.len(),
        "line {} of a {}-line text: {e}",
        e.line,
        lines.len()
    );
    let line = lines[e.line - 1];
    assert!(
        e.column >= 1 && e.column <= line.len() + 1,
        "column {} of a line of {} bytes: {e}",
        e.column,
        line.len()
    );
}
