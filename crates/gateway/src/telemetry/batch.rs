//! Finished spans on their way to the exporter.
//!
//! The SDK's batch processor sends every finished span through a channel to its export task,
//! which wakes that task for each span: a futex wake and a context switch per span, on the
//! request's thread, four or five per request. Measured on the create path, that more than
//! doubled the gateway's CPU per request. Here a finished span is pushed onto a vector under a
//! mutex held for a push, and the export task is woken only when a batch is full; otherwise it
//! takes what has gathered every [`EXPORT_EVERY`]. The vector is bounded: past
//! [`MAX_QUEUED_SPANS`] new spans are dropped (counted in `telemetry_spans_total`, and logged once
//! per export round), never
//! waited for.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry::Context;
use opentelemetry_sdk::error::OTelSdkResult;
use opentelemetry_sdk::trace::{Span, SpanData, SpanExporter, SpanProcessor};
use prometheus::IntCounterVec;
use tokio::sync::{watch, Notify};

/// The most spans waiting for export; past it new spans are dropped.
pub const MAX_QUEUED_SPANS: usize = 8192;
/// Spans per export request; a full batch wakes the export task at once.
const EXPORT_BATCH: usize = 512;
/// How often what has gathered goes out (and so how late a span may reach the collector).
pub const EXPORT_EVERY: Duration = Duration::from_millis(500);

/// The span processor: finished spans wait in [`Batcher::spans`] for the export task.
#[derive(Debug)]
pub struct Batcher {
    spans: Mutex<Vec<SpanData>>,
    full: Notify,
    stop: AtomicBool,
    dropped: AtomicU64,
}

impl Batcher {
    /// A batcher, and its export task on the current runtime: what [`Exporting::finish`] waits
    /// for at shutdown.
    /// `spans` counts each span's outcome (exported, failed, dropped).
    pub fn start<E: SpanExporter + 'static>(
        exporter: E,
        spans: IntCounterVec,
    ) -> (Processor, Exporting) {
        let batcher = Arc::new(Batcher {
            spans: Mutex::new(Vec::with_capacity(EXPORT_BATCH)),
            full: Notify::new(),
            stop: AtomicBool::new(false),
            dropped: AtomicU64::new(0),
        });
        let (done_tx, done) = watch::channel(false);
        tokio::spawn(export(batcher.clone(), exporter, spans, done_tx));
        (Processor(batcher.clone()), Exporting { batcher, done })
    }

    fn take(&self) -> Vec<SpanData> {
        let mut spans = self.spans.lock().unwrap_or_else(|p| p.into_inner());
        std::mem::take(&mut *spans)
    }
}

/// The export task: every [`EXPORT_EVERY`], or when a batch is full, or once more at stop.
async fn export<E: SpanExporter>(
    batcher: Arc<Batcher>,
    exporter: E,
    counted: IntCounterVec,
    done: watch::Sender<bool>,
) {
    let (exported, failed, dropped_spans) = (
        counted.with_label_values(&["exported"]),
        counted.with_label_values(&["failed"]),
        counted.with_label_values(&["dropped"]),
    );
    let mut reported_drops = 0;
    let mut failing = false;
    loop {
        let stopping = batcher.stop.load(Ordering::Acquire);
        if !stopping {
            let _ = tokio::time::timeout(EXPORT_EVERY, batcher.full.notified()).await;
        }
        let mut spans = batcher.take();
        while !spans.is_empty() {
            let rest = spans.split_off(spans.len().min(EXPORT_BATCH));
            let n = spans.len() as u64;
            match exporter.export(spans).await {
                Ok(()) => {
                    exported.inc_by(n);
                    failing = false;
                }
                Err(e) => {
                    failed.inc_by(n);
                    if !failing {
                        // Once per outage, not once per batch.
                        failing = true;
                        tracing::warn!(error = %e, "telemetry: the collector refused or missed an export; its spans are lost");
                    }
                }
            }
            spans = rest;
        }
        let dropped = batcher.dropped.load(Ordering::Relaxed);
        if dropped > reported_drops {
            dropped_spans.inc_by(dropped - reported_drops);
            tracing::warn!(
                dropped = dropped - reported_drops,
                limit = MAX_QUEUED_SPANS,
                "telemetry: spans dropped, more finished than the collector took in time"
            );
            reported_drops = dropped;
        }
        if stopping {
            let _ = done.send(true);
            return;
        }
    }
}

/// What the tracer provider holds.
#[derive(Debug)]
pub struct Processor(Arc<Batcher>);

impl SpanProcessor for Processor {
    fn on_start(&self, _: &mut Span, _: &Context) {}

    fn on_end(&self, span: SpanData) {
        let b = &self.0;
        let mut spans = b.spans.lock().unwrap_or_else(|p| p.into_inner());
        if spans.len() >= MAX_QUEUED_SPANS {
            drop(spans);
            b.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        spans.push(span);
        let full = spans.len() == EXPORT_BATCH;
        drop(spans);
        if full {
            b.full.notify_one();
        }
    }

    fn force_flush(&self) -> OTelSdkResult {
        self.0.full.notify_one();
        Ok(())
    }

    /// Never blocks (it may be called on a runtime thread): the export task sends what is
    /// left and ends; [`Exporting::finish`] is how to wait for it.
    fn shutdown_with_timeout(&self, _: Duration) -> OTelSdkResult {
        self.0.stop.store(true, Ordering::Release);
        self.0.full.notify_one();
        Ok(())
    }
}

/// The running export task, for the last export at shutdown.
#[derive(Debug)]
pub struct Exporting {
    batcher: Arc<Batcher>,
    done: watch::Receiver<bool>,
}

impl Exporting {
    /// Stop the export task after one last export of what is queued; wait for it up to
    /// `within`.
    pub async fn finish(&self, within: Duration) {
        self.batcher.stop.store(true, Ordering::Release);
        self.batcher.full.notify_one();
        let mut done = self.done.clone();
        if tokio::time::timeout(within, done.wait_for(|d| *d))
            .await
            .is_err()
        {
            tracing::warn!("telemetry: the last export did not finish in time; its spans are lost");
        }
    }
}
