//! The official agent's two bindings (§9 JSON-RPC at `/a2a/jsonrpc`, §11 HTTP+JSON under
//! `/a2a/rest`), in 1.0 or, for `Protocol::A2aV0_3`, in 0.3 (its method names and shapes,
//! its REST routes under `/a2a/rest/v1`): each request read into one of `a2a`'s calls, each
//! answer and error written in the binding's (and version's) own shape, streams through
//! `a2a_stream`.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};
use serde_json::{json, Map, Value};

use super::a2a::{
    call, cancel, error_info, fail, get, list, push_config, send, Answer, Failure, Kind,
};
use super::a2a_stream;
use super::body::OutBody;
use super::shared::Shared;
use super::v0_3::{self, Spelling};

fn json(status: u16, content_type: &'static str, v: &Value) -> Response<OutBody> {
    let mut res = Response::new(OutBody::full(Bytes::from(
        serde_json::to_vec(v).unwrap_or_default(),
    )));
    *res.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    res
}

/// Whether the agent speaks 0.3 (`Protocol::A2aV0_3`).
fn v0_3(shared: &Shared) -> bool {
    shared.protocol == crate::Protocol::A2aV0_3
}

/// Whether a 1.0 method answers with a stream.
fn streams(method: &str) -> bool {
    matches!(method, "SendStreamingMessage" | "SubscribeToTask")
}

/// `POST /a2a/jsonrpc`: one JSON-RPC 2.0 request (§9; in 0.3, its method names and shapes).
pub(crate) fn jsonrpc(shared: &Arc<Shared>, body: &[u8]) -> Response<OutBody> {
    let old = v0_3(shared);
    let reply = |id: &Value, method: &str, out: Answer| {
        let v = match out {
            Ok(result) if old => {
                json!({"jsonrpc": "2.0", "id": id, "result": v0_3::answer_for(Spelling::Json, method, &result)})
            }
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err(Failure(kind, message)) => {
                let (code, _, _, reason) = kind.row();
                let mut error = json!({"code": code, "message": message});
                if !old {
                    error["data"] = json!([error_info(reason)]);
                }
                json!({"jsonrpc": "2.0", "id": id, "error": error})
            }
        };
        json(200, "application/json", &v)
    };
    let req: Value = match serde_json::from_slice(body) {
        Ok(v) => v,
        Err(_) => return reply(&Value::Null, "", Err(fail(Kind::Parse, "not JSON"))),
    };
    let id = req.get("id").cloned().unwrap_or(Value::Null);
    let (Some("2.0"), Some(name)) = (
        req.get("jsonrpc").and_then(Value::as_str),
        req.get("method").and_then(Value::as_str),
    ) else {
        return reply(
            &id,
            "",
            Err(fail(Kind::InvalidRequest, "not a JSON-RPC 2.0 request")),
        );
    };
    let method = if old {
        match v0_3::method(name) {
            Some(m) => m,
            None => {
                return reply(
                    &id,
                    "",
                    Err(fail(Kind::MethodNotFound, "not an A2A 0.3 method")),
                )
            }
        }
    } else {
        name
    };
    let empty = Map::new();
    let mut params = match req.get("params") {
        None => empty,
        Some(Value::Object(p)) => p.clone(),
        Some(_) => {
            return reply(
                &id,
                method,
                Err(fail(Kind::InvalidParams, "params is an object")),
            )
        }
    };
    if old {
        if let Some(Value::Object(m)) = params.get("message") {
            let m = v0_3::message_in(Spelling::Json, m);
            params.insert("message".to_owned(), Value::Object(m));
        }
        v0_3::params_in(method, &mut params);
    }
    if streams(method) {
        let rpc_id = id.clone();
        let frame: a2a_stream::Frame = Box::new(move |e| {
            let result = if old {
                v0_3::answer_out(Spelling::Json, e)
            } else {
                e.clone()
            };
            let doc = json!({"jsonrpc": "2.0", "id": rpc_id, "result": result});
            Bytes::from(format!("data: {doc}\n\n"))
        });
        return match a2a_stream::open(shared, method, &params, frame) {
            Ok(res) => res,
            Err(e) => reply(&id, method, Err(e)),
        };
    }
    reply(&id, method, call(shared, method, &params))
}

/// The HTTP+JSON binding (§11.3) under `/a2a/rest`: `tail` is the path after it (in 0.3, its
/// routes under `/v1`, the 0.3 proto's JSON).
pub(crate) fn rest(
    shared: &Arc<Shared>,
    http_method: &hyper::Method,
    tail: &str,
    query: Option<&str>,
    body: &[u8],
) -> Response<OutBody> {
    let old = v0_3(shared);
    let tail = match (old, tail.strip_prefix("/v1")) {
        (false, _) => tail,
        (true, Some(t)) if t.starts_with('/') => t,
        (true, _) => {
            return rest_error(
                true,
                fail(Kind::MethodNotFound, "0.3's routes are under /v1"),
            )
        }
    };
    let tail = if old && tail == "/card" {
        "/extendedAgentCard"
    } else {
        tail
    };
    let frame: a2a_stream::Frame = Box::new(move |e| {
        let e = if old {
            v0_3::answer_out(Spelling::Proto, e)
        } else {
            e.clone()
        };
        Bytes::from(format!("data: {e}\n\n"))
    });
    match rest_call(shared, http_method, tail, query, body, frame) {
        Ok(Rest::Answer(method, v)) if old => json(
            200,
            "application/json",
            &v0_3::answer_for(Spelling::Proto, method, &v),
        ),
        Ok(Rest::Answer(_, v)) => json(200, "application/a2a+json", &v),
        Ok(Rest::Stream(res)) => res,
        Err(f) => rest_error(old, f),
    }
}

/// A REST error: google.rpc.Status in 1.0, `{code, message}` (the JSON-RPC code) in 0.3, under
/// the error's HTTP status.
fn rest_error(old: bool, Failure(kind, message): Failure) -> Response<OutBody> {
    let (code, status, grpc, reason) = kind.row();
    let body = if old {
        json!({"code": code, "message": message})
    } else {
        json!({"error": {"code": status, "status": grpc, "message": message,
            "details": [error_info(reason)]}})
    };
    json(status, "application/json", &body)
}

/// What a REST call gives: one answer, or a stream.
enum Rest {
    /// The answer to the method of that (1.0) name.
    Answer(&'static str, Value),
    Stream(Response<OutBody>),
}

fn rest_call(
    shared: &Arc<Shared>,
    http_method: &hyper::Method,
    tail: &str,
    query: Option<&str>,
    body: &[u8],
    frame: a2a_stream::Frame,
) -> Result<Rest, Failure> {
    use hyper::Method as M;
    let mut params = Map::new();
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let v = decode(v).unwrap_or_default();
        let typed = match k {
            "pageSize" | "historyLength" => {
                v.parse::<u64>().map(Value::from).unwrap_or(Value::Null)
            }
            _ => Value::from(v),
        };
        params.insert(k.to_owned(), typed);
    }
    let body_params = || -> Result<Map<String, Value>, Failure> {
        match serde_json::from_slice::<Value>(body) {
            Ok(Value::Object(mut o)) => {
                if v0_3(shared) {
                    if let Some(Value::Object(m)) = o.get("message") {
                        let m = v0_3::message_in(Spelling::Proto, m);
                        o.insert("message".to_owned(), Value::Object(m));
                    }
                }
                Ok(o)
            }
            _ => Err(fail(Kind::InvalidParams, "the body is a JSON object")),
        }
    };
    let one = |method: &'static str, a: Answer| a.map(|v| Rest::Answer(method, v));
    let stream = |method: &str, params: &Map<String, Value>| {
        a2a_stream::open(shared, method, params, frame).map(Rest::Stream)
    };
    let segs: Vec<&str> = tail.trim_start_matches('/').split('/').collect();
    match (http_method, segs.as_slice()) {
        (&M::POST, ["message:send"]) => one("SendMessage", send(shared, &body_params()?)),
        (&M::POST, ["message:stream"]) => stream("SendStreamingMessage", &body_params()?),
        (&M::GET, ["tasks"]) => one("ListTasks", list(shared, &params)),
        (&M::POST, ["tasks", t]) if t.ends_with(":cancel") => {
            let id = decode(&t[..t.len() - ":cancel".len()]).unwrap_or_default();
            params.insert("id".into(), Value::from(id));
            one("CancelTask", cancel(shared, &params))
        }
        (&M::GET | &M::POST, ["tasks", t]) if t.ends_with(":subscribe") => {
            let id = decode(&t[..t.len() - ":subscribe".len()]).unwrap_or_default();
            params.insert("id".into(), Value::from(id));
            stream("SubscribeToTask", &params)
        }
        (&M::GET, ["tasks", t]) => {
            params.insert("id".into(), Value::from(decode(t).unwrap_or_default()));
            one("GetTask", get(shared, &params))
        }
        (_, ["tasks", t, "pushNotificationConfigs", rest @ ..]) if rest.len() <= 1 => {
            let method = match (http_method, rest) {
                (&M::POST, []) => "CreateTaskPushNotificationConfig",
                (&M::GET, []) => "ListTaskPushNotificationConfigs",
                (&M::GET, [_]) => "GetTaskPushNotificationConfig",
                (&M::DELETE, [_]) => "DeleteTaskPushNotificationConfig",
                _ => return Err(fail(Kind::MethodNotFound, "no such route")),
            };
            let mut p = if method == "CreateTaskPushNotificationConfig" {
                body_params()?
            } else {
                Map::new()
            };
            if v0_3(shared) {
                v0_3::params_in(method, &mut p);
            }
            p.insert("taskId".into(), Value::from(decode(t).unwrap_or_default()));
            if let [id] = rest {
                p.insert("id".into(), Value::from(decode(id).unwrap_or_default()));
            }
            one(method, push_config(shared, method, &p))
        }
        (&M::GET, ["extendedAgentCard"]) => one(
            "GetExtendedAgentCard",
            call(shared, "GetExtendedAgentCard", &params),
        ),
        _ => Err(fail(Kind::MethodNotFound, "no such route")),
    }
}

/// `%XX` decoding of a path segment or query value; `None` for a bad escape or UTF-8.
fn decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}
