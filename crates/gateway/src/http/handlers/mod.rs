//! One file per route family. A handler takes the state, what the pipeline knows of the request
//! ([`Ctx`](super::pipeline::Ctx)) and the request, and returns an answer or an
//! [`ApiError`](super::error::ApiError). Handlers do not import each other: what several need
//! lives in `exchange` (talking to agents), `request` (reading requests) and `response`.

pub mod admin;
pub mod artifacts;
pub mod catalog;
pub mod events;
pub mod notifications;
pub mod probes;
pub mod streams;
pub mod tasks;
pub mod ui;
