//! Webhook delivery to subscribers: the pure building blocks.
//!
//! [`sign`] writes and checks Standard Webhooks signatures, [`guard`] decides which subscriber
//! URLs and resolved addresses may be reached, and [`retry`] holds the schedule and the meaning of
//! each response. None of them touches a queue. The delivery design they serve: every accepted
//! task status change becomes one delivery per matching subscriber, written to the durable queue
//! (a Redis stream with a consumer group, or the in-process store without Redis) before the
//! change is acknowledged, so a crash loses nothing and at worst delivers twice under the same
//! `webhook-id` for receivers to deduplicate. A worker takes a delivery, has the guard resolve the
//! URL, connects only to the addresses it approved, never follows a redirect, signs the exact body
//! it sends, and classifies the result: delivered deliveries are acknowledged, retried ones wait in
//! a delayed set for [`retry::Schedule::next_delay`] and move back to the stream atomically,
//! exhausted ones become dead letters, and a 410 disables the subscriber. Deliveries for one
//! subscriber and task go out one at a time, in order.

pub mod guard;
pub mod queue;
pub mod retry;
pub mod send;
pub mod sign;
pub mod worker;
