//! The one mapping of AWS errors to Orrery's codes, by AWS error code
//! first ([`CODES`]), then by HTTP status, so every type classifies a
//! throttle, a missing resource or a refusal the same way.

use aws_smithy_runtime_api::client::result::SdkError;
use aws_smithy_runtime_api::http::Response;
use aws_smithy_types::error::metadata::ProvideErrorMetadata;
use orrery_plugin_sdk::schema::ErrorCode;
use orrery_plugin_sdk::PluginError;

/// How long a throttled request should wait before it is sent again, when
/// AWS does not say: the SDK's own first backoff is of this order.
pub const THROTTLED_RETRY_MS: u64 = 1000;

/// AWS error codes (S3's, IAM's and SQS's, whose JSON and query protocols
/// spell some differently) and what they mean here. Codes not listed fall
/// back to the HTTP status ([`by_status`]).
pub const CODES: &[(&str, ErrorCode)] = &[
    // Throttling: retryable, after `THROTTLED_RETRY_MS`.
    ("Throttling", ErrorCode::Throttling),
    ("ThrottlingException", ErrorCode::Throttling),
    ("ThrottledException", ErrorCode::Throttling),
    ("RequestLimitExceeded", ErrorCode::Throttling),
    ("RequestThrottled", ErrorCode::Throttling),
    ("RequestThrottledException", ErrorCode::Throttling),
    ("SlowDown", ErrorCode::Throttling),
    ("TooManyRequestsException", ErrorCode::Throttling),
    (
        "ProvisionedThroughputExceededException",
        ErrorCode::Throttling,
    ),
    // Gone.
    ("NoSuchBucket", ErrorCode::NotFound),
    ("NoSuchBucketPolicy", ErrorCode::NotFound),
    ("NotFound", ErrorCode::NotFound),
    ("NoSuchEntity", ErrorCode::NotFound),
    ("QueueDoesNotExist", ErrorCode::NotFound),
    (
        "AWS.SimpleQueueService.NonExistentQueue",
        ErrorCode::NotFound,
    ),
    // Taken.
    ("BucketAlreadyOwnedByYou", ErrorCode::AlreadyExists),
    ("BucketAlreadyExists", ErrorCode::AlreadyExists),
    ("EntityAlreadyExists", ErrorCode::AlreadyExists),
    ("QueueAlreadyExists", ErrorCode::AlreadyExists),
    ("QueueNameExists", ErrorCode::AlreadyExists),
    // Busy: another change is under way, or SQS's 60 s after a delete.
    ("OperationAborted", ErrorCode::ResourceConflict),
    ("ConcurrentModification", ErrorCode::ResourceConflict),
    (
        "ConcurrentModificationException",
        ErrorCode::ResourceConflict,
    ),
    ("DeleteConflict", ErrorCode::ResourceConflict),
    ("BucketNotEmpty", ErrorCode::ResourceConflict),
    ("QueueDeletedRecently", ErrorCode::ResourceConflict),
    (
        "AWS.SimpleQueueService.QueueDeletedRecently",
        ErrorCode::ResourceConflict,
    ),
    // Refused: terminal.
    ("AccessDenied", ErrorCode::AccessDenied),
    ("AccessDeniedException", ErrorCode::AccessDenied),
    ("UnauthorizedOperation", ErrorCode::AccessDenied),
    ("AllAccessDisabled", ErrorCode::AccessDenied),
    ("InvalidAccessKeyId", ErrorCode::InvalidCredentials),
    ("InvalidClientTokenId", ErrorCode::InvalidCredentials),
    ("SignatureDoesNotMatch", ErrorCode::InvalidCredentials),
    ("ExpiredToken", ErrorCode::InvalidCredentials),
    ("ExpiredTokenException", ErrorCode::InvalidCredentials),
    ("InvalidToken", ErrorCode::InvalidCredentials),
    ("UnrecognizedClientException", ErrorCode::InvalidCredentials),
    ("ValidationError", ErrorCode::InvalidRequest),
    ("ValidationException", ErrorCode::InvalidRequest),
    ("InvalidInput", ErrorCode::InvalidRequest),
    ("MalformedPolicyDocument", ErrorCode::InvalidRequest),
    ("MalformedPolicy", ErrorCode::InvalidRequest),
    ("InvalidParameterValue", ErrorCode::InvalidRequest),
    ("InvalidAttributeName", ErrorCode::InvalidRequest),
    ("InvalidAttributeValue", ErrorCode::InvalidRequest),
    ("InvalidBucketName", ErrorCode::InvalidRequest),
    ("InvalidArgument", ErrorCode::InvalidRequest),
    ("InvalidRequest", ErrorCode::InvalidRequest),
    (
        "IllegalLocationConstraintException",
        ErrorCode::InvalidRequest,
    ),
    ("MalformedXML", ErrorCode::InvalidRequest),
    ("LimitExceeded", ErrorCode::ServiceLimitExceeded),
    ("TooManyBuckets", ErrorCode::ServiceLimitExceeded),
    ("OverLimit", ErrorCode::ServiceLimitExceeded),
    // AWS's side failed: retryable.
    ("InternalError", ErrorCode::ServiceInternalError),
    ("InternalFailure", ErrorCode::ServiceInternalError),
    ("ServiceFailure", ErrorCode::ServiceInternalError),
    ("ServiceUnavailable", ErrorCode::ServiceInternalError),
    (
        "ServiceUnavailableException",
        ErrorCode::ServiceInternalError,
    ),
    ("RequestTimeout", ErrorCode::ServiceTimeout),
    ("RequestTimeoutException", ErrorCode::ServiceTimeout),
];

/// What an HTTP status means when the code is not in [`CODES`].
pub fn by_status(status: u16) -> ErrorCode {
    match status {
        429 => ErrorCode::Throttling,
        401 | 403 => ErrorCode::AccessDenied,
        404 => ErrorCode::NotFound,
        409 => ErrorCode::ResourceConflict,
        400..=499 => ErrorCode::InvalidRequest,
        500..=599 => ErrorCode::ServiceInternalError,
        _ => ErrorCode::GeneralServiceException,
    }
}

/// The Orrery code of an AWS error code and HTTP status.
pub fn classify(code: Option<&str>, status: Option<u16>) -> ErrorCode {
    if let Some((_, mapped)) = code.and_then(|c| CODES.iter().find(|(k, _)| *k == c)) {
        return mapped.clone();
    }
    status.map_or(ErrorCode::GeneralServiceException, by_status)
}

/// The AWS error code of a failed call, if AWS gave one.
pub fn aws_code<E: ProvideErrorMetadata>(e: &SdkError<E, Response>) -> Option<&str> {
    match e {
        SdkError::ServiceError(s) => s.err().code(),
        _ => None,
    }
}

/// A failed SDK call as a [`PluginError`]; `what` names the resource
/// ("AWS::S3::Bucket `logs`").
pub fn from_sdk<E: ProvideErrorMetadata>(what: &str, e: SdkError<E, Response>) -> PluginError {
    let (code, why) = match &e {
        SdkError::TimeoutError(_) => (
            ErrorCode::ServiceTimeout,
            "AWS did not answer in time".to_owned(),
        ),
        SdkError::DispatchFailure(d) if d.is_timeout() => (
            ErrorCode::ServiceTimeout,
            "AWS did not answer in time".to_owned(),
        ),
        SdkError::DispatchFailure(_) => (
            ErrorCode::NetworkFailure,
            "the request could not be sent".to_owned(),
        ),
        SdkError::ConstructionFailure(_) => (
            ErrorCode::InvalidRequest,
            "the request could not be built".to_owned(),
        ),
        SdkError::ServiceError(s) => {
            let status = s.raw().status().as_u16();
            let err = s.err();
            let aws = err.code().unwrap_or("no error code");
            let message = err.message().unwrap_or("");
            (
                classify(err.code(), Some(status)),
                format!("AWS answered {status} {aws}: {message}"),
            )
        }
        SdkError::ResponseError(r) => {
            let status = r.raw().status().as_u16();
            (
                by_status(status),
                format!("AWS answered {status}, unreadable"),
            )
        }
        _ => (
            ErrorCode::GeneralServiceException,
            "the call failed".to_owned(),
        ),
    };
    let message = format!("{what}: {why}");
    if code == ErrorCode::Throttling {
        return PluginError::throttled(message, THROTTLED_RETRY_MS);
    }
    PluginError::new(code, message)
}

/// `Ok(None)` when the call failed with one of `absent`'s AWS codes (a
/// bucket without a tag set answers `NoSuchTagSet`), else as [`from_sdk`].
pub fn absent_if<T, E: ProvideErrorMetadata>(
    what: &str,
    result: Result<T, SdkError<E, Response>>,
    absent: &[&str],
) -> Result<Option<T>, PluginError> {
    match result {
        Ok(v) => Ok(Some(v)),
        Err(e) if aws_code(&e).is_some_and(|c| absent.contains(&c)) => Ok(None),
        Err(e) => Err(from_sdk(what, e)),
    }
}

/// A builder's refusal (a required field unset): the plugin's own bug or
/// an empty desired value.
pub fn build_error(what: &str, e: impl std::fmt::Display) -> PluginError {
    PluginError::invalid(format!("{what}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_classifies_each_family_of_aws_codes() {
        let throttles = [
            "Throttling",
            "ThrottlingException",
            "RequestLimitExceeded",
            "SlowDown",
            "TooManyRequestsException",
        ];
        for code in throttles {
            let mapped = classify(Some(code), Some(400));
            assert_eq!(mapped, ErrorCode::Throttling, "{code}");
            assert!(mapped.is_retryable(), "{code}");
        }
        for code in [
            "NoSuchBucket",
            "NoSuchEntity",
            "QueueDoesNotExist",
            "AWS.SimpleQueueService.NonExistentQueue",
        ] {
            assert_eq!(
                classify(Some(code), Some(400)),
                ErrorCode::NotFound,
                "{code}"
            );
        }
        for code in [
            "BucketAlreadyOwnedByYou",
            "EntityAlreadyExists",
            "QueueAlreadyExists",
        ] {
            assert_eq!(
                classify(Some(code), Some(409)),
                ErrorCode::AlreadyExists,
                "{code}"
            );
        }
        for code in [
            "AccessDenied",
            "ValidationError",
            "MalformedPolicyDocument",
            "InvalidClientTokenId",
        ] {
            assert!(
                !classify(Some(code), Some(400)).is_retryable(),
                "{code} is terminal"
            );
        }
        assert_eq!(
            classify(Some("AccessDenied"), Some(403)),
            ErrorCode::AccessDenied
        );
        assert_eq!(
            classify(Some("ValidationError"), Some(400)),
            ErrorCode::InvalidRequest
        );
    }

    #[test]
    fn unknown_codes_fall_back_to_the_status() {
        for status in [500, 502, 503, 504] {
            let code = classify(Some("SomethingNew"), Some(status));
            assert!(code.is_retryable(), "{status}: {code}");
        }
        assert_eq!(classify(None, Some(429)), ErrorCode::Throttling);
        assert_eq!(
            classify(Some("SomethingNew"), Some(404)),
            ErrorCode::NotFound
        );
        assert!(!classify(Some("SomethingNew"), Some(400)).is_retryable());
        assert_eq!(classify(None, None), ErrorCode::GeneralServiceException);
    }

    #[test]
    fn every_code_is_listed_once() {
        let mut seen = std::collections::HashSet::new();
        for (code, _) in CODES {
            assert!(seen.insert(*code), "{code} listed twice");
        }
    }
}
