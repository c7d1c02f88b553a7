//! What a state store call can fail with, on either backend.

/// Why the store failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database failed.
    #[error("state store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// A move (`moved:`) would put a record where one is recorded already.
    #[error("state store: cannot move a resource of stack `{stack}` to `{label}`: a resource is recorded there already")]
    MoveTaken {
        /// The stack.
        stack: String,
        /// The address taken.
        label: String,
    },
    /// A stored record does not decode.
    #[error("state store: record of `{label}` does not decode: {reason}")]
    Corrupt {
        /// The record.
        label: String,
        /// Why.
        reason: String,
    },
    /// The data directory could not be created.
    #[error("state store: cannot create {path}: {source}")]
    Dir {
        /// The directory.
        path: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The secret key's file is missing, unreadable, or not this store's.
    #[error("state store: secret key file {path}: {reason}")]
    SecretKey {
        /// The key file.
        path: String,
        /// Why.
        reason: String,
    },
    /// Another server serves this data directory (SQLite is for one).
    #[error("state store: another `orrery primary` (process {holder}) serves {dir}; the embedded SQLite store is for one server: stop it, or run several primaries on PostgreSQL (--database-url)")]
    Served {
        /// The data directory.
        dir: String,
        /// The process holding it, as it wrote itself.
        holder: String,
    },
    /// The store was written by a newer release than this one.
    #[error("state store: {what} {found} was written by a newer release (this one knows up to {supported}); upgrade orrery")]
    NewerFormat {
        /// `record format` (SQLite) or `schema version` (PostgreSQL).
        what: &'static str,
        /// What the store holds.
        found: i64,
        /// The newest this release reads.
        supported: i64,
    },
    /// PostgreSQL answered with an error.
    #[error("state store (PostgreSQL): {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// PostgreSQL cannot be reached (connect failed, or its worker stopped).
    #[error("state store: PostgreSQL at {target} is unavailable: {reason}")]
    Unavailable {
        /// Host, port and database (never the password).
        target: String,
        /// Why.
        reason: String,
    },
    /// The connection broke during the call; the call's outcome is unknown
    /// and the next call reconnects.
    #[error("state store: the connection to PostgreSQL at {target} broke during the call (its outcome is unknown; the next call reconnects): {reason}")]
    ConnectionLost {
        /// Host, port and database (never the password).
        target: String,
        /// Why.
        reason: String,
    },
}

impl StoreError {
    /// Whether the store, not the request, failed, so that trying again once
    /// it answers may succeed: PostgreSQL unreachable, a connection broken,
    /// or the server refusing work (SQLSTATE classes 08, connection, and 57,
    /// operator intervention: a shutdown or restart).
    pub fn is_transient(&self) -> bool {
        match self {
            StoreError::Unavailable { .. } | StoreError::ConnectionLost { .. } => true,
            StoreError::Postgres(e) => {
                e.is_closed()
                    || e.as_db_error().is_none()
                    || e.code().is_some_and(|c| {
                        let code = c.code();
                        code.starts_with("08") || code.starts_with("57")
                    })
            }
            _ => false,
        }
    }
}
