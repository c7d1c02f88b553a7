//! Plugin logs and traces: logs on stderr (JSON lines when the host asks for
//! them), spans exported when the standard `OTEL_*` variables say so.

use crate::telemetry::{self, Telemetry, TelemetryConfig};

/// Environment variable a host sets to `json` to receive JSON log lines.
pub const LOG_FORMAT_ENV: &str = "ORRERY_PLUGIN_LOG_FORMAT";

/// Sets up the plugin's telemetry as `orrery-plugin-<name>`. A broken
/// telemetry setting is reported on stderr and leaves the plugin running
/// without export: observability never stops a plugin from serving.
pub(crate) fn init(name: &str) -> Option<Telemetry> {
    let mut config = match TelemetryConfig::from_env(&format!("orrery-plugin-{name}")) {
        Ok(config) => config,
        Err(e) => {
            eprintln!("telemetry disabled: {e}");
            TelemetryConfig::from_vars(&format!("orrery-plugin-{name}"), |_| None).ok()?
        }
    };
    config.log_json = std::env::var(LOG_FORMAT_ENV).is_ok_and(|v| v == "json");
    match telemetry::init(&config) {
        Ok(t) => Some(t),
        Err(e) => {
            eprintln!("telemetry export disabled: {e}");
            config.otlp_endpoint = None;
            telemetry::init(&config).ok()
        }
    }
}
