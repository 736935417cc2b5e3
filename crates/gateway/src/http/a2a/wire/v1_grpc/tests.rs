use super::*;
use crate::http::a2a::frame::neutral;
use http_body_util::BodyExt;
use serde_json::json;

/// A response's data and trailers, collected.
fn collect(res: Response<Body>) -> (HeaderMap, Bytes, Option<HeaderMap>) {
    let (parts, body) = res.into_parts();
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a runtime");
    let collected = rt.block_on(body.collect()).expect("a body");
    let trailers = collected.trailers().cloned();
    (parts.headers, collected.to_bytes(), trailers)
}

fn details(h: &HeaderMap) -> Value {
    let text = |n: &str| h.get(n).and_then(|v| v.to_str().ok());
    let code = text("grpc-status")
        .and_then(|c| c.parse().ok())
        .expect("a status");
    status::read(
        code,
        text("grpc-message").unwrap_or(""),
        text("grpc-status-details-bin"),
    )
    .0
}

#[test]
fn a_request_is_read_into_the_neutral_call_with_its_tenant() {
    let rpc = a2a_grpc::rpc("SendMessage").expect("rpc");
    let doc = json!({"tenant": "echo", "message": {"messageId": "m", "role": "ROLE_USER",
        "parts": [{"text": "hi"}]}});
    let body = frame::encode(&json::to_bytes(&rpc.input, &doc).expect("bytes"));
    let Read::Call(call, _) = V1Grpc.read(
        &Verb::POST,
        "/lf.a2a.v1.A2AService/SendMessage",
        None,
        &body,
    ) else {
        panic!("a call")
    };
    assert_eq!(call.method, Method::SendMessage);
    assert_eq!(Value::Object(call.params), doc);
    // An empty body is the empty message.
    let Read::Call(call, _) =
        V1Grpc.read(&Verb::POST, "/lf.a2a.v1.A2AService/ListTasks", None, b"")
    else {
        panic!("a call")
    };
    assert_eq!(call.method, Method::ListTasks);
    assert!(call.params.is_empty());
}

#[test]
fn an_unknown_method_0_3s_service_and_bad_bytes_are_refused_in_grpc_statuses() {
    for path in [
        "/a2a.v1.A2AService/SendMessage",
        "/lf.a2a.v1.A2AService/Nope",
    ] {
        let Read::Refused(e, echo) = V1Grpc.read(&Verb::POST, path, None, b"") else {
            panic!("refused")
        };
        let res = V1Grpc.answer(
            &echo,
            Method::SendMessage,
            neutral(Method::SendMessage, Err(e.into())),
        );
        assert_eq!(res.status(), 200);
        let (h, data, _) = collect(res);
        assert!(data.is_empty(), "trailers-only");
        assert_eq!(h["grpc-status"], "12", "{path}");
        assert_eq!(h["content-type"], "application/grpc");
    }
    let garbage = frame::encode(&[0xff, 0xff, 0xff]);
    let Read::Refused(e, _) =
        V1Grpc.read(&Verb::POST, "/lf.a2a.v1.A2AService/GetTask", None, &garbage)
    else {
        panic!("refused")
    };
    assert_eq!(e.kind, ErrorKind::ParseError);
    let mut compressed = frame::encode(b"").to_vec();
    compressed[0] = 1;
    assert!(matches!(
        V1Grpc.read(
            &Verb::POST,
            "/lf.a2a.v1.A2AService/GetTask",
            None,
            &compressed
        ),
        Read::Refused(..)
    ));
}

#[test]
fn a_success_is_the_message_then_status_ok() {
    let task = json!({"id": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}});
    let res = V1Grpc.answer(
        &Echo(None),
        Method::GetTask,
        neutral(Method::GetTask, Ok(task.clone())),
    );
    let (h, data, trailers) = collect(res);
    assert_eq!(h["content-type"], "application/grpc");
    let message = frame::read_one(&data, 1 << 20).expect("one message");
    let out = a2a_grpc::rpc("GetTask").expect("rpc").output;
    assert_eq!(json::to_json(&out, message).expect("a Task"), task);
    assert_eq!(trailers.expect("trailers")["grpc-status"], "0");
    // Delete answers the empty message.
    let res = V1Grpc.answer(
        &Echo(None),
        Method::DeleteTaskPushNotificationConfig,
        neutral(Method::DeleteTaskPushNotificationConfig, Ok(json!({}))),
    );
    let (_, data, trailers) = collect(res);
    assert_eq!(&data[..], &[0, 0, 0, 0, 0]);
    assert_eq!(trailers.expect("trailers")["grpc-status"], "0");
}

#[test]
fn the_gateways_errors_carry_the_tables_code_reason_and_retry_info() {
    let cases = [
        (Code::Unauthorized, 16, "UNAUTHENTICATED"),
        (Code::Forbidden, 7, "PERMISSION_DENIED"),
        (Code::RateLimited, 8, "RESOURCE_EXHAUSTED"),
        (Code::PayloadTooLarge, 8, "RESOURCE_EXHAUSTED"),
        (Code::AgentBusy, 14, "UNAVAILABLE"),
        (Code::AgentTimeout, 4, "DEADLINE_EXCEEDED"),
    ];
    for (code, number, name) in cases {
        let e = ApiError::new(code, "no")
            .with_header(hyper::header::RETRY_AFTER, HeaderValue::from_static("3"));
        let (h, _, _) = collect(V1Grpc.refusal(e));
        assert_eq!(h["grpc-status"], number.to_string().as_str(), "{code:?}");
        let d = details(&h);
        assert_eq!(d["error"]["status"], name);
        assert_eq!(d["error"]["details"][0]["reason"], code.as_str());
        assert_eq!(d["error"]["details"][0]["domain"], "a2a-gateway");
        let bin = h["grpc-status-details-bin"].to_str().expect("ascii");
        let (_, retry) = status::read(number, "", Some(bin));
        assert_eq!(retry, Some(std::time::Duration::from_secs(3)), "{code:?}");
    }
    // A stream's ending is its final status.
    let e = A2aError::gateway("DRAINING", 503, "draining");
    let last = V1Grpc.last(None, Some(&e)).expect("a frame");
    let trailers = last.into_trailers().expect("trailers");
    assert_eq!(trailers["grpc-status"], "14");
    assert_eq!(
        details(&trailers)["error"]["details"][0]["reason"],
        "DRAINING"
    );
    let plain = V1Grpc
        .last(None, None)
        .expect("a frame")
        .into_trailers()
        .expect("trailers");
    assert_eq!(plain["grpc-status"], "0");
}

#[test]
fn an_agents_status_is_read_as_its_a2a_error_and_kept_the_agents() {
    let body = A2aError::new(ErrorKind::TaskNotFound, "gone").to_status();
    let w = status::write(&body, None);
    let res = Response::builder()
        .header("content-type", "application/grpc")
        .header("grpc-status", w.code)
        .header("grpc-message", w.message)
        .header("grpc-status-details-bin", w.details_bin)
        .body(())
        .expect("a head");
    let (parts, ()) = res.into_parts();
    let call = Call::new(Method::GetTask, serde_json::Map::new());
    let sent = Sent {
        form: &V1Grpc,
        id: None,
    };
    let e = V1Grpc
        .read_answer(&sent, &call, &parts, b"")
        .expect_err("an error");
    assert_eq!(e.kind, ErrorKind::TaskNotFound);
    assert!(e.agents);
    assert!(
        !V1Grpc.is_stream(&parts.headers),
        "trailers-only is no stream"
    );
    // An agent's status in the gateway's domain is the agent's, not the gateway's.
    let fake = status::write(
        &A2aError::gateway("RATE_LIMITED", 429, "x").to_status(),
        None,
    );
    let (parts, ()) = Response::builder()
        .header("grpc-status", fake.code)
        .header("grpc-status-details-bin", fake.details_bin)
        .body(())
        .expect("a head")
        .into_parts();
    let e = V1Grpc
        .read_answer(&sent, &call, &parts, b"")
        .expect_err("an error");
    assert_eq!(e.kind.domain(), "agent");
}

#[test]
fn a_grpc_agent_is_called_on_the_configured_host_never_the_cards() {
    assert_eq!(
        agent_origin("http://agent.internal:9000", "http://evil.example:50051"),
        "http://agent.internal:50051"
    );
    assert_eq!(
        agent_origin("https://agent.internal", "grpc.example:7443"),
        "https://agent.internal:7443"
    );
    assert_eq!(
        agent_origin("http://127.0.0.1:9000", "127.0.0.1:50051"),
        "http://127.0.0.1:50051"
    );
    assert_eq!(
        agent_origin("http://[::1]:9000", "no port"),
        "http://[::1]:9000"
    );
}

#[test]
fn a_request_no_grpc_client_sends_keeps_its_http_status() {
    let res = V1Grpc.refusal(super::super::not_allowed(&["POST"]));
    assert_eq!(res.status(), 405);
    assert_eq!(res.headers()["allow"], "POST");
    assert!(!res.headers().contains_key("grpc-status"));
    let res = V1Grpc.refusal(ApiError::new(Code::UnsupportedMediaType, "json"));
    assert_eq!(res.status(), 415);
}
