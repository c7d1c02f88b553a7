//! Answers given on a plugin's behalf: by the satellite when the plugin
//! cannot answer, and by the in-process bus when its host fails.

use orrery_schema::{
    Envelope, ErrorCode, ListResult, MessageKind, OperationStatus, ProgressEvent, ProtocolError,
    Request,
};

/// A protocol error in reply to `to` (or unsolicited when the request could
/// not be read at all).
pub fn protocol_error(to: Option<&Envelope>, code: ErrorCode, message: String) -> Envelope {
    let body = ProtocolError { code, message };
    let reply = match to {
        Some(envelope) => envelope.reply(MessageKind::Error, &body),
        None => Envelope::new(MessageKind::Error, &body),
    };
    reply.unwrap_or_default()
}

/// The answer a satellite gives on behalf of a plugin that could not answer.
pub fn failure_answer(envelope: &Envelope, code: ErrorCode, message: String) -> Envelope {
    let reply = match Request::from_envelope(envelope) {
        Ok(Request::List(r)) => envelope.reply(
            MessageKind::ListResult,
            &ListResult {
                request_id: r.request_id,
                resource_type: r.resource_type,
                status: OperationStatus::Failure,
                error_code: Some(code),
                message: Some(message),
                ..Default::default()
            },
        ),
        Ok(request) => envelope.reply(
            MessageKind::Progress,
            &ProgressEvent::failure(
                request.operation(),
                request.request_id(),
                request.resource_type(),
                code,
                message,
            ),
        ),
        Err(_) => return protocol_error(Some(envelope), code, message),
    };
    reply.unwrap_or_default()
}
