//! The error-code vocabulary and the one place that classifies each code.

use crate::open_enum::open_enum;

open_enum! {
    /// Why an operation failed. Plugin codes follow the cloud-control
    /// vocabulary IaC authors know; the runtime adds its own below them.
    #[derive(Default)]
    pub enum ErrorCode {
        /// The requested change touches a field that cannot be updated in place.
        NotUpdatable = "NotUpdatable",
        /// The request is invalid: bad or missing properties, a path outside the allowed root.
        InvalidRequest = "InvalidRequest",
        /// The credentials lack permission for the operation.
        AccessDenied = "AccessDenied",
        /// The credentials are missing, expired or malformed.
        InvalidCredentials = "InvalidCredentials",
        /// A resource with the same identifier already exists.
        AlreadyExists = "AlreadyExists",
        /// The resource does not exist.
        NotFound = "NotFound",
        /// Another operation on the same resource is in progress.
        ResourceConflict = "ResourceConflict",
        /// The provider rejected the request because of its rate limit.
        Throttling = "Throttling",
        /// An account or service quota is exhausted.
        ServiceLimitExceeded = "ServiceLimitExceeded",
        /// The resource did not reach the desired state in time.
        NotStabilized = "NotStabilized",
        /// The provider returned an error the plugin cannot classify.
        GeneralServiceException = "GeneralServiceException",
        /// The provider failed internally.
        ServiceInternalError = "ServiceInternalError",
        /// The provider did not answer in time.
        ServiceTimeout = "ServiceTimeout",
        /// The network between plugin and provider failed.
        NetworkFailure = "NetworkFailure",
        /// The plugin itself failed (a bug, a panic in a handler).
        InternalFailure = "InternalFailure" [default],
        /// No plugin of that name is installed where the request arrived.
        PluginNotFound = "PluginNotFound",
        /// No satellite serves the plugin for the target; certain when it is said, so not retried (start or pin a satellite, then apply again).
        NoSatellite = "NoSatellite",
        /// A resource this one depends on failed, so this one was not attempted.
        DependencyFailure = "DependencyFailure",
        /// The plugin process exited or stopped answering while the request was in flight.
        PluginUnavailable = "PluginUnavailable",
        /// The plugin is crash-looping (or has not completed a handshake yet, or the request's target keeps crashing it) and is not being sent work until it recovers.
        PluginUnhealthy = "PluginUnhealthy",
        /// The request's deadline passed before an answer arrived.
        DeadlineExceeded = "DeadlineExceeded",
        /// The peer speaks an unsupported protocol major version.
        UnsupportedProtocol = "UnsupportedProtocol",
        /// The bytes received did not decode as the expected message.
        MalformedMessage = "MalformedMessage",
        /// The receiver does not know the message kind or operation.
        UnsupportedOperation = "UnsupportedOperation",
        /// The satellite is draining or at capacity; send the request elsewhere.
        Unavailable = "Unavailable",
        /// The operation was canceled before it finished.
        Canceled = "Canceled",
        /// The request or its answer is larger than a hop on its way can carry (a NATS server's `max_payload`, the frame limit); retrying cannot help.
        MessageTooLarge = "MessageTooLarge",
    }
}

impl ErrorCode {
    /// Whether an operation that failed with this code may be retried as is.
    ///
    /// This is the only place the classification lives. Codes this release
    /// does not know are terminal: retrying an unknown failure could
    /// duplicate a real-world effect, and a human can always re-apply.
    /// Failures that are certain are terminal at once: no satellite serving
    /// a target (NATS answers "no responders" only when no subscription
    /// exists, so the next attempt a moment later meets the same fleet),
    /// a plugin not installed, and the plugin's own deterministic refusals
    /// (`InvalidRequest`, `NotFound`, `AlreadyExists`…).
    pub fn is_retryable(&self) -> bool {
        match self {
            ErrorCode::ResourceConflict
            | ErrorCode::Throttling
            | ErrorCode::NotStabilized
            | ErrorCode::ServiceInternalError
            | ErrorCode::ServiceTimeout
            | ErrorCode::NetworkFailure
            | ErrorCode::GeneralServiceException
            | ErrorCode::PluginUnavailable
            | ErrorCode::PluginUnhealthy
            | ErrorCode::DeadlineExceeded
            | ErrorCode::Unavailable => true,
            ErrorCode::NotUpdatable
            | ErrorCode::InvalidRequest
            | ErrorCode::AccessDenied
            | ErrorCode::InvalidCredentials
            | ErrorCode::AlreadyExists
            | ErrorCode::NotFound
            | ErrorCode::ServiceLimitExceeded
            | ErrorCode::InternalFailure
            | ErrorCode::PluginNotFound
            | ErrorCode::NoSatellite
            | ErrorCode::DependencyFailure
            | ErrorCode::UnsupportedProtocol
            | ErrorCode::MalformedMessage
            | ErrorCode::UnsupportedOperation
            | ErrorCode::Canceled
            | ErrorCode::MessageTooLarge
            | ErrorCode::Unknown(_) => false,
        }
    }

    /// Whether the outcome of the failed attempt is unknown: the request may
    /// or may not have taken effect, so a retry must first read the resource.
    pub fn is_ambiguous(&self) -> bool {
        matches!(
            self,
            ErrorCode::ServiceTimeout
                | ErrorCode::NetworkFailure
                | ErrorCode::PluginUnavailable
                | ErrorCode::DeadlineExceeded
        )
    }
}
