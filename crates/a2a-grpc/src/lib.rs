//! A2A 1.0's gRPC binding (§10) with no I/O, for the gateway and the sample agent alike:
//!
//! - [`rpc`]: the methods of `lf.a2a.v1.A2AService`, with their message descriptors, from
//!   a2a.proto compiled at build time (build.rs);
//! - [`json`]: a message's wire bytes read into its ProtoJSON (the JSON the other two bindings
//!   carry, the gateway's neutral form) and written back;
//! - [`frame`]: gRPC's length-prefixed messages, written and read (bounded);
//! - [`status`]: gRPC status codes, `grpc-message`'s encoding, `grpc-timeout`, and the
//!   google.rpc.Status of `grpc-status-details-bin` written from and read into the JSON shape
//!   the HTTP+JSON binding uses (`{"error": {code, status, message, details}}`).
//!
//! Messages are read by their descriptors (prost-reflect), not through generated types: the
//! gateway never holds a typed message, it translates between bindings, and one reader of
//! ProtoJSON serves every message of the proto.

pub mod frame;
pub mod json;
pub mod status;

use std::sync::OnceLock;

use prost_reflect::{DescriptorPool, MessageDescriptor};

/// The service's full name.
pub const SERVICE: &str = "lf.a2a.v1.A2AService";
/// The path prefix of its methods (`/lf.a2a.v1.A2AService/SendMessage`).
pub const SERVICE_PATH: &str = "/lf.a2a.v1.A2AService/";
/// A2A 0.3's service path prefix (package `a2a.v1`), which the gateway does not serve.
pub const V0_3_SERVICE_PATH: &str = "/a2a.v1.A2AService/";
/// gRPC's media type.
pub const CONTENT_TYPE: &str = "application/grpc";

static DESCRIPTORS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/a2a.bin"));

/// The descriptors of a2a.proto and the well-known types it imports.
pub fn pool() -> &'static DescriptorPool {
    static POOL: OnceLock<DescriptorPool> = OnceLock::new();
    POOL.get_or_init(|| {
        // Compiled by build.rs from the proto in the repo: it decodes, or the build is broken.
        DescriptorPool::decode(DESCRIPTORS).expect("build.rs wrote a valid descriptor set")
    })
}

/// One method of the service.
#[derive(Debug, Clone)]
pub struct Rpc {
    /// Its request message.
    pub input: MessageDescriptor,
    /// Its response message (of each streamed response, for a server stream).
    pub output: MessageDescriptor,
    /// Whether it answers with a server stream.
    pub server_streaming: bool,
}

/// The method of the service named `name` (`SendMessage`), if it has one. Looked up once per
/// process: every gRPC call asks.
pub fn rpc(name: &str) -> Option<Rpc> {
    static RPCS: OnceLock<Vec<(String, Rpc)>> = OnceLock::new();
    let rpcs = RPCS.get_or_init(|| {
        pool()
            .get_service_by_name(SERVICE)
            .map(|service| {
                service
                    .methods()
                    .map(|m| {
                        let rpc = Rpc {
                            input: m.input(),
                            output: m.output(),
                            server_streaming: m.is_server_streaming(),
                        };
                        (m.name().to_owned(), rpc)
                    })
                    .collect()
            })
            .unwrap_or_default()
    });
    rpcs.iter().find(|(n, _)| n == name).map(|(_, r)| r.clone())
}

/// The message of a stream's events, `StreamResponse` (looked up once per process).
pub fn stream_response() -> MessageDescriptor {
    static STREAM_RESPONSE: OnceLock<MessageDescriptor> = OnceLock::new();
    STREAM_RESPONSE
        .get_or_init(|| message("lf.a2a.v1.StreamResponse"))
        .clone()
}

/// A message of the proto by its full name. Only names the proto defines are asked for.
pub fn message(full_name: &str) -> MessageDescriptor {
    pool()
        .get_message_by_name(full_name)
        .unwrap_or_else(|| panic!("a2a.proto defines {full_name}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_of_the_service_is_known_with_its_messages() {
        let names: Vec<String> = pool()
            .get_service_by_name(SERVICE)
            .expect("the service")
            .methods()
            .map(|m| m.name().to_owned())
            .collect();
        assert_eq!(names.len(), 11, "{names:?}");
        let send = rpc("SendMessage").expect("SendMessage");
        assert_eq!(send.input.full_name(), "lf.a2a.v1.SendMessageRequest");
        assert_eq!(send.output.full_name(), "lf.a2a.v1.SendMessageResponse");
        assert!(!send.server_streaming);
        let sub = rpc("SubscribeToTask").expect("SubscribeToTask");
        assert!(sub.server_streaming);
        assert_eq!(sub.output.full_name(), stream_response().full_name());
        let delete = rpc("DeleteTaskPushNotificationConfig").expect("Delete");
        assert_eq!(delete.output.full_name(), "google.protobuf.Empty");
        assert!(rpc("message/send").is_none());
    }
}
