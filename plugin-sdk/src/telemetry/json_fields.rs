//! Span fields for JSON log lines, written straight into the span's field
//! text.
//!
//! `tracing-subscriber`'s own `JsonFields` builds a map of
//! `serde_json::Value`s for every new span and, when a field is recorded
//! later, parses the span's fields and writes them all again. A plugin
//! opens a span per request and the relay records three fields on its
//! span per request, so that was a fifth of a plugin's instructions per
//! operation (callgrind). These are the same JSON objects (the event
//! formatter parses them back when a line is written inside the span),
//! with a later field appended to the object instead.

use std::fmt::{self, Write};

use tracing::field::{Field, Visit};
use tracing::span::Record;
use tracing_subscriber::field::RecordFields;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FormatFields, FormattedFields};

/// Formats span fields as one JSON object.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct JsonFields;

impl<'writer> FormatFields<'writer> for JsonFields {
    fn format_fields<R: RecordFields>(
        &self,
        mut writer: Writer<'writer>,
        fields: R,
    ) -> fmt::Result {
        // A new span's text goes into an empty `String`, which written to
        // piece by piece grows by reallocation four or five times. It is
        // built in a buffer kept per thread instead and written in one go.
        // Should a field's formatting format fields again, the inner call
        // finds the buffer taken and builds its own.
        TEXT.with(|text| match text.try_borrow_mut() {
            Ok(mut text) => {
                text.clear();
                let result = object(&mut text, fields);
                let written = result.and_then(|()| writer.write_str(&text));
                if text.capacity() > TEXT_KEPT {
                    *text = String::new();
                }
                written
            }
            Err(_) => {
                let mut text = String::new();
                object(&mut text, fields)?;
                writer.write_str(&text)
            }
        })
    }

    fn add_fields(
        &self,
        current: &'writer mut FormattedFields<Self>,
        fields: &Record<'_>,
    ) -> fmt::Result {
        if current.fields.is_empty() {
            return self.format_fields(current.as_writer(), fields);
        }
        // Reopen the object, append, close it again. A field recorded
        // twice appears twice; the last one wins when the line is parsed.
        if current.fields.pop() != Some('}') {
            return Err(fmt::Error);
        }
        let first = current.fields == "{";
        let result = {
            let mut visitor = Visitor::new(&mut current.fields, first);
            fields.record(&mut visitor);
            visitor.result
        };
        current.fields.push('}');
        result
    }
}

thread_local! {
    static TEXT: std::cell::RefCell<String> = const { std::cell::RefCell::new(String::new()) };
}

/// The most the per-thread buffer keeps between spans.
const TEXT_KEPT: usize = 4096;

/// Writes `fields` as one JSON object.
fn object<R: RecordFields>(out: &mut String, fields: R) -> fmt::Result {
    out.push('{');
    let mut visitor = Visitor::new(out, true);
    fields.record(&mut visitor);
    visitor.result?;
    out.push('}');
    Ok(())
}

/// Writes fields into a `String` directly: every piece is a `push_str`
/// the compiler sees through, not a call through `dyn fmt::Write`.
struct Visitor<'a> {
    out: &'a mut String,
    first: bool,
    result: fmt::Result,
}

impl<'a> Visitor<'a> {
    fn new(out: &'a mut String, first: bool) -> Self {
        Visitor {
            out,
            first,
            result: Ok(()),
        }
    }

    /// Writes `"name":` and then the value `write` writes, unless the
    /// field is one the line shows elsewhere.
    fn entry(&mut self, field: &Field, write: impl FnOnce(&mut String) -> fmt::Result) {
        let name = field.name();
        if self.result.is_err() || name.starts_with("log.") {
            return;
        }
        let name = name.strip_prefix("r#").unwrap_or(name);
        if !std::mem::take(&mut self.first) {
            self.out.push(',');
        }
        string(self.out, name);
        self.out.push(':');
        self.result = write(self.out);
    }
}

impl Visit for Visitor<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.entry(field, |out| {
            string(out, value);
            Ok(())
        });
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.entry(field, |out| {
            out.push('"');
            write!(Escaped(out), "{value:?}")?;
            out.push('"');
            Ok(())
        });
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        self.entry(field, |out| write!(out, "{value}"));
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        self.entry(field, |out| {
            out.push_str(if value { "true" } else { "false" });
            Ok(())
        });
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        // JSON has no NaN or infinity; `serde_json` writes them as null.
        self.entry(field, |out| {
            if value.is_finite() {
                write!(out, "{value}")
            } else {
                out.push_str("null");
                Ok(())
            }
        });
    }

    fn record_bytes(&mut self, field: &Field, value: &[u8]) {
        self.entry(field, |out| {
            out.push('[');
            for (i, b) in value.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write!(out, "{b}")?;
            }
            out.push(']');
            Ok(())
        });
    }
}

fn string(out: &mut String, value: &str) {
    out.push('"');
    escape_into(out, value);
    out.push('"');
}

/// Appends `s` as the inside of a JSON string, escaped as `serde_json`
/// escapes it.
fn escape_into(out: &mut String, s: &str) {
    // Most field text needs no escape: one scan, one copy.
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        out.push_str(s);
        return;
    }
    let mut run = 0;
    for (i, b) in s.bytes().enumerate() {
        let escape = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0..=0x1f => "",
            _ => continue,
        };
        out.push_str(&s[run..i]);
        if escape.is_empty() {
            // Writing to a `String` cannot fail.
            let _ = write!(out, "\\u{b:04x}");
        } else {
            out.push_str(escape);
        }
        run = i + 1;
    }
    out.push_str(&s[run..]);
}

/// A `fmt::Write` that escapes what it is given into a `String`.
struct Escaped<'a>(&'a mut String);

impl Write for Escaped<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        escape_into(self.0, s);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io;
    use std::sync::{Arc, Mutex};

    use serde_json::Value;
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl io::Write for Lines {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    /// The JSON line of one event inside two spans with every kind of
    /// field, some recorded after the span opened, written with `ours`
    /// or with `tracing-subscriber`'s own field formatter.
    fn line(ours: bool) -> Value {
        let lines = Lines::default();
        let writer = {
            let lines = lines.clone();
            move || lines.clone()
        };
        let layer = tracing_subscriber::fmt::layer()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_writer(writer);
        let subscriber: Box<dyn tracing::Subscriber + Send + Sync> = if ours {
            Box::new(tracing_subscriber::registry().with(layer.fmt_fields(JsonFields)))
        } else {
            Box::new(tracing_subscriber::registry().with(layer))
        };
        tracing::subscriber::with_default(subscriber, || {
            let outer = tracing::info_span!("outer", empty = tracing::field::Empty);
            let _outer = outer.enter();
            let text = "quote \" backslash \\ newline \n tab \t bell \u{7} é 日本 \u{7f}";
            let span = tracing::info_span!(
                "plugin.handle",
                otel.kind = "server",
                text,
                display = %"shown \"as\" display",
                debug = ?("a", 1),
                int = -3i64,
                uint = 7u64,
                float = 1.5f64,
                nan = f64::NAN,
                yes = true,
                r#type = "raw",
                later = tracing::field::Empty,
                twice = tracing::field::Empty,
            );
            outer.record("empty", "filled");
            span.record("later", "recorded \"later\"");
            span.record("twice", 1u64);
            span.record("twice", 2u64);
            span.in_scope(|| tracing::info!(answer = 42, "inside"));
        });
        let bytes = lines.0.lock().unwrap().clone();
        let text = String::from_utf8(bytes).unwrap();
        let mut lines = text.lines();
        let first = lines.next().expect("a line");
        assert!(lines.next().is_none(), "{text}");
        serde_json::from_str(first).unwrap()
    }

    #[test]
    fn span_fields_read_as_tracing_subscribers_own() {
        let (ours, theirs) = (line(true), line(false));
        assert_eq!(ours["span"], theirs["span"]);
        assert_eq!(ours["spans"], theirs["spans"]);
        assert_eq!(ours["fields"], theirs["fields"]);
        let span = &ours["span"];
        assert_eq!(
            span["text"],
            "quote \" backslash \\ newline \n tab \t bell \u{7} é 日本 \u{7f}"
        );
        assert_eq!(span["display"], "shown \"as\" display");
        assert_eq!(span["debug"], "(\"a\", 1)");
        assert_eq!(span["int"], -3);
        assert_eq!(span["uint"], 7);
        assert_eq!(span["float"], 1.5);
        assert_eq!(span["nan"], Value::Null);
        assert_eq!(span["yes"], true);
        assert_eq!(span["type"], "raw");
        assert_eq!(span["later"], "recorded \"later\"");
        assert_eq!(span["twice"], 2);
        assert_eq!(span["otel.kind"], "server");
        assert_eq!(ours["spans"][0]["name"], "outer");
        assert_eq!(ours["spans"][0]["empty"], "filled");
    }

    #[test]
    fn with_the_buffer_taken_fields_are_written_straight_through() {
        let buffered = line(true);
        let direct = TEXT.with(|text| {
            let _taken = text.borrow_mut();
            line(true)
        });
        assert_eq!(direct["span"], buffered["span"]);
        assert_eq!(direct["spans"], buffered["spans"]);
        assert_eq!(direct["span"]["later"], "recorded \"later\"");
    }
}
