//! The HTTP edge.
//!
//! - `server`: the listener and accept loop; each connection goes to hyper (HTTP/1.1, h2c) or,
//!   for an HTTP/1.1 task-stream GET, to the `lean` path. Both are transports only.
//! - `pipeline`: the one ordered request pipeline every request goes through, whatever its
//!   connection path (read its module doc first).
//! - `admission`: stage 3, who the caller is and what it may do (with `crate::auth`).
//! - `cors`: browser access for the configured origins (preflights, and the answer's headers).
//! - `context`: the connection and the request context the pipeline hands to handlers.
//! - `route`: every route, parsed from the path, with what the pipeline asks of it (its label,
//!   its caller's needs, its errors' shape).
//! - `dispatch`: which handler answers which route.
//! - `handlers/`: the routes every protocol shares, one file per family.
//! - `clawpedia/`: the Clawpedia protocol's routes (create, get, cancel, artifacts, streams,
//!   push notifications).
//! - `a2a/`: the official A2A routes, and its wire forms (`a2a/wire/`: one module per version
//!   and binding).
//! - `exchange/`: how handlers talk to agents, as named steps (resolve, admit, call, judge,
//!   record, relay).
//! - `create/`: the create path: its driver (which outlives a timed-out request), the
//!   `Idempotency-Key`, and a task recorded once the ledger answers.
//! - `request`, `response`, `body`: reading requests, building answers, the answer body.
//! - `error`: the error body, and the one place domain errors become answers.
//! - `openapi`: the OpenAPI 3.1 document of every route (`openapi.json`, served at
//!   `GET /openapi.json`), and the tests that keep it and the router in agreement.

pub mod a2a;
pub mod admission;
pub mod body;
mod clawpedia;
pub mod context;
mod cors;
mod create;
mod dispatch;
pub mod error;
mod exchange;
mod handlers;
mod lean;
mod linger;
pub mod openapi;
pub mod pipeline;
mod public;
pub mod replicas;
pub mod request;
mod response;
pub mod route;
mod server;

pub use create::{drain_late_answers, LATE_DRAIN, MAX_LATE_ANSWERS};
pub use server::{bind, serve};
