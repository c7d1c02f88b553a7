//! Plugin logs: stderr only, JSON lines when the host asks for them.

/// Environment variable a host sets to `json` to receive JSON log lines.
pub const LOG_FORMAT_ENV: &str = "ORRERY_PLUGIN_LOG_FORMAT";

/// Installs a stderr subscriber honouring `RUST_LOG` (default `info`).
pub fn init() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    let json = std::env::var(LOG_FORMAT_ENV).is_ok_and(|v| v == "json");
    let _ = if json {
        builder.json().with_current_span(true).try_init()
    } else {
        builder.with_ansi(false).try_init()
    };
}
