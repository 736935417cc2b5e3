//! OpenTelemetry traces: one server span per request, with children for the input validation,
//! the agent exchange and the ledger apply; one span per webhook delivery attempt, parented by
//! the trace context stored with the queued message.
//!
//! The W3C `traceparent` / `tracestate` of the caller are continued, and the gateway's own go on
//! to the agent and to webhook subscribers, so an orchestrator can join its trace to what the
//! agent did and to the delivery it receives.
//!
//! Built on the OpenTelemetry SDK (sampling, ids, spans) with its OTLP/HTTP exporter over
//! hyper, on the runtime the gateway starts on, and a span processor of our own ([`batch`]): a
//! bounded queue (spans past it are dropped, never waited for) that wakes the export task once
//! per batch rather than once per span. A request never waits on an export. Off (no
//! `[telemetry] otlp_endpoint`), nothing here runs: a request carries no [`Trace`].

mod batch;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use hyper::header::{HeaderName, HeaderValue};
use hyper::HeaderMap;
use opentelemetry::propagation::{Extractor, Injector, TextMapPropagator};
use opentelemetry::trace::{
    SpanKind, Status, TraceContextExt, TraceFlags, TraceId, Tracer as _, TracerProvider as _,
};
use opentelemetry::{Context, InstrumentationScope, KeyValue};
use opentelemetry_otlp::{Protocol, WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::propagation::TraceContextPropagator;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider, SpanExporter as _};
use opentelemetry_sdk::Resource;
pub use opentelemetry_semantic_conventions::attribute as semconv;

use crate::config::TelemetryConfig;

/// The gateway's own span attributes (OpenTelemetry's HTTP conventions name the rest).
pub const AGENT: &str = "a2a.agent";
/// The client, as admission named it (`anonymous` without clients).
pub const CLIENT: &str = "a2a.client";
/// The route's name, as the metrics label it (`create_task`).
pub const ROUTE: &str = "a2a.route";
/// The task a request or delivery is about.
pub const TASK_ID: &str = "a2a.task.id";
/// The gateway's request id (`x-request-id`).
pub const REQUEST_ID: &str = "a2a.request.id";
/// What the ledger decided (`new`, `transition`, `refresh`, `duplicate`, or why it refused).
pub const VERDICT: &str = "a2a.ledger.verdict";
/// A webhook subscriber's name.
pub const SUBSCRIBER: &str = "a2a.webhook.subscriber";
/// A delivery's attempt number (1 for the first).
pub const ATTEMPT: &str = "a2a.webhook.attempt";
/// The delivery's `webhook-id`.
pub const MESSAGE_ID: &str = "a2a.webhook.id";

/// One export's bound, from connect to the collector's answer.
const EXPORT_TIMEOUT: Duration = Duration::from_secs(5);

/// The tracer, its exporter, and the W3C trace-context propagator.
pub struct Telemetry {
    provider: SdkTracerProvider,
    exporting: batch::Exporting,
    tracer: SdkTracer,
    propagator: TraceContextPropagator,
}

impl std::fmt::Debug for Telemetry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Telemetry")
    }
}

impl Telemetry {
    /// The tracer of `cfg`, exporting from a task on the current runtime; `None` when
    /// `otlp_endpoint` is not set.
    /// `spans` counts what became of each finished span (`telemetry_spans_total`).
    pub fn start(
        cfg: &TelemetryConfig,
        spans: prometheus::IntCounterVec,
    ) -> Result<Option<Arc<Telemetry>>, opentelemetry_otlp::ExporterBuildError> {
        let Some(base) = cfg.otlp_endpoint.as_deref() else {
            return Ok(None);
        };
        let endpoint = format!("{}/v1/traces", base.trim_end_matches('/'));
        let mut http = hyper_util::client::legacy::connect::HttpConnector::new();
        http.enforce_http(false);
        http.set_connect_timeout(Some(EXPORT_TIMEOUT));
        let https = hyper_rustls::HttpsConnectorBuilder::new()
            .with_webpki_roots()
            .https_or_http()
            .enable_http1()
            .wrap_connector(http);
        let mut exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(opentelemetry_http::hyper::HyperClient::new(
                https,
                EXPORT_TIMEOUT,
                None,
            ))
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(endpoint)
            .with_timeout(EXPORT_TIMEOUT)
            .build()?;
        let resource = Resource::builder()
            .with_service_name(cfg.service_name.clone())
            .with_attribute(KeyValue::new(
                semconv::SERVICE_VERSION,
                env!("CARGO_PKG_VERSION"),
            ))
            .build();
        exporter.set_resource(&resource);
        let (processor, exporting) = batch::Batcher::start(exporter, spans);
        let provider = SdkTracerProvider::builder()
            .with_span_processor(processor)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                cfg.sample_ratio,
            ))))
            .with_resource(resource)
            .build();
        let scope = InstrumentationScope::builder("a2a-gateway")
            .with_version(env!("CARGO_PKG_VERSION"))
            .build();
        let tracer = provider.tracer_with_scope(scope);
        Ok(Some(Arc::new(Telemetry {
            provider,
            exporting,
            tracer,
            propagator: TraceContextPropagator::new(),
        })))
    }

    /// Export what is queued and stop the exporter (waiting up to one export's timeout).
    pub async fn shutdown(&self) {
        self.exporting.finish(EXPORT_TIMEOUT).await;
        if let Err(e) = self.provider.shutdown() {
            tracing::debug!(error = %e, "telemetry: provider shutdown");
        }
    }

    /// The span of one request, continuing the caller's trace if its headers carry one.
    pub fn server_span(
        self: &Arc<Self>,
        headers: &HeaderMap,
        name: String,
        attributes: Vec<KeyValue>,
    ) -> Span {
        let parent = self.propagator.extract(&Headers(headers));
        self.start_span(&parent, name.into(), SpanKind::Server, attributes)
    }

    /// A span whose parent is a stored trace context ([`Trace::stored`]): the delivery of a
    /// queued message, perhaps by another replica. A context that does not parse starts a new
    /// trace.
    pub fn span_from_stored(
        self: &Arc<Self>,
        stored: Option<&str>,
        name: &'static str,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Span {
        let mut map = HashMap::new();
        if let Some(s) = stored {
            let (parent, state) = s.split_once(' ').unwrap_or((s, ""));
            map.insert("traceparent".to_owned(), parent.to_owned());
            if !state.is_empty() {
                map.insert("tracestate".to_owned(), state.to_owned());
            }
        }
        let parent = self.propagator.extract(&map);
        self.start_span(&parent, name.into(), kind, attributes)
    }

    fn start_span(
        self: &Arc<Self>,
        parent: &Context,
        name: std::borrow::Cow<'static, str>,
        kind: SpanKind,
        attributes: Vec<KeyValue>,
    ) -> Span {
        let span = self
            .tracer
            .span_builder(name)
            .with_kind(kind)
            .with_attributes(attributes)
            .start_with_context(&self.tracer, parent);
        Span(Trace {
            cx: parent.with_span(span),
            telemetry: self.clone(),
        })
    }
}

/// A handle on a live span: for its children, its attributes, and the context it propagates.
/// Cheap to clone; ending the span is [`Span`]'s business.
#[derive(Clone, Debug)]
pub struct Trace {
    cx: Context,
    telemetry: Arc<Telemetry>,
}

impl Trace {
    /// A child span, ended when the returned [`Span`] is dropped.
    pub fn child(&self, name: &'static str, kind: SpanKind, attributes: Vec<KeyValue>) -> Span {
        self.telemetry
            .start_span(&self.cx, name.into(), kind, attributes)
    }

    /// Add an attribute (nothing happens on a span that is not sampled).
    pub fn set(&self, kv: KeyValue) {
        self.cx.span().set_attribute(kv);
    }

    /// Mark the span failed, with why.
    pub fn fail(&self, why: impl Into<std::borrow::Cow<'static, str>>) {
        self.cx.span().set_status(Status::error(why));
    }

    /// `traceparent` (and `tracestate`, if any) naming this span as the parent, replacing any
    /// the headers had.
    pub fn inject(&self, headers: &mut HeaderMap) {
        self.telemetry
            .propagator
            .inject_context(&self.cx, &mut HeadersMut(headers));
    }

    /// The trace context as stored with a queued message: `traceparent`, then a space and
    /// `tracestate` if there is one (it may hold spaces itself, so it comes last); empty for
    /// an invalid context. Written as the W3C propagator writes the headers, without its maps.
    pub fn stored(&self) -> String {
        let span = self.cx.span();
        let sc = span.span_context();
        if !sc.is_valid() {
            return String::new();
        }
        let flags = sc.trace_flags() & TraceFlags::SAMPLED;
        let mut out = format!(
            "00-{}-{}-{:02x}",
            sc.trace_id(),
            sc.span_id(),
            flags.to_u8()
        );
        let state = sc.trace_state().header();
        if !state.is_empty() {
            out.push(' ');
            out.push_str(&state);
        }
        out
    }

    /// Run `work` with this trace's id as the one log lines name ([`current_trace_id`]).
    ///
    /// A plain function returning tokio's scope future, not an `async fn`: an `async fn` would
    /// keep `work` twice in its state (the argument, and the scope future it was moved into),
    /// and `work` here is a whole request's handler, which the request's future then carries
    /// (and copies on every move) at twice its size.
    pub fn scope<F: std::future::Future>(
        &self,
        work: F,
    ) -> impl std::future::Future<Output = F::Output> {
        let id = self.cx.span().span_context().trace_id();
        TRACE_ID.scope(id, work)
    }

    /// The trace id (32 hex digits), for log lines.
    pub fn trace_id(&self) -> String {
        self.cx.span().span_context().trace_id().to_string()
    }
}

tokio::task_local! {
    /// The trace id of the request a task is serving, for log lines (a task-local: no
    /// `tracing` span per request, and nothing at all with telemetry off).
    static TRACE_ID: TraceId;
}

/// The trace id (32 hex digits) of the traced request the current task serves, if any: what
/// `log_format = "json"` adds to a log line written while serving it.
pub fn current_trace_id() -> Option<String> {
    TRACE_ID.try_with(|id| id.to_string()).ok()
}

/// A span that ends when dropped (or at [`Span::end`]); derefs to its [`Trace`].
#[derive(Debug)]
pub struct Span(Trace);

impl Span {
    /// The handle, for children that may outlive this guard's scope.
    pub fn trace(&self) -> Trace {
        self.0.clone()
    }

    /// End the span now.
    pub fn end(self) {}
}

impl std::ops::Deref for Span {
    type Target = Trace;
    fn deref(&self) -> &Trace {
        &self.0
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        self.0.cx.span().end();
    }
}

/// The HTTP attributes of a response status: `http.response.status_code`, plus `error.type`
/// and an error status when `server` is true and the status is 5xx, or always past 399 on a
/// client span (OpenTelemetry's HTTP conventions).
pub fn answered(trace: &Trace, status: u16, server: bool) {
    trace.set(KeyValue::new(
        semconv::HTTP_RESPONSE_STATUS_CODE,
        i64::from(status),
    ));
    if status >= 500 || (!server && status >= 400) {
        trace.set(KeyValue::new(semconv::ERROR_TYPE, status.to_string()));
        trace.fail(format!("HTTP {status}"));
    }
}

struct Headers<'a>(&'a HeaderMap);

impl Extractor for Headers<'_> {
    fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(|v| v.to_str().ok())
    }
    fn keys(&self) -> Vec<&str> {
        self.0.keys().map(HeaderName::as_str).collect()
    }
}

struct HeadersMut<'a>(&'a mut HeaderMap);

impl Injector for HeadersMut<'_> {
    fn set(&mut self, key: &str, value: String) {
        if let (Ok(name), Ok(value)) = (
            HeaderName::from_bytes(key.as_bytes()),
            HeaderValue::from_str(&value),
        ) {
            self.0.insert(name, value);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn telemetry() -> Arc<Telemetry> {
        let cfg = TelemetryConfig {
            otlp_endpoint: Some("http://127.0.0.1:9".into()),
            ..TelemetryConfig::default()
        };
        let spans = prometheus::IntCounterVec::new(prometheus::Opts::new("s", "s"), &["outcome"])
            .expect("counter");
        Telemetry::start(&cfg, spans).expect("starts").expect("on")
    }

    #[tokio::test]
    async fn a_callers_trace_is_continued_and_stored_whole() {
        let t = telemetry();
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"),
        );
        h.insert(
            "tracestate",
            HeaderValue::from_static("congo=t61rcWkgMzE, rojo=00f067aa0ba902b7"),
        );
        let root = t.server_span(&h, "POST /tasks".into(), vec![]);
        assert_eq!(root.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        let child = root.child("agent exchange", SpanKind::Client, vec![]);
        let mut out = HeaderMap::new();
        child.inject(&mut out);
        let tp = out["traceparent"].to_str().expect("ascii");
        assert!(
            tp.starts_with("00-0af7651916cd43dd8448eb211c80319c-"),
            "{tp}"
        );
        assert!(tp.ends_with("-01"), "{tp}");
        assert!(
            !tp.contains("b7ad6b7169203331"),
            "the child is the new parent: {tp}"
        );
        // Stored with a tracestate holding spaces, and restored as the parent of a delivery.
        let stored = child.stored();
        assert_eq!(
            stored,
            format!("{tp} congo=t61rcWkgMzE,rojo=00f067aa0ba902b7")
        );
        let delivery =
            t.span_from_stored(Some(&stored), "webhook delivery", SpanKind::Client, vec![]);
        assert_eq!(delivery.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        // Nothing (or garbage) stored: a trace of its own.
        let fresh = t.span_from_stored(Some("junk"), "webhook delivery", SpanKind::Client, vec![]);
        assert_ne!(fresh.trace_id(), "0af7651916cd43dd8448eb211c80319c");
        drop((child, root, delivery, fresh));
        t.shutdown().await;
    }

    #[tokio::test]
    async fn an_unsampled_caller_is_not_recorded_but_still_propagated() {
        let t = telemetry();
        let mut h = HeaderMap::new();
        h.insert(
            "traceparent",
            HeaderValue::from_static("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00"),
        );
        let root = t.server_span(&h, "POST /tasks".into(), vec![]);
        assert!(!root.cx.span().is_recording());
        let mut out = HeaderMap::new();
        root.inject(&mut out);
        let tp = out["traceparent"].to_str().expect("ascii");
        assert!(tp.starts_with("00-0af7651916cd43dd8448eb211c80319c-") && tp.ends_with("-00"));
        drop(root);
        t.shutdown().await;
    }
}
