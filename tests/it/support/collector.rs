//! An OpenTelemetry collector for tests: an OTLP/HTTP receiver on loopback that decodes every
//! export (protobuf, with opentelemetry-proto's own types) and keeps the spans.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use opentelemetry_proto::tonic::trace::v1::span::SpanKind;
use prost::Message;

/// One span as received, with the `service.name` of its resource.
#[derive(Debug, Clone)]
pub struct Got {
    pub service: String,
    pub name: String,
    pub kind: SpanKind,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_id: String,
    pub attributes: Vec<KeyValue>,
    /// The span's status is an error.
    pub failed: bool,
}

impl Got {
    /// An attribute as text (a string, or a number printed).
    pub fn attr(&self, key: &str) -> Option<String> {
        let kv = self.attributes.iter().find(|kv| kv.key == key)?;
        match kv.value.as_ref()?.value.as_ref()? {
            AnyValue::StringValue(s) => Some(s.clone()),
            AnyValue::IntValue(i) => Some(i.to_string()),
            AnyValue::BoolValue(b) => Some(b.to_string()),
            AnyValue::DoubleValue(d) => Some(d.to_string()),
            _ => None,
        }
    }

    /// Assert each (attribute, value as text).
    pub fn assert_attrs(&self, want: &[(&str, &str)]) {
        for (key, value) in want {
            assert_eq!(
                self.attr(key).as_deref(),
                Some(*value),
                "{key} of span {:?}: {self:#?}",
                self.name
            );
        }
    }

    /// The `traceparent` that names this span as the parent (sampled).
    pub fn traceparent(&self) -> String {
        format!("00-{}-{}-01", self.trace_id, self.span_id)
    }
}

pub struct Collector {
    pub addr: SocketAddr,
    spans: Arc<Mutex<Vec<Got>>>,
    /// Exports that were not a valid OTLP protobuf request to /v1/traces.
    bad: Arc<Mutex<Vec<String>>>,
    server: tokio::task::JoinHandle<()>,
}

impl Collector {
    pub async fn start() -> Collector {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("collector binds");
        let addr = listener.local_addr().expect("addr");
        let spans = Arc::new(Mutex::new(Vec::new()));
        let bad = Arc::new(Mutex::new(Vec::new()));
        let (s, b) = (spans.clone(), bad.clone());
        let server = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let (s, b) = (s.clone(), b.clone());
                tokio::spawn(async move {
                    let svc =
                        hyper::service::service_fn(move |req| receive(s.clone(), b.clone(), req));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(stream), svc)
                        .await;
                });
            }
        });
        Collector {
            addr,
            spans,
            bad,
            server,
        }
    }

    /// The `[telemetry] otlp_endpoint` that reaches this collector.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn spans(&self) -> Vec<Got> {
        self.spans.lock().expect("lock").clone()
    }

    pub fn bad(&self) -> Vec<String> {
        self.bad.lock().expect("lock").clone()
    }

    /// Wait (up to 15 s) until a span named `name` of trace `trace_id` has arrived.
    pub async fn wait_span(&self, trace_id: &str, name: &str) -> Got {
        let deadline = std::time::Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(s) = self
                .spans()
                .into_iter()
                .find(|s| s.trace_id == trace_id && s.name == name)
            {
                return s;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "no span {name:?} in trace {trace_id} within 15 s; got {:#?}",
                self.spans()
                    .iter()
                    .map(|s| (&s.name, &s.trace_id))
                    .collect::<Vec<_>>()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn receive(
    spans: Arc<Mutex<Vec<Got>>>,
    bad: Arc<Mutex<Vec<String>>>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, std::convert::Infallible> {
    let path = req.uri().path().to_owned();
    let ctype = req
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let body = req
        .into_body()
        .collect()
        .await
        .map(|b| b.to_bytes())
        .unwrap_or_default();
    let decoded = ExportTraceServiceRequest::decode(body.as_ref());
    match decoded {
        Ok(export) if path == "/v1/traces" && ctype == "application/x-protobuf" => {
            let mut out = spans.lock().expect("lock");
            for rs in export.resource_spans {
                let service = rs
                    .resource
                    .as_ref()
                    .and_then(|r| r.attributes.iter().find(|kv| kv.key == "service.name"))
                    .and_then(|kv| kv.value.as_ref()?.value.as_ref().cloned())
                    .map(|v| match v {
                        AnyValue::StringValue(s) => s,
                        other => format!("{other:?}"),
                    })
                    .unwrap_or_default();
                for ss in rs.scope_spans {
                    for s in ss.spans {
                        out.push(Got {
                            service: service.clone(),
                            name: s.name.clone(),
                            kind: SpanKind::try_from(s.kind).unwrap_or(SpanKind::Unspecified),
                            trace_id: hex(&s.trace_id),
                            span_id: hex(&s.span_id),
                            parent_id: hex(&s.parent_span_id),
                            failed: s.status.as_ref().is_some_and(|st| st.code == 2),
                            attributes: s.attributes,
                        });
                    }
                }
            }
        }
        other => bad
            .lock()
            .expect("lock")
            .push(format!("{path} {ctype}: {:?}", other.err())),
    }
    // An empty ExportTraceServiceResponse: full success.
    Ok(Response::builder()
        .header("content-type", "application/x-protobuf")
        .body(Full::new(Bytes::new()))
        .expect("response"))
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}
