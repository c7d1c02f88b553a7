//! What to export and how much to sample, from the standard `OTEL_*`
//! environment variables and the binaries' own configuration.

/// Telemetry settings of one process.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// `service.name` of this process's spans and metrics.
    pub service_name: String,
    /// OTLP/HTTP base endpoint (for example `http://collector:4318`); `None`
    /// exports nothing.
    pub otlp_endpoint: Option<String>,
    /// Share of new traces recorded, 0.0 to 1.0. Spans whose parent was
    /// sampled are always recorded, so one trace is never cut in pieces.
    pub sampling_ratio: f64,
    /// Log JSON lines instead of human-readable text.
    pub log_json: bool,
    /// Log filter used when `RUST_LOG` is unset (for example `info`).
    pub default_log_filter: String,
}

/// A sampling setting that cannot be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum SamplingError {
    /// `OTEL_TRACES_SAMPLER` named a sampler Orrery does not offer.
    #[error("OTEL_TRACES_SAMPLER={0} is not supported (use always_on, always_off, traceidratio or parentbased_traceidratio)")]
    UnknownSampler(String),
    /// The ratio was not a number between 0 and 1.
    #[error("sampling ratio {0:?} is not a number between 0 and 1")]
    BadRatio(String),
}

impl TelemetryConfig {
    /// Settings for `service_name` read from the environment:
    /// `OTEL_SERVICE_NAME`, `OTEL_EXPORTER_OTLP_ENDPOINT` (or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`), `OTEL_TRACES_SAMPLER` and
    /// `OTEL_TRACES_SAMPLER_ARG`. Unset variables keep the defaults: no
    /// export, every trace sampled, text logs at `info`.
    ///
    /// # Errors
    ///
    /// [`SamplingError::UnknownSampler`] when `OTEL_TRACES_SAMPLER` names a
    /// sampler Orrery does not offer; [`SamplingError::BadRatio`] when
    /// `OTEL_TRACES_SAMPLER_ARG` is not a number between 0 and 1.
    pub fn from_env(service_name: &str) -> Result<Self, SamplingError> {
        Self::from_vars(service_name, |k| std::env::var(k).ok())
    }

    /// [`Self::from_env`] over any variable source, for tests.
    ///
    /// # Errors
    ///
    /// As [`Self::from_env`].
    pub fn from_vars(
        service_name: &str,
        var: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, SamplingError> {
        let set = |k: &str| var(k).filter(|v| !v.trim().is_empty());
        let otlp_endpoint = set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| set("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let sampling_ratio =
            parse_sampler(set("OTEL_TRACES_SAMPLER"), set("OTEL_TRACES_SAMPLER_ARG"))?;
        Ok(Self {
            service_name: set("OTEL_SERVICE_NAME").unwrap_or_else(|| service_name.to_owned()),
            otlp_endpoint,
            sampling_ratio,
            log_json: false,
            default_log_filter: "info".into(),
        })
    }
}

impl TelemetryConfig {
    /// A binary's own settings (flags, config file) over the environment's:
    /// `None` keeps what the environment said.
    pub fn with_overrides(
        mut self,
        otlp_endpoint: Option<&str>,
        sampling_ratio: Option<f64>,
        log_json: bool,
    ) -> Self {
        if let Some(endpoint) = otlp_endpoint {
            self.otlp_endpoint = Some(endpoint.to_owned());
        }
        if let Some(ratio) = sampling_ratio {
            self.sampling_ratio = ratio;
        }
        self.log_json = log_json;
        self
    }
}

/// Parses a ratio given on a command line or in a config file.
///
/// # Errors
///
/// [`SamplingError::BadRatio`] when `text` is not a number between 0 and 1.
pub fn parse_ratio(text: &str) -> Result<f64, SamplingError> {
    match text.trim().parse::<f64>() {
        Ok(r) if (0.0..=1.0).contains(&r) => Ok(r),
        _ => Err(SamplingError::BadRatio(text.to_owned())),
    }
}

fn parse_sampler(sampler: Option<String>, arg: Option<String>) -> Result<f64, SamplingError> {
    let ratio = || arg.as_deref().map_or(Ok(1.0), parse_ratio);
    match sampler.as_deref() {
        None => ratio(),
        Some("always_on" | "parentbased_always_on") => Ok(1.0),
        Some("always_off" | "parentbased_always_off") => Ok(0.0),
        Some("traceidratio" | "parentbased_traceidratio") => ratio(),
        Some(other) => Err(SamplingError::UnknownSampler(other.to_owned())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn from(vars: &[(&str, &str)]) -> Result<TelemetryConfig, SamplingError> {
        let vars: Vec<(String, String)> = vars
            .iter()
            .map(|(k, v)| ((*k).into(), (*v).into()))
            .collect();
        TelemetryConfig::from_vars("svc", |k| {
            vars.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
        })
    }

    #[test]
    fn defaults_export_nothing_and_sample_everything() {
        let c = from(&[]).unwrap();
        assert_eq!(c.service_name, "svc");
        assert_eq!(c.otlp_endpoint, None);
        assert_eq!(c.sampling_ratio, 1.0);
    }

    #[test]
    fn standard_variables_are_honoured() {
        let c = from(&[
            ("OTEL_SERVICE_NAME", "edge"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://c:4318"),
            ("OTEL_TRACES_SAMPLER", "parentbased_traceidratio"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.01"),
        ])
        .unwrap();
        assert_eq!(c.service_name, "edge");
        assert_eq!(c.otlp_endpoint.as_deref(), Some("http://c:4318"));
        assert_eq!(c.sampling_ratio, 0.01);
        let c = from(&[("OTEL_TRACES_SAMPLER", "always_off")]).unwrap();
        assert_eq!(c.sampling_ratio, 0.0);
    }

    #[test]
    fn a_binarys_settings_override_the_environment_only_where_given() {
        let env = from(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://env:4318"),
            ("OTEL_TRACES_SAMPLER_ARG", "0.5"),
        ])
        .unwrap();
        let kept = env.clone().with_overrides(None, None, true);
        assert_eq!(kept.otlp_endpoint.as_deref(), Some("http://env:4318"));
        assert_eq!(kept.sampling_ratio, 0.5);
        assert!(kept.log_json);
        let set = env.with_overrides(Some("http://flag:4318"), Some(0.01), false);
        assert_eq!(set.otlp_endpoint.as_deref(), Some("http://flag:4318"));
        assert_eq!(set.sampling_ratio, 0.01);
    }

    #[test]
    fn bad_samplers_are_refused() {
        assert_eq!(
            from(&[("OTEL_TRACES_SAMPLER", "jaeger_remote")]),
            Err(SamplingError::UnknownSampler("jaeger_remote".into()))
        );
        assert_eq!(
            from(&[("OTEL_TRACES_SAMPLER_ARG", "2")]),
            Err(SamplingError::BadRatio("2".into()))
        );
    }
}
