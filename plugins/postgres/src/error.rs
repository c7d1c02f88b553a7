//! PostgreSQL failures in the error vocabulary: what the runtime should do
//! next decides the code (retry a catalog race, stop on a bad password).

use orrery_plugin_sdk::schema::ErrorCode;
use orrery_plugin_sdk::PluginError;
use tokio_postgres::error::{DbError, SqlState};

/// `e`, raised while working on `what` (e.g. ``Postgres::Role `app` ``).
pub fn pg(what: &str, e: &tokio_postgres::Error) -> PluginError {
    match e.as_db_error() {
        Some(db) => from_db(what, db),
        None => from_link(what, e),
    }
}

fn from_db(what: &str, db: &DbError) -> PluginError {
    let code = code_of(db);
    let mut message = format!("{what}: {}", db.message());
    if let Some(detail) = db.detail() {
        message.push_str(&format!(" ({})", detail.replace('\n', "; ")));
    }
    message.push_str(&format!(" [SQLSTATE {}]", db.code().code()));
    PluginError::new(code, message)
}

fn code_of(db: &DbError) -> ErrorCode {
    let state = db.code();
    // GRANT and REVOKE rewrite one catalog row; two at once on the same
    // object lose the race with this internal error. Trying again works.
    if *state == SqlState::INTERNAL_ERROR && db.message().contains("tuple concurrently") {
        // Logged: the runtime retries it, and nothing else would show it happened.
        tracing::warn!(message = db.message(), "catalog race: retryable");
        return ErrorCode::ResourceConflict;
    }
    match state.code() {
        "28P01" | "28000" => ErrorCode::InvalidCredentials,
        "42501" => ErrorCode::AccessDenied,
        "42710" | "42P04" | "42P06" | "42P07" => ErrorCode::AlreadyExists,
        "42704" | "3D000" | "3F000" | "42P01" | "42883" => ErrorCode::NotFound,
        // Dependent objects, a database in use, serialization and deadlocks.
        "2BP01" | "55006" | "40001" | "40P01" | "55P03" => ErrorCode::ResourceConflict,
        "53300" => ErrorCode::Throttling,
        c if c.starts_with("08") => ErrorCode::NetworkFailure,
        c if c.starts_with("57") || c.starts_with("XX") || c.starts_with("53") => {
            ErrorCode::ServiceInternalError
        }
        // Data exceptions, syntax and access rules, invalid transaction
        // state, a feature the server lacks: the request is what is wrong.
        c if ["22", "42", "0L", "0A", "25", "2F", "0P"]
            .iter()
            .any(|p| c.starts_with(p)) =>
        {
            ErrorCode::InvalidRequest
        }
        _ => ErrorCode::GeneralServiceException,
    }
}

fn from_link(what: &str, e: &tokio_postgres::Error) -> PluginError {
    let mut cause = e.to_string();
    let mut source = std::error::Error::source(e);
    let mut tls = false;
    while let Some(s) = source {
        tls |= s.downcast_ref::<rustls::Error>().is_some();
        cause.push_str(&format!(": {s}"));
        source = s.source();
    }
    if tls {
        // A certificate that does not verify will not verify next time.
        return PluginError::new(ErrorCode::InvalidRequest, format!("{what}: TLS: {cause}"));
    }
    PluginError::new(ErrorCode::NetworkFailure, format!("{what}: {cause}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn link_failures_are_retryable() {
        let err = tokio_postgres::Error::__private_api_timeout();
        let mapped = pg("Postgres::Role `r`", &err);
        assert_eq!(mapped.code, ErrorCode::NetworkFailure);
        assert!(mapped.message.starts_with("Postgres::Role `r`"), "{mapped}");
    }
}
