//! Webhook delivery to subscribers.
//!
//! Pure parts: [`sign`] writes and checks Standard Webhooks signatures, [`guard`] decides which
//! subscriber URLs and resolved addresses may be reached, and [`retry`] holds the schedule and
//! the meaning of each response. Edge parts: [`queue`] is the durable queue behind one trait
//! (Redis lanes, stream and scripts, or in process), [`send`] makes one attempt, and [`worker`]
//! runs them. Every accepted task status change becomes one delivery per matching subscriber,
//! queued in the same atomic step that records it (the ledger's outbox), so a crash loses
//! nothing and at worst delivers twice under the same `webhook-id` for receivers to
//! deduplicate. Deliveries for one subscriber and task go out one at a time, in order. The
//! design, as built: docs/webhook-delivery.md.

pub mod guard;
pub mod queue;
pub mod retry;
pub mod send;
pub mod sign;
pub mod worker;
