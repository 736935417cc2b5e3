//! A message's wire bytes read into its ProtoJSON, and ProtoJSON written back as wire bytes
//! (proto3's JSON mapping: lowerCamelCase names, enums by name, 64-bit integers as strings,
//! Timestamps as RFC 3339, Struct and Value as plain JSON, bytes as base64; fields at their
//! default left out). That JSON is what the JSON-RPC and HTTP+JSON bindings carry, so a
//! message read here is the same document another binding's client would have sent.

use prost::Message;
use prost_reflect::{DeserializeOptions, DynamicMessage, MessageDescriptor};
use serde_json::Value;

/// A message of type `desc` read from its wire bytes into ProtoJSON; why not, for a person.
pub fn to_json(desc: &MessageDescriptor, bytes: &[u8]) -> Result<Value, String> {
    let message = DynamicMessage::decode(desc.clone(), bytes)
        .map_err(|e| format!("not a {}: {e}", desc.name()))?;
    let mut v =
        serde_json::to_value(&message).map_err(|e| format!("{} as JSON: {e}", desc.name()))?;
    whole_numbers(&mut v);
    Ok(v)
}

/// A Struct's numbers are doubles on the wire: one with no fraction is written as an integer
/// (`1`, not `1.0`), as protobuf's Go and JavaScript JSON writers and every JSON client do.
fn whole_numbers(v: &mut Value) {
    match v {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64() {
                if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
                    *v = Value::from(f as i64);
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(whole_numbers),
        Value::Object(o) => o.values_mut().for_each(whole_numbers),
        _ => {}
    }
}

/// ProtoJSON of a message of type `desc` written as its wire bytes; why not, for a person.
/// Fields the proto does not know are left out (an agent's extras, a neutral answer's own),
/// as a proto reader skips unknown fields; proto field names are read as JSON names too.
pub fn to_bytes(desc: &MessageDescriptor, json: &Value) -> Result<Vec<u8>, String> {
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let message = DynamicMessage::deserialize_with_options(desc.clone(), json, &options)
        .map_err(|e| format!("not a {}: {e}", desc.name()))?;
    Ok(message.encode_to_vec())
}

/// [`to_bytes`] of ProtoJSON still as its bytes: read straight into the message, no JSON tree
/// between (an answer the gateway wrote itself, a stored stream event).
pub fn slice_to_bytes(desc: &MessageDescriptor, json: &[u8]) -> Result<Vec<u8>, String> {
    let options = DeserializeOptions::new().deny_unknown_fields(false);
    let mut de = serde_json::Deserializer::from_slice(json);
    let message = DynamicMessage::deserialize_with_options(desc.clone(), &mut de, &options)
        .map_err(|e| format!("not a {}: {e}", desc.name()))?;
    de.end()
        .map_err(|e| format!("not a {}: {e}", desc.name()))?;
    Ok(message.encode_to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_send_message_request_goes_both_ways_as_proto_json() {
        let desc = crate::rpc("SendMessage").expect("SendMessage").input;
        let doc = json!({
            "tenant": "echo",
            "message": {"messageId": "m1", "role": "ROLE_USER", "contextId": "c1",
                "parts": [{"text": "hi"}, {"data": {"k": [1, "two", null]}},
                          {"raw": "AAEC", "mediaType": "application/octet-stream"}],
                "metadata": {"x": true}},
            "configuration": {"historyLength": 3, "acceptedOutputModes": ["text/plain"]}
        });
        let bytes = to_bytes(&desc, &doc).expect("written");
        assert_eq!(to_json(&desc, &bytes).expect("read"), doc);
    }

    #[test]
    fn unknown_fields_are_dropped_and_a_wrong_type_is_refused() {
        let desc = crate::message("lf.a2a.v1.Task");
        let bytes = to_bytes(
            &desc,
            &json!({"id": "t", "kind": "task", "status": {"state": "TASK_STATE_WORKING",
                "timestamp": "2026-01-02T03:04:05.678Z"}}),
        )
        .expect("written");
        assert_eq!(
            to_json(&desc, &bytes).expect("read"),
            json!({"id": "t", "status": {"state": "TASK_STATE_WORKING",
                "timestamp": "2026-01-02T03:04:05.678Z"}})
        );
        let from_slice = slice_to_bytes(
            &desc,
            br#"{"id": "t", "kind": "task", "status": {"state": "TASK_STATE_WORKING",
                "timestamp": "2026-01-02T03:04:05.678Z"}}"#,
        )
        .expect("written from bytes");
        assert_eq!(from_slice, bytes);
        assert!(slice_to_bytes(&desc, b"{} trailing").is_err());
        let bad = to_bytes(&desc, &json!({"id": 7})).expect_err("refused");
        assert!(bad.contains("Task"), "{bad}");
        assert!(to_json(&desc, &[0xff, 0xff, 0xff]).is_err());
    }
}
