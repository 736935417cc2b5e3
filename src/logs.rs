//! Where log lines go and how they look: `log_format = "text"` (human-readable) or `"json"`
//! (one object per line: `timestamp`, `level`, `target`, `message`, the event's fields, the
//! fields of the spans it happened in, and a traced request's `trace_id`). Both go to
//! stderr, filtered by `RUST_LOG` (default `a2a_gateway=info`, which includes the access log's
//! target `a2a_gateway::access`).

use std::fmt;
use std::io::IsTerminal;

use a2a_gateway::config::LogFormat;
use serde_json::{Map, Value};
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::fmt::format::{JsonFields, Writer};
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields, FormattedFields};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::EnvFilter;

/// Install the process's logger (once, before anything logs).
pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| "a2a_gateway=info".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .fmt_fields(JsonFields::new())
            .event_format(JsonLines)
            .init(),
    }
}

/// One JSON object per event, its fields and its spans' fields at the top level.
struct JsonLines;

impl<S, N> FormatEvent<S, N> for JsonLines
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let mut line = Map::new();
        line.insert(
            "timestamp".into(),
            chrono::Utc::now()
                .to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
                .into(),
        );
        line.insert("level".into(), meta.level().as_str().into());
        line.insert("target".into(), meta.target().into());
        event.record(&mut Fields(&mut line));
        if !line.contains_key("trace_id") {
            if let Some(id) = a2a_gateway::telemetry::current_trace_id() {
                line.insert("trace_id".into(), id.into());
            }
        }
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                let ext = span.extensions();
                // Stored as a JSON object by `JsonFields`.
                let Some(fields) = ext.get::<FormattedFields<N>>() else {
                    continue;
                };
                if let Ok(Value::Object(o)) = serde_json::from_str::<Value>(fields.as_str()) {
                    for (k, v) in o {
                        line.entry(k).or_insert(v);
                    }
                }
            }
        }
        writeln!(w, "{}", Value::Object(line))
    }
}

struct Fields<'a>(&'a mut Map<String, Value>);

impl Visit for Fields<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_i64(&mut self, field: &Field, value: i64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_u64(&mut self, field: &Field, value: u64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_f64(&mut self, field: &Field, value: f64) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_bool(&mut self, field: &Field, value: bool) {
        self.0.insert(field.name().into(), value.into());
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0
            .insert(field.name().into(), format!("{value:?}").into());
    }
}
