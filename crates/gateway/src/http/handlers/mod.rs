//! The routes every protocol shares, one file per family: probes, the catalog and cards, the
//! fleet page and its snapshot, `/events`, and the admin API. A handler takes the state, what
//! the pipeline knows of the request ([`Ctx`](super::context::Ctx)) and the request, and
//! returns an answer or an [`ApiError`](super::error::ApiError). Handlers do not import each
//! other; a protocol's own routes are in its folder (`http::clawpedia`).

pub mod admin;
pub mod catalog;
pub mod events;
pub mod listing;
pub mod probes;
pub mod ui;
