//! `[telemetry]` and the log keys: what operators plug the gateway into (an OpenTelemetry
//! collector, a log pipeline).

use serde::Deserialize;

/// `[telemetry]`: OpenTelemetry traces, exported over OTLP/HTTP. Without `otlp_endpoint` no
/// span is made at all (the W3C trace headers a client sends still reach the agent unchanged,
/// as every other header does).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's OTLP/HTTP base URL (`http://127.0.0.1:4318`); spans are posted to
    /// `{otlp_endpoint}/v1/traces` as protobuf.
    pub otlp_endpoint: Option<String>,
    /// The `service.name` of every span.
    pub service_name: String,
    /// The share of traces started here that are recorded (0.0 to 1.0). A trace continued from
    /// a caller's `traceparent` follows the caller's sampled flag instead.
    pub sample_ratio: f64,
}

impl Default for TelemetryConfig {
    fn default() -> TelemetryConfig {
        TelemetryConfig {
            otlp_endpoint: None,
            service_name: "a2a-gateway".into(),
            sample_ratio: 1.0,
        }
    }
}

/// `log_format`: how log lines are written (to stderr).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// Human-readable lines (default).
    #[default]
    Text,
    /// One JSON object per line, with `trace_id` in a traced request's lines.
    Json,
}
