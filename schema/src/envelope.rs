//! The envelope every message travels in, on every hop.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::codec::{self, DecodeError, EncodeError};
use crate::open_enum::open_enum;

/// The protocol major version this release speaks. Additive changes (new
/// fields, new enum values, new message kinds) never bump it; a peer that
/// sees a different major refuses the link with a message naming both.
pub const PROTOCOL_MAJOR: u16 = 1;

open_enum! {
    /// What an envelope's body holds.
    pub enum MessageKind {
        /// Plugin → host, first frame: the plugin's [`crate::Announcement`].
        Announce = "announce",
        /// A [`crate::CreateRequest`].
        Create = "create",
        /// A [`crate::ReadRequest`].
        Read = "read",
        /// An [`crate::UpdateRequest`].
        Update = "update",
        /// A [`crate::DeleteRequest`].
        Delete = "delete",
        /// A [`crate::StatusRequest`].
        Status = "status",
        /// A [`crate::ListRequest`].
        List = "list",
        /// The answer to create, read, update, delete or status: a [`crate::ProgressEvent`].
        Progress = "progress",
        /// The answer to list: a [`crate::ListResult`].
        ListResult = "list_result",
        /// Cancel the request whose message id is in `correlation`: a [`crate::Cancel`].
        Cancel = "cancel",
        /// A liveness probe; answered with `pong`. Empty body.
        Ping = "ping",
        /// The answer to `ping`. Empty body.
        Pong = "pong",
        /// A request could not be understood: a [`crate::ProtocolError`].
        Error = "error",
    }
}

impl Default for MessageKind {
    fn default() -> Self {
        MessageKind::Unknown(String::new())
    }
}

/// W3C trace context, carried so one apply is one trace across processes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct TraceContext {
    /// The `traceparent` header value.
    pub traceparent: String,
    /// The `tracestate` header value; often empty.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub tracestate: String,
}

/// The outer message on every hop: plugin frames and NATS payloads alike.
///
/// The body is itself an encoded message (a MessagePack map) carried as
/// `bin`, so a relay can forward it without decoding and a receiver can
/// reject an unknown kind without understanding its body.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Envelope {
    /// The sender's protocol major version.
    pub protocol: u16,
    /// This message's id: a UUID v7, as 16 bytes.
    pub id: Uuid,
    /// For answers and cancels: the id of the request message they refer to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub correlation: Option<Uuid>,
    /// What the body holds.
    pub kind: MessageKind,
    /// When the sender stops waiting, in milliseconds since the Unix epoch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<u64>,
    /// Trace context of the span that sent the message.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceContext>,
    /// The largest message, envelope included, the sender accepts back on
    /// this hop: on a request, the largest answer; on an announcement or a
    /// describe reply, the largest request. Absent: the protocol's
    /// [`MAX_MESSAGE_BYTES`](crate::codec::MAX_MESSAGE_BYTES).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_message_bytes: Option<u64>,
    /// The encoded body.
    #[serde(with = "serde_bytes")]
    pub body: Vec<u8>,
}

impl Envelope {
    /// A new message of `kind` carrying `body`, with a fresh UUID v7.
    ///
    /// # Errors
    ///
    /// As [`codec::encode`] of `body`: it is over the
    /// message limit, or cannot be serialized.
    pub fn new<T: Serialize>(kind: MessageKind, body: &T) -> Result<Self, EncodeError> {
        Ok(Envelope::with_body(kind, codec::encode(body)?))
    }

    /// A new message of `kind` carrying `body`, already encoded, with a
    /// fresh UUID v7.
    pub fn with_body(kind: MessageKind, body: Vec<u8>) -> Self {
        Envelope {
            protocol: PROTOCOL_MAJOR,
            id: Uuid::now_v7(),
            correlation: None,
            kind,
            deadline_ms: None,
            trace: None,
            max_message_bytes: None,
            body,
        }
    }

    /// An answer to this message: correlated to its id, same trace.
    ///
    /// # Errors
    ///
    /// As [`Envelope::new`].
    pub fn reply<T: Serialize>(&self, kind: MessageKind, body: &T) -> Result<Self, EncodeError> {
        Ok(self.reply_with_body(kind, codec::encode(body)?))
    }

    /// An answer to this message carrying `body`, already encoded.
    pub fn reply_with_body(&self, kind: MessageKind, body: Vec<u8>) -> Self {
        let mut reply = Envelope::with_body(kind, body);
        reply.correlation = Some(self.id);
        reply.trace.clone_from(&self.trace);
        reply
    }

    /// Sets the deadline.
    pub fn with_deadline_ms(mut self, deadline_ms: Option<u64>) -> Self {
        self.deadline_ms = deadline_ms;
        self
    }

    /// Sets the largest message the sender accepts back.
    pub fn with_max_message_bytes(mut self, max: Option<u64>) -> Self {
        self.max_message_bytes = max;
        self
    }

    /// The largest message the sender accepts back: its
    /// `max_message_bytes`, never above the protocol's limit.
    pub fn accepts_bytes(&self) -> usize {
        self.max_message_bytes
            .map_or(codec::MAX_MESSAGE_BYTES, |max| {
                usize::try_from(max).unwrap_or(usize::MAX)
            })
            .min(codec::MAX_MESSAGE_BYTES)
    }

    /// An upper bound of this envelope's encoded size: its body plus the
    /// most its other fields can take. Cheaper than encoding it to find out.
    pub fn encoded_len_bound(&self) -> usize {
        // Keys, markers and the fixed-size fields take well under 256 bytes;
        // the kind and the trace context are the only variable ones.
        let trace = self
            .trace
            .as_ref()
            .map_or(0, |t| t.traceparent.len() + t.tracestate.len());
        256 + self.kind.as_str().len() + trace + self.body.len()
    }

    /// This envelope's exact encoded size, found by encoding everything
    /// but the body: cheap however large the body is.
    ///
    /// # Errors
    ///
    /// As [`codec::encode`] of the envelope without its body.
    pub fn encoded_len(&self) -> Result<usize, EncodeError> {
        let header = Envelope {
            protocol: self.protocol,
            id: self.id,
            correlation: self.correlation,
            kind: self.kind.clone(),
            deadline_ms: self.deadline_ms,
            trace: self.trace.clone(),
            max_message_bytes: self.max_message_bytes,
            body: Vec::new(),
        };
        // MessagePack `bin`: a 2, 3 or 5 byte header, then the bytes.
        let bin_header = |n: usize| match n {
            0..=0xff => 2,
            0x100..=0xffff => 3,
            _ => 5,
        };
        let len = codec::encode(&header)?.len();
        Ok(len - bin_header(0) + bin_header(self.body.len()) + self.body.len())
    }

    /// Sets the trace context.
    pub fn with_trace(mut self, trace: Option<TraceContext>) -> Self {
        self.trace = trace;
        self
    }

    /// Decodes the body as `T`.
    ///
    /// # Errors
    ///
    /// As [`codec::decode`]: the body is not a `T`, is
    /// over the message limit, or has bytes after the message.
    pub fn body<T: DeserializeOwned>(&self) -> Result<T, DecodeError> {
        codec::decode(&self.body)
    }

    /// Encodes the whole envelope.
    ///
    /// # Errors
    ///
    /// As [`Envelope::encode_into`].
    pub fn encode(&self) -> Result<Vec<u8>, EncodeError> {
        let mut out = Vec::with_capacity(self.encoded_len_bound().min(codec::MAX_MESSAGE_BYTES));
        self.encode_into(&mut out)?;
        Ok(out)
    }

    /// Appends the encoded envelope to `out`: the bytes of [`Envelope::encode`]
    /// and of [`codec::encode`] (`rmp_serde::to_vec_named` is `write_named`
    /// into a `Vec`). On error `out` is left as it was.
    ///
    /// # Errors
    ///
    /// [`EncodeError::TooLarge`] when the envelope, body included, encodes to
    /// more than [`MAX_MESSAGE_BYTES`](crate::codec::MAX_MESSAGE_BYTES);
    /// [`EncodeError::Serialize`] when it cannot be serialized.
    pub fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let start = out.len();
        if let Err(e) = rmp_serde::encode::write_named(out, self) {
            out.truncate(start);
            return Err(e.into());
        }
        let len = out.len() - start;
        if len > codec::MAX_MESSAGE_BYTES {
            out.truncate(start);
            return Err(EncodeError::TooLarge {
                len,
                max: codec::MAX_MESSAGE_BYTES,
            });
        }
        Ok(())
    }

    /// Decodes a whole envelope from untrusted bytes.
    ///
    /// # Errors
    ///
    /// As [`codec::decode`]: not an envelope, over the
    /// message limit, or bytes after it.
    pub fn decode(bytes: &[u8]) -> Result<Self, DecodeError> {
        codec::decode(bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encoded_len_is_the_encoded_size_for_every_bin_header() {
        for len in [0, 1, 255, 256, 65_535, 65_536, 1 << 20] {
            let envelope = Envelope {
                correlation: Some(Uuid::from_u128(7)),
                kind: MessageKind::ListResult,
                trace: Some(TraceContext {
                    traceparent: "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01".into(),
                    tracestate: String::new(),
                }),
                max_message_bytes: Some(1 << 20),
                body: vec![0xc0; len],
                ..Envelope::default()
            };
            let exact = envelope.encode().unwrap().len();
            assert_eq!(envelope.encoded_len().unwrap(), exact, "body of {len}");
            assert!(envelope.encoded_len_bound() >= exact, "body of {len}");
        }
    }
}
