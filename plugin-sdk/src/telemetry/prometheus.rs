//! OpenTelemetry metrics in the Prometheus text exposition format.
//!
//! Names follow the OpenTelemetry-to-Prometheus convention: dots become
//! underscores, the unit is appended (`s` → `_seconds`), monotonic sums end
//! in `_total`.

use std::fmt::Write;

use opentelemetry::KeyValue;
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, Metric, MetricData, ResourceMetrics};

/// Renders every metric of `metrics`.
pub(crate) fn render(metrics: &ResourceMetrics) -> String {
    let mut out = String::new();
    for scope in metrics.scope_metrics() {
        for metric in scope.metrics() {
            match metric.data() {
                AggregatedMetrics::F64(data) => write_metric(&mut out, metric, data),
                AggregatedMetrics::U64(data) => write_metric(&mut out, metric, data),
                AggregatedMetrics::I64(data) => write_metric(&mut out, metric, data),
            }
        }
    }
    out
}

fn write_metric<T: Copy + std::fmt::Display + Into<Number>>(
    out: &mut String,
    metric: &Metric,
    data: &MetricData<T>,
) {
    let base = prometheus_name(metric.name(), metric.unit());
    let help = metric
        .description()
        .replace('\\', "\\\\")
        .replace('\n', "\\n");
    match data {
        MetricData::Sum(sum) => {
            let (name, kind) = if sum.is_monotonic() {
                (format!("{base}_total"), "counter")
            } else {
                (base, "gauge")
            };
            header(out, &name, &help, kind);
            for p in sum.data_points() {
                sample(out, &name, p.attributes(), None, p.value().into());
            }
        }
        MetricData::Gauge(gauge) => {
            header(out, &base, &help, "gauge");
            for p in gauge.data_points() {
                sample(out, &base, p.attributes(), None, p.value().into());
            }
        }
        MetricData::Histogram(hist) => {
            header(out, &base, &help, "histogram");
            for p in hist.data_points() {
                let bucket = format!("{base}_bucket");
                let mut cumulative = 0u64;
                for (bound, count) in p.bounds().zip(p.bucket_counts()) {
                    cumulative += count;
                    let le = bound.to_string();
                    sample(
                        out,
                        &bucket,
                        p.attributes(),
                        Some(&le),
                        Number::U(cumulative),
                    );
                }
                sample(
                    out,
                    &bucket,
                    p.attributes(),
                    Some("+Inf"),
                    Number::U(p.count()),
                );
                sample(
                    out,
                    &format!("{base}_sum"),
                    p.attributes(),
                    None,
                    p.sum().into(),
                );
                sample(
                    out,
                    &format!("{base}_count"),
                    p.attributes(),
                    None,
                    Number::U(p.count()),
                );
            }
        }
        // Orrery records no exponential histograms; a Prometheus text
        // scraper could not read them anyway.
        MetricData::ExponentialHistogram(_) => {}
    }
}

/// A sample value of any of the SDK's number types.
#[derive(Clone, Copy)]
enum Number {
    U(u64),
    I(i64),
    F(f64),
}

impl From<u64> for Number {
    fn from(v: u64) -> Self {
        Self::U(v)
    }
}
impl From<i64> for Number {
    fn from(v: i64) -> Self {
        Self::I(v)
    }
}
impl From<f64> for Number {
    fn from(v: f64) -> Self {
        Self::F(v)
    }
}

fn header(out: &mut String, name: &str, help: &str, kind: &str) {
    if !help.is_empty() {
        let _ = writeln!(out, "# HELP {name} {help}");
    }
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

fn sample<'a>(
    out: &mut String,
    name: &str,
    attributes: impl Iterator<Item = &'a KeyValue>,
    le: Option<&str>,
    value: Number,
) {
    let mut labels: Vec<(String, String)> = attributes
        .map(|kv| (sanitize(kv.key.as_str()), kv.value.as_str().into_owned()))
        .collect();
    labels.sort();
    if let Some(le) = le {
        labels.push(("le".into(), le.into()));
    }
    write_sample(out, name, &labels, value);
}

/// One sample line: `name{label="value",...} value`, label values escaped
/// as the format requires (backslash, double quote, newline), so a value
/// from outside (a plugin's name, a bucket) cannot forge lines.
fn write_sample(out: &mut String, name: &str, labels: &[(String, String)], value: Number) {
    out.push_str(name);
    if !labels.is_empty() {
        out.push('{');
        for (i, (k, v)) in labels.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            let v = v
                .replace('\\', "\\\\")
                .replace('"', "\\\"")
                .replace('\n', "\\n");
            let _ = write!(out, "{k}=\"{v}\"");
        }
        out.push('}');
    }
    let _ = match value {
        Number::U(v) => writeln!(out, " {v}"),
        Number::I(v) => writeln!(out, " {v}"),
        Number::F(v) if v.is_nan() => writeln!(out, " NaN"),
        Number::F(v) => writeln!(out, " {v}"),
    };
}

/// Writes one metric family kept outside OpenTelemetry (a satellite's
/// plugin states) in the Prometheus text format, through the same writer
/// and escaping as the process's recorded metrics: `# HELP`, `# TYPE`
/// (`kind`: `gauge`, `counter`), then one sample per `(labels, value)`.
pub fn write_family(
    out: &mut String,
    name: &str,
    help: &str,
    kind: &str,
    samples: impl IntoIterator<Item = (Vec<(String, String)>, u64)>,
) {
    let name = sanitize(name);
    header(
        out,
        &name,
        &help.replace('\\', "\\\\").replace('\n', "\\n"),
        kind,
    );
    for (labels, value) in samples {
        let labels: Vec<(String, String)> =
            labels.into_iter().map(|(k, v)| (sanitize(&k), v)).collect();
        write_sample(out, &name, &labels, Number::U(value));
    }
}

fn prometheus_name(name: &str, unit: &str) -> String {
    let mut name = sanitize(name);
    let suffix = match unit {
        "s" => "seconds",
        "ms" => "milliseconds",
        "By" => "bytes",
        _ => "",
    };
    if !suffix.is_empty() && !name.ends_with(suffix) {
        name.push('_');
        name.push_str(suffix);
    }
    name
}

fn sanitize(name: &str) -> String {
    let mut out: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == ':' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, '_');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry::metrics::MeterProvider as _;
    use opentelemetry_sdk::metrics::reader::MetricReader;
    use opentelemetry_sdk::metrics::{ManualReader, SdkMeterProvider};
    use std::sync::Arc;

    #[test]
    fn families_written_by_hand_escape_their_labels() {
        let mut out = String::new();
        super::write_family(
            &mut out,
            "orrery_plugin_up",
            "Whether the plugin runs.",
            "gauge",
            [(
                vec![("plugin".into(), "evil\"} 1\norrery_nats_connected 0".into())],
                1,
            )],
        );
        assert_eq!(
            out,
            "# HELP orrery_plugin_up Whether the plugin runs.\n# TYPE orrery_plugin_up gauge\n\
             orrery_plugin_up{plugin=\"evil\\\"} 1\\norrery_nats_connected 0\"} 1\n"
        );
    }

    #[test]
    fn counters_histograms_and_gauges_render_with_conventional_names() {
        let reader = Arc::new(ManualReader::builder().build());
        let provider = SdkMeterProvider::builder()
            .with_reader(super::super::init::shared(reader.clone()))
            .build();
        let meter = provider.meter("test");
        let ops = meter
            .f64_histogram("orrery.operation.duration")
            .with_unit("s")
            .build();
        let labels = [
            KeyValue::new("plugin", "lo\"cal"),
            KeyValue::new("outcome", "ok"),
        ];
        ops.record(0.002, &labels);
        ops.record(7.0, &labels);
        let restarts = meter
            .u64_counter("orrery.plugin.restarts")
            .with_description("Restarts.")
            .build();
        restarts.add(3, &[]);
        let queued = meter
            .i64_up_down_counter("orrery.operations.queued")
            .build();
        queued.add(-2, &[]);

        let mut rm = ResourceMetrics::default();
        reader.collect(&mut rm).unwrap();
        let text = render(&rm);
        assert!(
            text.contains("# TYPE orrery_operation_duration_seconds histogram"),
            "{text}"
        );
        assert!(
            text.contains(
                "orrery_operation_duration_seconds_count{outcome=\"ok\",plugin=\"lo\\\"cal\"} 2"
            ),
            "{text}"
        );
        assert!(text.contains(
            "orrery_operation_duration_seconds_bucket{outcome=\"ok\",plugin=\"lo\\\"cal\",le=\"+Inf\"} 2"
        ), "{text}");
        assert!(
            text.contains("# HELP orrery_plugin_restarts_total Restarts.\n"),
            "{text}"
        );
        assert!(text.contains("orrery_plugin_restarts_total 3\n"), "{text}");
        assert!(
            text.contains("# TYPE orrery_operations_queued gauge\norrery_operations_queued -2\n"),
            "{text}"
        );
    }

    #[test]
    fn names_are_sanitized() {
        assert_eq!(
            prometheus_name("rpc.server.duration", "s"),
            "rpc_server_duration_seconds"
        );
        assert_eq!(prometheus_name("9lives-x", "1"), "_9lives_x");
    }
}
