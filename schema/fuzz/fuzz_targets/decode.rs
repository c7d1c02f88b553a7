//! Feeds arbitrary bytes to every decoder that reads untrusted input: whole
//! messages, envelope bodies by kind, and the stdio frame decoder with the
//! input split into arbitrary chunks. Any panic, overflow or runaway
//! allocation is a bug; errors are the expected outcome.

#![no_main]

use bytes::BytesMut;
use libfuzzer_sys::fuzz_target;
use orrery_schema::{
    decode, Announcement, Cancel, Envelope, FrameDecoder, ListResult, MessageKind, ProgressEvent,
    ProtocolError, Request, Value,
};

/// Decodes an envelope's body as the message its kind names.
fn decode_body(envelope: &Envelope) {
    match envelope.kind {
        MessageKind::Announce => drop(envelope.body::<Announcement>()),
        MessageKind::Progress => drop(envelope.body::<ProgressEvent>()),
        MessageKind::ListResult => drop(envelope.body::<ListResult>()),
        MessageKind::Cancel => drop(envelope.body::<Cancel>()),
        MessageKind::Error => drop(envelope.body::<ProtocolError>()),
        _ => drop(Request::from_envelope(envelope)),
    }
}

fuzz_target!(|data: &[u8]| {
    // Whole messages.
    if let Ok(envelope) = decode::<Envelope>(data) {
        decode_body(&envelope);
    }
    let _ = decode::<Announcement>(data);
    let _ = decode::<ProgressEvent>(data);
    let _ = decode::<Value>(data);

    // A stream of frames. The first byte picks the chunk size and whether
    // the frame limit is small (to exercise oversized-frame skipping).
    let Some((&control, stream)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(control & 0x3f) + 1;
    let max_frame = if control & 0x40 != 0 { 64 } else { 1 << 20 };
    let mut frames = FrameDecoder::new(max_frame);
    let mut buf = BytesMut::new();
    for piece in stream.chunks(chunk) {
        buf.extend_from_slice(piece);
        // Every call either consumes bytes or asks for more.
        loop {
            match frames.decode(&mut buf) {
                Ok(Some(frame)) => {
                    if let Ok(envelope) = decode::<Envelope>(&frame) {
                        decode_body(&envelope);
                    }
                }
                Ok(None) => break,
                Err(_) => {}
            }
        }
    }
});
