//! gRPC statuses: the codes, `grpc-message`'s percent-encoding, `grpc-timeout`, and
//! `grpc-status-details-bin` (a google.rpc.Status, base64) written from, and read into, the
//! JSON the HTTP+JSON binding writes an error as (§11.6: `{"error": {code, status, message,
//! details}}`, details with `@type`): one shape of an error for every binding.

use std::time::Duration;

use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use base64::Engine;
use prost::Message;
use serde_json::{json, Map, Value};
use tonic_types::pb;

/// `@type` of a google.rpc.ErrorInfo detail (as the JSON bindings write it).
pub const ERROR_INFO_TYPE: &str = "type.googleapis.com/google.rpc.ErrorInfo";
/// `@type` of a google.rpc.BadRequest detail.
pub const BAD_REQUEST_TYPE: &str = "type.googleapis.com/google.rpc.BadRequest";
/// `@type` of a google.rpc.RetryInfo detail.
pub const RETRY_INFO_TYPE: &str = "type.googleapis.com/google.rpc.RetryInfo";

/// The gRPC status codes by number, with their names (google/rpc/code.proto).
const CODES: [&str; 17] = [
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
];

/// `OK`.
pub const OK: u32 = 0;
/// `DEADLINE_EXCEEDED`.
pub const DEADLINE_EXCEEDED: u32 = 4;
/// `UNIMPLEMENTED`.
pub const UNIMPLEMENTED: u32 = 12;
/// `INTERNAL`.
pub const INTERNAL: u32 = 13;

/// The number of the code named `name` (`UNKNOWN` for a name that is no code).
pub fn code_of(name: &str) -> u32 {
    CODES.iter().position(|c| *c == name).unwrap_or(2) as u32
}

/// The name of code `code` (`UNKNOWN` past the last).
pub fn name_of(code: u32) -> &'static str {
    CODES.get(code as usize).copied().unwrap_or("UNKNOWN")
}

/// The HTTP status a gRPC code stands for (Google's mapping, google/rpc/code.proto), for an
/// error read from a gRPC peer into the HTTP+JSON shape.
pub fn http_of(code: u32) -> u16 {
    match name_of(code) {
        "OK" => 200,
        "CANCELLED" => 499,
        "INVALID_ARGUMENT" | "FAILED_PRECONDITION" | "OUT_OF_RANGE" => 400,
        "DEADLINE_EXCEEDED" => 504,
        "NOT_FOUND" => 404,
        "ALREADY_EXISTS" | "ABORTED" => 409,
        "PERMISSION_DENIED" => 403,
        "RESOURCE_EXHAUSTED" => 429,
        "UNIMPLEMENTED" => 501,
        "UNAVAILABLE" => 503,
        "UNAUTHENTICATED" => 401,
        _ => 500,
    }
}

/// `grpc-message` as gRPC writes it: UTF-8, every byte outside printable ASCII and `%`
/// percent-encoded.
pub fn encode_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    for b in message.bytes() {
        if (0x20..=0x7e).contains(&b) && b != b'%' {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// `grpc-message` read back (a bad escape is kept as it is, as gRPC's readers do).
pub fn decode_message(message: &str) -> String {
    let bytes = message.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
            if let Some(b) = hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `grpc-timeout` read: at most 8 digits and a unit (`H`, `M`, `S`, `m`, `u`, `n`).
pub fn read_timeout(value: &str) -> Option<Duration> {
    let (digits, unit) = value.split_at(value.len().checked_sub(1)?);
    if digits.is_empty() || digits.len() > 8 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: u64 = digits.parse().ok()?;
    Some(match unit {
        "H" => Duration::from_secs(n * 3600),
        "M" => Duration::from_secs(n * 60),
        "S" => Duration::from_secs(n),
        "m" => Duration::from_millis(n),
        "u" => Duration::from_micros(n),
        "n" => Duration::from_nanos(n),
        _ => return None,
    })
}

/// `grpc-timeout` written, in milliseconds (at most 8 digits: longer is written in seconds).
pub fn write_timeout(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 100_000_000 {
        format!("{ms}m")
    } else {
        format!("{}S", d.as_secs().min(99_999_999))
    }
}

/// An error as a gRPC status: its code, `grpc-message`, and `grpc-status-details-bin`.
#[derive(Debug, Clone, PartialEq)]
pub struct Written {
    /// `grpc-status`.
    pub code: u32,
    /// `grpc-message`, encoded.
    pub message: String,
    /// `grpc-status-details-bin`: the google.rpc.Status, base64 without padding.
    pub details_bin: String,
}

/// The error of an HTTP+JSON body (`{"error": {status, message, details}}`) as a gRPC status:
/// its `status` name is the code, its ErrorInfo and BadRequest details carried as they are;
/// `retry_after`: a RetryInfo detail is added (the HTTP bindings' `Retry-After`).
pub fn write(error_body: &Value, retry_after: Option<Duration>) -> Written {
    let e = error_body.get("error").unwrap_or(error_body);
    let code = e
        .get("status")
        .and_then(Value::as_str)
        .map_or(INTERNAL, code_of);
    let message = e
        .get("message")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut details = Vec::new();
    for d in e
        .get("details")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        match d.get("@type").and_then(Value::as_str) {
            Some(ERROR_INFO_TYPE) => {
                let info = pb::ErrorInfo {
                    reason: str_at(d, "reason"),
                    domain: str_at(d, "domain"),
                    metadata: d
                        .get("metadata")
                        .and_then(Value::as_object)
                        .map(|m| {
                            m.iter()
                                .map(|(k, v)| {
                                    (k.clone(), v.as_str().map_or(v.to_string(), str::to_owned))
                                })
                                .collect()
                        })
                        .unwrap_or_default(),
                };
                details.push(any(ERROR_INFO_TYPE, &info));
            }
            Some(BAD_REQUEST_TYPE) => {
                let field_violations = d
                    .get("fieldViolations")
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .map(|v| pb::bad_request::FieldViolation {
                        field: str_at(v, "field"),
                        description: str_at(v, "description"),
                        ..Default::default()
                    })
                    .collect();
                details.push(any(BAD_REQUEST_TYPE, &pb::BadRequest { field_violations }));
            }
            _ => {}
        }
    }
    if let Some(after) = retry_after {
        let info = pb::RetryInfo {
            retry_delay: Some(prost_types::Duration {
                seconds: after.as_secs().min(i64::MAX as u64) as i64,
                nanos: after.subsec_nanos() as i32,
            }),
        };
        details.push(any(RETRY_INFO_TYPE, &info));
    }
    let status = pb::Status {
        code: code as i32,
        message: message.clone(),
        details,
    };
    Written {
        code,
        message: encode_message(&message),
        details_bin: STANDARD_NO_PAD.encode(status.encode_to_vec()),
    }
}

/// A gRPC status read into the HTTP+JSON error body: `code` (`grpc-status`), `message`
/// (`grpc-message`, decoded) and the details of `details_bin` (`grpc-status-details-bin`, when
/// sent and readable: its ErrorInfo and BadRequest kept, RetryInfo read as `retry_after`).
pub fn read(code: u32, message: &str, details_bin: Option<&str>) -> (Value, Option<Duration>) {
    let mut message = decode_message(message);
    let mut details = Vec::new();
    let mut retry_after = None;
    let status = details_bin
        .and_then(|b| {
            let b = b.trim();
            STANDARD_NO_PAD
                .decode(b)
                .or_else(|_| STANDARD.decode(b))
                .ok()
        })
        .and_then(|bytes| pb::Status::decode(bytes.as_slice()).ok());
    if let Some(status) = status {
        if message.is_empty() {
            message = status.message;
        }
        for d in status.details {
            match d.type_url.as_str() {
                ERROR_INFO_TYPE => {
                    if let Ok(i) = pb::ErrorInfo::decode(d.value.as_slice()) {
                        let metadata: Map<String, Value> = i
                            .metadata
                            .into_iter()
                            .map(|(k, v)| (k, Value::String(v)))
                            .collect();
                        details.push(json!({"@type": ERROR_INFO_TYPE, "reason": i.reason,
                            "domain": i.domain, "metadata": metadata}));
                    }
                }
                BAD_REQUEST_TYPE => {
                    if let Ok(b) = pb::BadRequest::decode(d.value.as_slice()) {
                        let violations: Vec<Value> = b
                            .field_violations
                            .into_iter()
                            .map(|v| json!({"field": v.field, "description": v.description}))
                            .collect();
                        details.push(
                            json!({"@type": BAD_REQUEST_TYPE, "fieldViolations": violations}),
                        );
                    }
                }
                RETRY_INFO_TYPE => {
                    retry_after = pb::RetryInfo::decode(d.value.as_slice())
                        .ok()
                        .and_then(|r| r.retry_delay)
                        .map(|d| Duration::new(d.seconds.max(0) as u64, d.nanos.max(0) as u32));
                }
                _ => {}
            }
        }
    }
    let body = json!({"error": {"code": http_of(code), "status": name_of(code),
        "message": message, "details": details}});
    (body, retry_after)
}

fn str_at(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_owned()
}

fn any(type_url: &str, m: &impl Message) -> prost_types::Any {
    prost_types::Any {
        type_url: type_url.to_owned(),
        value: m.encode_to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_body_goes_through_a_grpc_status_and_back() {
        let body = json!({"error": {"code": 429, "status": "RESOURCE_EXHAUSTED",
        "message": "RATE_LIMITED: slow down ✓ 100%",
        "details": [
            {"@type": ERROR_INFO_TYPE, "reason": "RATE_LIMITED", "domain": "a2a-gateway",
             "metadata": {"limit": "5"}},
            {"@type": BAD_REQUEST_TYPE, "fieldViolations": [{"field": "message.parts", "description": "empty"}]}
        ]}});
        let w = write(&body, Some(Duration::from_secs(2)));
        assert_eq!(w.code, 8);
        assert!(
            w.message.is_ascii() && w.message.contains("100%25"),
            "{}",
            w.message
        );
        let (back, retry) = read(w.code, &w.message, Some(&w.details_bin));
        assert_eq!(back, body);
        assert_eq!(retry, Some(Duration::from_secs(2)));
    }

    #[test]
    fn a_status_without_details_reads_as_its_code() {
        let (body, retry) = read(5, "no such task", None);
        assert_eq!(body["error"]["code"], 404);
        assert_eq!(body["error"]["status"], "NOT_FOUND");
        assert_eq!(body["error"]["message"], "no such task");
        assert_eq!(retry, None);
        let (garbled, _) = read(14, "", Some("!!not base64"));
        assert_eq!(garbled["error"]["status"], "UNAVAILABLE");
        assert_eq!(code_of("NOPE"), 2);
        assert_eq!(name_of(99), "UNKNOWN");
    }

    #[test]
    fn timeouts_are_read_in_every_unit_and_bad_ones_refused() {
        assert_eq!(read_timeout("250m"), Some(Duration::from_millis(250)));
        assert_eq!(read_timeout("2S"), Some(Duration::from_secs(2)));
        assert_eq!(read_timeout("1H"), Some(Duration::from_secs(3600)));
        assert_eq!(read_timeout("5n"), Some(Duration::from_nanos(5)));
        for bad in ["", "m", "123456789m", "1x", "-1S", "1.5S"] {
            assert_eq!(read_timeout(bad), None, "{bad}");
        }
        assert_eq!(write_timeout(Duration::from_millis(1500)), "1500m");
        assert_eq!(
            read_timeout(&write_timeout(Duration::from_secs(200_000))),
            Some(Duration::from_secs(200_000))
        );
    }

    #[test]
    fn messages_are_percent_encoded_both_ways() {
        let m = "tâche 50% done\n";
        let e = encode_message(m);
        assert_eq!(e, "t%C3%A2che 50%25 done%0A");
        assert_eq!(decode_message(&e), m);
        assert_eq!(decode_message("bad %zz and %4"), "bad %zz and %4");
    }
}
