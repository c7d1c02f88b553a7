//! The envelope's own MessagePack reader and writer.
//!
//! Every hop decodes and encodes envelopes (four decodes and three encodes
//! per relayed operation), and serde's generic path costs several thousand
//! instructions for a dozen fields: a visitor per field, each key validated
//! as UTF-8 and matched as a string, the kind copied into a `String` first.
//! These write exactly the bytes `rmp_serde::to_vec_named` writes (the same
//! `rmp` writers, the same field order and skipped fields) and read the
//! shape it writes.
//!
//! The reader takes only what it fully understands: string keys, the
//! markers this release writes, scalar values under unknown keys, each
//! field once. Anything else (integer keys, a positional array, a nested
//! unknown field, a repeated key, a truncated input) returns `None`, and
//! the caller decodes with serde, so every input decodes to what it always
//! did, with the same errors. `wire_tests.rs` checks both against serde on
//! generated envelopes and mutated bytes.

use super::{Envelope, MessageKind, TraceContext};
use crate::wire::Reader;

/// Appends `envelope`, as `rmp_serde::to_vec_named` writes it, to `out`.
pub(super) fn encode_into(envelope: &Envelope, out: &mut Vec<u8>) {
    // Writes into a `Vec` cannot fail.
    let fields = 4
        + usize::from(envelope.correlation.is_some())
        + usize::from(envelope.deadline_ms.is_some())
        + usize::from(envelope.trace.is_some())
        + usize::from(envelope.max_message_bytes.is_some());
    let _ = rmp::encode::write_map_len(out, fields as u32);
    key(out, "protocol");
    let _ = rmp::encode::write_uint(out, u64::from(envelope.protocol));
    key(out, "id");
    let _ = rmp::encode::write_bin(out, envelope.id.as_bytes());
    if let Some(correlation) = &envelope.correlation {
        key(out, "correlation");
        let _ = rmp::encode::write_bin(out, correlation.as_bytes());
    }
    key(out, "kind");
    let _ = rmp::encode::write_str(out, envelope.kind.as_str());
    if let Some(deadline) = envelope.deadline_ms {
        key(out, "deadline_ms");
        let _ = rmp::encode::write_uint(out, deadline);
    }
    if let Some(trace) = &envelope.trace {
        key(out, "trace");
        let tracestate = !trace.tracestate.is_empty();
        let _ = rmp::encode::write_map_len(out, 1 + u32::from(tracestate));
        key(out, "traceparent");
        let _ = rmp::encode::write_str(out, &trace.traceparent);
        if tracestate {
            key(out, "tracestate");
            let _ = rmp::encode::write_str(out, &trace.tracestate);
        }
    }
    if let Some(max) = envelope.max_message_bytes {
        key(out, "max_message_bytes");
        let _ = rmp::encode::write_uint(out, max);
    }
    key(out, "body");
    let _ = rmp::encode::write_bin(out, &envelope.body);
}

fn key(out: &mut Vec<u8>, name: &str) {
    let _ = rmp::encode::write_str(out, name);
}

/// Reads the envelope `bytes` start with, and where it ends; `None` when
/// the bytes are not of the shape this reader takes (see the module
/// comment), and serde must decide.
pub(super) fn decode(bytes: &[u8]) -> Option<(Envelope, usize)> {
    let mut r = Reader::new(bytes);
    let mut envelope = Envelope::default();
    let mut seen = 0u8;
    for _ in 0..r.map_len()? {
        let name = r.str()?;
        let field = match name {
            b"protocol" => 0,
            b"id" => 1,
            b"correlation" => 2,
            b"kind" => 3,
            b"deadline_ms" => 4,
            b"trace" => 5,
            b"max_message_bytes" => 6,
            b"body" => 7,
            _ => {
                r.skip_scalar()?;
                continue;
            }
        };
        if seen & (1 << field) != 0 {
            return None;
        }
        seen |= 1 << field;
        match field {
            0 => envelope.protocol = u16::try_from(r.uint()?).ok()?,
            1 => envelope.id = r.uuid()?,
            2 => envelope.correlation = r.option(Reader::uuid)?,
            3 => envelope.kind = MessageKind::from_wire(r.text()?),
            4 => envelope.deadline_ms = r.option(Reader::uint)?,
            5 => envelope.trace = r.option(trace)?,
            6 => envelope.max_message_bytes = r.option(Reader::uint)?,
            _ => envelope.body = r.bin()?.to_vec(),
        }
    }
    Some((envelope, r.at()))
}

fn trace(r: &mut Reader<'_>) -> Option<TraceContext> {
    let mut trace = TraceContext::default();
    let mut seen = [false; 2];
    for _ in 0..r.map_len()? {
        let field = match r.str()? {
            b"traceparent" => 0,
            b"tracestate" => 1,
            _ => {
                r.skip_scalar()?;
                continue;
            }
        };
        if std::mem::replace(&mut seen[field], true) {
            return None;
        }
        let value = r.string()?;
        if field == 0 {
            trace.traceparent = value;
        } else {
            trace.tracestate = value;
        }
    }
    Some(trace)
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
