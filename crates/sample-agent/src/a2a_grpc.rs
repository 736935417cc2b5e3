//! The official agent's third binding (§10): `lf.a2a.v1.A2AService` over HTTP/2 on the agent's
//! own listener (h2c), `POST /lf.a2a.v1.A2AService/{Method}` with `content-type:
//! application/grpc`. Each message is read into its ProtoJSON (`a2a_grpc`) and runs the same
//! calls as the JSON bindings; answers are the response message then `grpc-status: 0`, errors a
//! trailers-only answer with the google.rpc.Status of the HTTP+JSON binding. A 0.3 agent does
//! not serve it (0.3's package is another).

use std::sync::Arc;

use a2a_grpc::{frame, json, status};
use hyper::header::{HeaderMap, HeaderValue, CONTENT_TYPE};
use hyper::Response;
use serde_json::{json, Value};

use super::a2a::{call, error_info, fail, Failure, Kind};
use super::a2a_stream;
use super::body::OutBody;
use super::shared::Shared;

/// A gRPC call of `method` (the path after the service's) with its whole `body`.
pub(crate) fn grpc(shared: &Arc<Shared>, method: &str, body: &[u8]) -> Response<OutBody> {
    if shared.protocol == crate::Protocol::A2aV0_3 {
        return failed(fail(
            Kind::MethodNotFound,
            "this agent speaks A2A 0.3: no gRPC",
        ));
    }
    let Some(rpc) = a2a_grpc::rpc(method) else {
        return failed(fail(Kind::MethodNotFound, "no such method"));
    };
    let params = match frame::read_one(body, super::server::MAX_BODY)
        .map_err(|e| e.to_string())
        .and_then(|m| json::to_json(&rpc.input, m))
    {
        Ok(Value::Object(p)) => p,
        Ok(_) | Err(_) => return failed(fail(Kind::InvalidRequest, "not the method's message")),
    };
    if rpc.server_streaming {
        let frame: a2a_stream::Frame = Box::new(|e| {
            json::to_bytes(&a2a_grpc::stream_response(), e)
                .map(|m| frame::encode(&m))
                .unwrap_or_default()
        });
        return match a2a_stream::open(shared, method, &params, frame) {
            Ok(res) => {
                let (_, body) = res.into_parts();
                let body = match body {
                    OutBody::Events(ev) => OutBody::Events(ev.ending_with(ok())),
                    other => other,
                };
                head(body)
            }
            Err(f) => failed(f),
        };
    }
    match call(shared, method, &params)
        .and_then(|v| json::to_bytes(&rpc.output, &v).map_err(|e| fail(Kind::InvalidParams, e)))
    {
        Ok(m) => head(OutBody::Trailed(Some(frame::encode(&m)), Some(ok()))),
        Err(f) => failed(f),
    }
}

fn head(body: OutBody) -> Response<OutBody> {
    let mut res = Response::new(body);
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static(a2a_grpc::CONTENT_TYPE),
    );
    res
}

fn ok() -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert("grpc-status", HeaderValue::from_static("0"));
    h
}

/// A trailers-only answer: the failure's status, as the HTTP+JSON binding's google.rpc.Status.
fn failed(Failure(kind, message): Failure) -> Response<OutBody> {
    let (_, http, grpc, reason) = kind.row();
    let grpc = if matches!(kind, Kind::MethodNotFound) {
        "UNIMPLEMENTED"
    } else {
        grpc
    };
    let body = json!({"error": {"code": http, "status": grpc, "message": message,
        "details": [error_info(reason)]}});
    let w = status::write(&body, None);
    let mut res = head(OutBody::Full(None));
    let h = res.headers_mut();
    h.insert("grpc-status", HeaderValue::from(w.code));
    for (name, value) in [
        ("grpc-message", w.message),
        ("grpc-status-details-bin", w.details_bin),
    ] {
        if let Ok(v) = HeaderValue::from_str(&value) {
            h.insert(name, v);
        }
    }
    res
}
