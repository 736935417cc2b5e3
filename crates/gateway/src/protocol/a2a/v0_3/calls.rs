//! 0.3's calls against 1.0's: a call's params read into 1.0's request message and written
//! back out (`params_in`, `params_out`, the send's `send_in`/`send_out`), push configs both
//! ways, and each method's answer both ways (`answer_out`, `answer_in`). The objects inside them
//! (messages, tasks, events) are [`super::model`]'s.

use serde_json::Value;

use super::model::{
    bad, each_out, event_in, event_out, message_in, message_out, object, some, task_in, task_out,
    under, In, Obj, Style,
};
use crate::protocol::a2a::Method;

// ---------------------------------------------------------------------------------------------
// Push configs

/// 0.3's PushNotificationConfig (`{id, url, token, authentication: {schemes, credentials}}`)
/// as the members of 1.0's flat TaskPushNotificationConfig, into `out`.
fn push_in(v: Value, out: &mut Obj) -> In<()> {
    let mut c = object(v, "a PushNotificationConfig")?;
    for k in ["id", "url", "token"] {
        if let Some(x) = some(c.remove(k)) {
            out.insert(k.to_owned(), x);
        }
    }
    if let Some(auth) = some(c.remove("authentication")) {
        let mut a = object(auth, "authentication").map_err(|v| under(v, "/authentication"))?;
        let mut v1 = Obj::new();
        let scheme = match a.remove("schemes") {
            Some(Value::Array(s)) => s.into_iter().next(),
            _ => a.remove("scheme"),
        };
        if let Some(scheme) = scheme {
            v1.insert("scheme".to_owned(), scheme);
        }
        if let Some(c) = some(a.remove("credentials")) {
            v1.insert("credentials".to_owned(), c);
        }
        out.insert("authentication".to_owned(), Value::Object(v1));
    }
    Ok(())
}

/// The 0.3 PushNotificationConfig of a 1.0 TaskPushNotificationConfig.
fn push_out(c: &Obj) -> Value {
    let mut out = Obj::new();
    for k in ["id", "url", "token"] {
        if let Some(x) = c.get(k) {
            out.insert(k.to_owned(), x.clone());
        }
    }
    if let Some(a) = c.get("authentication").and_then(Value::as_object) {
        let mut auth = Obj::new();
        let schemes = a.get("scheme").map_or_else(Vec::new, |s| vec![s.clone()]);
        auth.insert("schemes".to_owned(), Value::Array(schemes));
        if let Some(cr) = a.get("credentials") {
            auth.insert("credentials".to_owned(), cr.clone());
        }
        out.insert("authentication".to_owned(), Value::Object(auth));
    }
    Value::Object(out)
}

/// A 0.3 TaskPushNotificationConfig (a2a.json: `{taskId, pushNotificationConfig}`; proto:
/// `{name: "tasks/{t}/pushNotificationConfigs/{id}", pushNotificationConfig}`) as 1.0's.
pub fn task_push_in(s: Style, v: Value) -> In<Value> {
    let mut c = object(v, "a TaskPushNotificationConfig")?;
    let mut out = Obj::new();
    match s {
        Style::Json => {
            if let Some(t) = some(c.remove("taskId")) {
                out.insert("taskId".to_owned(), t);
            }
        }
        Style::Proto => {
            if let Some(name) = c.remove("name").as_ref().and_then(Value::as_str) {
                let mut segs = name.split('/');
                if let (Some("tasks"), Some(t)) = (segs.next(), segs.next()) {
                    out.insert("taskId".to_owned(), Value::from(t));
                }
                if let (Some("pushNotificationConfigs"), Some(id)) = (segs.next(), segs.next()) {
                    out.insert("id".to_owned(), Value::from(id));
                }
            }
        }
    }
    let pnc = c.remove("pushNotificationConfig").ok_or_else(|| {
        bad(
            "/pushNotificationConfig",
            "a pushNotificationConfig is required",
        )
    })?;
    push_in(pnc, &mut out).map_err(|v| under(v, "/pushNotificationConfig"))?;
    Ok(Value::Object(out))
}

/// A 1.0 TaskPushNotificationConfig as 0.3's.
pub fn task_push_out(s: Style, v: &Value) -> Value {
    let empty = Obj::new();
    let c = v.as_object().unwrap_or(&empty);
    let task = c.get("taskId").and_then(Value::as_str).unwrap_or("");
    let mut out = Obj::new();
    match s {
        Style::Json => {
            out.insert("taskId".to_owned(), Value::from(task));
        }
        Style::Proto => {
            let id = c.get("id").and_then(Value::as_str).unwrap_or("");
            out.insert(
                "name".to_owned(),
                Value::from(format!("tasks/{task}/pushNotificationConfigs/{id}")),
            );
        }
    }
    out.insert("pushNotificationConfig".to_owned(), push_out(c));
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Send requests

/// The member of a send configuration holding its push config.
fn push_key(s: Style) -> &'static str {
    match s {
        Style::Json => "pushNotificationConfig",
        Style::Proto => "pushNotification",
    }
}

/// 0.3's MessageSendParams (a2a.json) or SendMessageRequest (proto) as 1.0's
/// SendMessageRequest: `blocking` is 1.0's `returnImmediately` negated (absent from a2a.json,
/// it blocks; absent from a proto configuration, it does not: proto3 leaves `false` out), a
/// `historyLength` of 0 (0.3's "all") is left out.
pub fn send_in(s: Style, mut p: Obj) -> In<Obj> {
    let mut out = Obj::new();
    let (key, mut message) = p
        .remove_entry("message")
        .ok_or_else(|| bad("/message", "a message is required"))?;
    message = message_in(s, message).map_err(|v| under(v, "/message"))?;
    out.insert(key, message);
    if let Some(c) = some(p.remove("configuration")) {
        let mut c = object(c, "configuration").map_err(|v| under(v, "/configuration"))?;
        let mut v1 = Obj::new();
        if let Some(m) = some(c.remove("acceptedOutputModes")) {
            v1.insert("acceptedOutputModes".to_owned(), m);
        }
        // On the proto's JSON a `false` is left out (a2a-sdk 0.3 writes it so), so a
        // configuration without `blocking` does not block, as 0.3's servers read it there.
        let blocking = c.remove("blocking").as_ref().and_then(Value::as_bool);
        match (blocking, s) {
            (Some(b), _) => {
                v1.insert("returnImmediately".to_owned(), Value::Bool(!b));
            }
            (None, Style::Proto) => {
                v1.insert("returnImmediately".to_owned(), Value::Bool(true));
            }
            (None, Style::Json) => {}
        }
        if let Some(h) = some(c.remove("historyLength")).filter(|h| h.as_i64() != Some(0)) {
            v1.insert("historyLength".to_owned(), h);
        }
        if let Some(push) = some(c.remove(push_key(s))) {
            let mut tp = Obj::new();
            push_in(push, &mut tp)
                .map_err(|v| under(v, &format!("/configuration/{}", push_key(s))))?;
            v1.insert("taskPushNotificationConfig".to_owned(), Value::Object(tp));
        }
        out.insert("configuration".to_owned(), Value::Object(v1));
    }
    if let Some(m) = some(p.remove("metadata")) {
        out.insert("metadata".to_owned(), m);
    }
    Ok(out)
}

/// 1.0's SendMessageRequest as 0.3's (the tenant left out: 0.3 has none).
pub fn send_out(s: Style, p: &Obj) -> Value {
    let mut out = Obj::new();
    if let Some(m) = p.get("message") {
        out.insert("message".to_owned(), message_out(s, m.clone()));
    }
    let c = p.get("configuration").and_then(Value::as_object);
    let mut v03 = Obj::new();
    let immediately = c
        .and_then(|c| c.get("returnImmediately"))
        .and_then(Value::as_bool)
        .unwrap_or(false);
    v03.insert("blocking".to_owned(), Value::Bool(!immediately));
    if let Some(c) = c {
        if let Some(m) = c.get("acceptedOutputModes") {
            v03.insert("acceptedOutputModes".to_owned(), m.clone());
        }
        if let Some(h) = c.get("historyLength") {
            v03.insert("historyLength".to_owned(), h.clone());
        }
        if let Some(tp) = c
            .get("taskPushNotificationConfig")
            .and_then(Value::as_object)
        {
            v03.insert(push_key(s).to_owned(), push_out(tp));
        }
    }
    out.insert("configuration".to_owned(), Value::Object(v03));
    if let Some(m) = p.get("metadata") {
        out.insert("metadata".to_owned(), m.clone());
    }
    Value::Object(out)
}

// ---------------------------------------------------------------------------------------------
// Answers, by method

/// A 1.0 response message of `method` as 0.3 writes it (`Json`: the JSON-RPC `result`;
/// `Proto`: the HTTP+JSON body).
pub fn answer_out(s: Style, method: Method, v: Value) -> Value {
    match method {
        Method::SendMessage | Method::SendStreamingMessage | Method::SubscribeToTask => {
            event_out(s, v)
        }
        Method::GetTask | Method::CancelTask => task_out(s, v),
        Method::CreateTaskPushNotificationConfig | Method::GetTaskPushNotificationConfig => {
            task_push_out(s, &v)
        }
        Method::ListTaskPushNotificationConfigs => {
            let configs: Vec<Value> = v
                .get("configs")
                .and_then(Value::as_array)
                .map(|c| c.iter().map(|c| task_push_out(s, c)).collect())
                .unwrap_or_default();
            match s {
                Style::Json => Value::Array(configs),
                Style::Proto => {
                    let mut out = Obj::new();
                    out.insert("configs".to_owned(), Value::Array(configs));
                    if let Some(t) = v.get("nextPageToken") {
                        out.insert("nextPageToken".to_owned(), t.clone());
                    }
                    Value::Object(out)
                }
            }
        }
        Method::DeleteTaskPushNotificationConfig => match s {
            Style::Json => Value::Null,
            Style::Proto => Value::Object(Obj::new()),
        },
        Method::ListTasks => {
            let Value::Object(mut o) = v else {
                return v;
            };
            if let Some(tasks) = o.remove("tasks") {
                o.insert("tasks".to_owned(), each_out(s, tasks, task_out));
            }
            Value::Object(o)
        }
        // The served card already carries 0.3's fields beside 1.0's.
        Method::GetExtendedAgentCard => v,
    }
}

/// A 0.3 agent's answer to `method` as 1.0's response message.
pub fn answer_in(s: Style, method: Method, v: Value) -> In<Value> {
    match method {
        Method::SendMessage | Method::SendStreamingMessage | Method::SubscribeToTask => {
            event_in(s, v)
        }
        Method::GetTask | Method::CancelTask => task_in(s, v),
        Method::CreateTaskPushNotificationConfig | Method::GetTaskPushNotificationConfig => {
            task_push_in(s, v)
        }
        Method::ListTaskPushNotificationConfigs => {
            let list = match (s, v) {
                (_, Value::Array(a)) => a,
                (_, Value::Object(mut o)) => match o.remove("configs") {
                    Some(Value::Array(a)) => a,
                    _ => Vec::new(),
                },
                _ => Vec::new(),
            };
            let configs = list
                .into_iter()
                .enumerate()
                .map(|(i, c)| task_push_in(s, c).map_err(|v| under(v, &format!("/{i}"))))
                .collect::<In<Vec<Value>>>()?;
            Ok(Value::Object(Obj::from_iter([(
                "configs".to_owned(),
                Value::Array(configs),
            )])))
        }
        Method::DeleteTaskPushNotificationConfig => Ok(Value::Object(Obj::new())),
        Method::GetExtendedAgentCard => Ok(super::card::to_v1(v)),
        Method::ListTasks => Ok(v),
    }
}

/// A 0.3 JSON-RPC call's params (a2a.json) as 1.0's request message of `method`.
pub fn params_in(method: Method, mut p: Obj) -> In<Obj> {
    let s = Style::Json;
    let take = |p: &mut Obj, k: &str| some(p.remove(k));
    let mut out = Obj::new();
    match method {
        Method::SendMessage | Method::SendStreamingMessage => return send_in(s, p),
        Method::GetTask => {
            if let Some(id) = take(&mut p, "id") {
                out.insert("id".to_owned(), id);
            }
            if let Some(h) = take(&mut p, "historyLength").filter(|h| h.as_i64() != Some(0)) {
                out.insert("historyLength".to_owned(), h);
            }
        }
        Method::CancelTask => {
            for k in ["id", "metadata"] {
                if let Some(x) = take(&mut p, k) {
                    out.insert(k.to_owned(), x);
                }
            }
        }
        Method::SubscribeToTask => {
            if let Some(id) = take(&mut p, "id") {
                out.insert("id".to_owned(), id);
            }
        }
        Method::CreateTaskPushNotificationConfig => {
            let Value::Object(mut c) = task_push_in(s, Value::Object(p))? else {
                return Ok(out);
            };
            // 0.3's SDK servers name a config with no id by its task's id.
            if !c.contains_key("id") {
                if let Some(t) = c.get("taskId").cloned() {
                    c.insert("id".to_owned(), t);
                }
            }
            return Ok(c);
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            let task = take(&mut p, "id");
            let id = take(&mut p, "pushNotificationConfigId").or_else(|| task.clone());
            if let Some(t) = task {
                out.insert("taskId".to_owned(), t);
            }
            if let Some(id) = id {
                out.insert("id".to_owned(), id);
            }
        }
        Method::ListTaskPushNotificationConfigs => {
            if let Some(t) = take(&mut p, "id") {
                out.insert("taskId".to_owned(), t);
            }
        }
        Method::GetExtendedAgentCard => {}
        Method::ListTasks => return Ok(p),
    }
    Ok(out)
}

/// 1.0's request message of `method` as a 0.3 JSON-RPC call's params (a2a.json).
pub fn params_out(method: Method, p: &Obj) -> Value {
    let s = Style::Json;
    let mut out = Obj::new();
    let copy = |out: &mut Obj, from: &str, to: &str| {
        if let Some(x) = p.get(from) {
            out.insert(to.to_owned(), x.clone());
        }
    };
    match method {
        Method::SendMessage | Method::SendStreamingMessage => return send_out(s, p),
        Method::GetTask => {
            copy(&mut out, "id", "id");
            copy(&mut out, "historyLength", "historyLength");
        }
        Method::CancelTask => {
            copy(&mut out, "id", "id");
            copy(&mut out, "metadata", "metadata");
        }
        Method::SubscribeToTask => copy(&mut out, "id", "id"),
        Method::CreateTaskPushNotificationConfig => {
            return task_push_out(s, &Value::Object(p.clone()))
        }
        Method::GetTaskPushNotificationConfig | Method::DeleteTaskPushNotificationConfig => {
            copy(&mut out, "taskId", "id");
            copy(&mut out, "id", "pushNotificationConfigId");
        }
        Method::ListTaskPushNotificationConfigs => copy(&mut out, "taskId", "id"),
        Method::GetExtendedAgentCard | Method::ListTasks => {}
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Obj {
        v.as_object().cloned().expect("an object")
    }

    #[test]
    fn a_json_rpc_send_reads_as_1_0_and_back() {
        let p = obj(json!({
            "message": {"kind": "message", "messageId": "m1", "role": "user", "contextId": null,
                "parts": [
                    {"kind": "text", "text": "hi", "metadata": {"a": 1}},
                    {"kind": "file", "file": {"uri": "https://x/f.png", "mimeType": "image/png", "name": "f.png"}},
                    {"kind": "file", "file": {"bytes": "aGk="}},
                    {"kind": "data", "data": {"k": [1, 2]}}
                ]},
            "configuration": {"blocking": false, "historyLength": 0, "acceptedOutputModes": ["text/plain"],
                "pushNotificationConfig": {"url": "https://h/p", "token": "t",
                    "authentication": {"schemes": ["Bearer"], "credentials": "c"}}},
            "metadata": {"m": true}
        }));
        let v1 = send_in(Style::Json, p).expect("reads");
        assert_eq!(
            Value::Object(v1.clone()),
            json!({
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [
                    {"text": "hi", "metadata": {"a": 1}},
                    {"url": "https://x/f.png", "mediaType": "image/png", "filename": "f.png"},
                    {"raw": "aGk="},
                    {"data": {"k": [1, 2]}}
                ]},
                "configuration": {"returnImmediately": true, "acceptedOutputModes": ["text/plain"],
                    "taskPushNotificationConfig": {"url": "https://h/p", "token": "t",
                        "authentication": {"scheme": "Bearer", "credentials": "c"}}},
                "metadata": {"m": true}
            })
        );
        let back = send_out(Style::Json, &v1);
        assert_eq!(back["message"]["role"], "user");
        assert_eq!(back["message"]["kind"], "message");
        assert_eq!(back["message"]["parts"][1]["file"]["name"], "f.png");
        assert_eq!(
            back["message"]["parts"][3],
            json!({"kind": "data", "data": {"k": [1, 2]}})
        );
        assert_eq!(back["configuration"]["blocking"], false);
        assert_eq!(
            back["configuration"]["pushNotificationConfig"]["authentication"]["schemes"],
            json!(["Bearer"])
        );
    }

    #[test]
    fn blocking_left_out_blocks_in_json_and_not_in_a_proto_configuration() {
        let send = |s, config: Value| {
            let mut p = obj(
                json!({"message": {"messageId": "m", "role": "ROLE_USER", "content": [], "parts": []}}),
            );
            if !config.is_null() {
                p.insert("configuration".to_owned(), config);
            }
            send_in(s, p).expect("reads")
        };
        let json_absent = send(Style::Json, json!({"acceptedOutputModes": []}));
        assert_eq!(json_absent["configuration"].get("returnImmediately"), None);
        let proto_absent = send(Style::Proto, json!({"acceptedOutputModes": []}));
        assert_eq!(proto_absent["configuration"]["returnImmediately"], true);
        let proto_true = send(Style::Proto, json!({"blocking": true}));
        assert_eq!(proto_true["configuration"]["returnImmediately"], false);
        assert_eq!(send(Style::Proto, Value::Null).get("configuration"), None);
    }

    #[test]
    fn push_configs_map_both_ways_in_both_spellings() {
        let v1 = json!({"taskId": "t", "id": "c1", "url": "https://h/p", "token": "tok",
            "authentication": {"scheme": "Bearer", "credentials": "x"}});
        let j = task_push_out(Style::Json, &v1);
        assert_eq!(
            j,
            json!({"taskId": "t", "pushNotificationConfig": {"id": "c1", "url": "https://h/p", "token": "tok",
                "authentication": {"schemes": ["Bearer"], "credentials": "x"}}})
        );
        assert_eq!(task_push_in(Style::Json, j).expect("reads"), v1);
        let p = task_push_out(Style::Proto, &v1);
        assert_eq!(p["name"], "tasks/t/pushNotificationConfigs/c1");
        assert_eq!(task_push_in(Style::Proto, p).expect("reads"), v1);
        // A 0.3 set without an id is named by its task, as 0.3's SDK servers name it.
        let set = params_in(
            Method::CreateTaskPushNotificationConfig,
            obj(json!({"taskId": "t", "pushNotificationConfig": {"url": "https://h/p"}})),
        )
        .expect("reads");
        assert_eq!(
            Value::Object(set),
            json!({"taskId": "t", "id": "t", "url": "https://h/p"})
        );
        let get = params_in(
            Method::GetTaskPushNotificationConfig,
            obj(json!({"id": "t"})),
        )
        .expect("reads");
        assert_eq!(Value::Object(get), json!({"taskId": "t", "id": "t"}));
        let list = answer_out(
            Style::Json,
            Method::ListTaskPushNotificationConfigs,
            json!({"configs": [v1.clone()]}),
        );
        assert_eq!(list[0]["pushNotificationConfig"]["id"], "c1");
        assert_eq!(
            answer_in(Style::Json, Method::ListTaskPushNotificationConfigs, list).expect("reads"),
            json!({"configs": [v1]})
        );
    }

    #[test]
    fn params_out_are_0_3_params() {
        let get = params_out(
            Method::GetTask,
            &obj(json!({"id": "t", "historyLength": 2, "tenant": "x"})),
        );
        assert_eq!(get, json!({"id": "t", "historyLength": 2}));
        let del = params_out(
            Method::DeleteTaskPushNotificationConfig,
            &obj(json!({"taskId": "t", "id": "c"})),
        );
        assert_eq!(del, json!({"id": "t", "pushNotificationConfigId": "c"}));
        let send = params_out(
            Method::SendMessage,
            &obj(
                json!({"tenant": "x", "message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}]}}),
            ),
        );
        assert_eq!(send["configuration"]["blocking"], true);
        assert_eq!(send.get("tenant"), None);
        assert_eq!(
            send["message"]["parts"][0],
            json!({"kind": "text", "text": "a"})
        );
    }
}
