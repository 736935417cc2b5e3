//! The driver of a create's exchange, which can outlive its request.
//!
//! A create the agent answers after its `timeout_ms` (or whose body trickles past it) is a task
//! the agent has made: dropping the exchange at the timeout would leave it unknown to the
//! gateway, and the client's retry would make a second one. So the exchange is a future of its
//! own, driven by the request while it waits and spawned as a task only when it must outlive
//! the request: within the timeout, its answer is processed (conformance, ledger) and handed to
//! the handler as before. Past it, the handler gets 504 AGENT_TIMEOUT saying the task may exist, and
//! the task keeps reading the agent's answer for up to `late_answer_secs`; when it comes it goes
//! through the same processing, so the task is recorded (webhooks fire) and the request's
//! `Idempotency-Key`, if any, gets it as its answer, for the client's retry.
//!
//! The task, not the handler, settles the idempotency key, so a client that hangs up mid-create
//! does not leave its key in flight. Creates awaited past their timeout are bounded by
//! [`MAX_LATE_ANSWERS`] (across workers); past the bound the exchange is dropped at the timeout,
//! as before, and logged. A stopping gateway waits for them up to [`LATE_DRAIN`].

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use tokio::sync::oneshot;

use super::idempotency::{settle, Held};
use super::{late_permit, Finish};
use crate::http::body::Body;
use crate::http::context::Ctx;
use crate::http::error::{ApiError, ApiResult, Code};
use crate::http::exchange::call::{admit_agent, exchange_answered, exchange_span};
use crate::limits::Pass;
use crate::registry::Agent;
use crate::state::State;
use crate::upstream::{UpstreamError, MAX_AGENT_JSON};

/// Creates awaited past their agent's timeout at once, per gateway.
pub const MAX_LATE_ANSWERS: usize = 1024;

/// How long a stopping gateway waits for the late answers still awaited.
pub const LATE_DRAIN: Duration = Duration::from_secs(10);

/// At shutdown, after the connections drained: wait (at most `within`) until no create is
/// awaited past its timeout any more, so late answers on their way are recorded rather than
/// lost with the runtime. Every worker waits on the one bound, and drives its own tasks
/// meanwhile.
pub async fn drain_late_answers(late: &tokio::sync::Semaphore, within: Duration) {
    let deadline = Instant::now() + within;
    while late.available_permits() < MAX_LATE_ANSWERS {
        if Instant::now() >= deadline {
            let awaited = MAX_LATE_ANSWERS.saturating_sub(late.available_permits());
            tracing::warn!(
                awaited,
                "late answers to creates still awaited at shutdown; abandoned"
            );
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// One create: what the spawned task owns.
struct Create<F> {
    /// The worker's state: one reference count of the worker's own, rather than a clone of
    /// every shared part (each a reference count that both workers' cores would contend for).
    state: Arc<State>,
    ctx: Ctx,
    agent: Arc<Agent>,
    /// The protocol's step from the agent's answer to the client's (judge, record).
    finish: F,
    held: Option<Held>,
}

/// Send the create `up` to `agent` and answer it with `finish` (see the module doc); `held` is
/// the request's idempotency key, claimed. The agent's limits are checked first
/// (`exchange::admit_agent`): refused, the key is released (nothing was made, a retry may
/// succeed); admitted, the task holds the pass until it ends, the late-answer wait included,
/// since the agent is busy with the create until then.
pub async fn drive<F: Finish>(
    state: &Arc<State>,
    ctx: &Ctx,
    agent: Arc<Agent>,
    finish: F,
    up: Request<Full<Bytes>>,
    held: Option<Held>,
) -> ApiResult {
    let pass = match admit_agent(state, &agent, Some(ctx), up.uri()) {
        Ok(pass) => pass,
        Err(refused) => {
            let Some(held) = &held else {
                return Err(refused);
            };
            let res = finish.refused(refused);
            settle(state, held, &res, false).await;
            return Ok(res);
        }
    };
    let job = Create {
        state: state.clone(),
        // The creator (`caller`) is recorded as the task's owner, whenever the answer comes.
        ctx: Ctx {
            agent: Some(agent.clone()),
            ..ctx.detached()
        },
        agent,
        finish,
        held,
    };
    let (tx, mut rx) = oneshot::channel();
    // Driven here, on the request's own task, while the request waits for it (the usual case:
    // no task spawned per create). It becomes a task of its own only if it must outlive the
    // request: the client left before the answer ([`Detached`]'s drop), or the answer was the
    // 504 of a timed-out create whose late answer is still awaited.
    let mut run = Detached(Some(Box::pin(job.run(up, tx, pass))));
    let answer = std::future::poll_fn(|cx| {
        if let Some(work) = run.0.as_mut() {
            if std::future::Future::poll(work.as_mut(), cx).is_ready() {
                run.0 = None;
            }
        }
        std::future::Future::poll(std::pin::Pin::new(&mut rx), cx)
    })
    .await;
    drop(run);
    answer.map_err(|_| {
        ApiError::new(
            Code::AgentUnreachable,
            "the exchange with the agent ended without an answer",
        )
    })
}

/// A create's exchange that the request drives while it waits, and that is handed to the
/// runtime as a task of its own if the request ends first (dropped by a client that left, or
/// answered 504 while the late answer is awaited): the task is recorded and the key settled
/// whatever happens to the request.
struct Detached(Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>>);

impl Drop for Detached {
    fn drop(&mut self) {
        let Some(work) = self.0.take() else { return };
        match tokio::runtime::Handle::try_current() {
            Ok(rt) => {
                rt.spawn(work);
            }
            // Only outside any runtime (never while serving): nothing to run it on.
            Err(_) => tracing::warn!("a create's exchange was dropped outside a runtime"),
        }
    }
}

impl<F: Finish> Create<F> {
    /// The exchange; `pass` is held until it returns and told the outcome within the timeout
    /// (a late answer does not count: the client had its 504).
    async fn run(
        self,
        mut up: Request<Full<Bytes>>,
        tx: oneshot::Sender<Response<Body>>,
        mut pass: Pass,
    ) {
        let timeout = self.agent.cfg.timeout;
        let started = Instant::now();
        // Ends when the exchange does, a late answer's included.
        let span = exchange_span(&self.ctx, &self.agent, &mut up);
        let work = self.state.upstream.fetch(up, MAX_AGENT_JSON);
        tokio::pin!(work);
        let first = tokio::time::timeout(timeout, &mut work).await;
        match &first {
            Ok(exchanged) => {
                exchange_answered(span.as_ref(), exchanged, |(parts, _)| parts.status.as_u16());
                pass.report(exchanged.as_ref().map(|(parts, _)| parts.status))
            }
            Err(_) => {
                if let Some(span) = &span {
                    span.fail(format!("no answer within {} ms", timeout.as_millis()));
                }
                pass.report(Err(&UpstreamError::Timeout(timeout)))
            }
        }
        if let Ok(exchanged) = first {
            let res = self.settle(exchanged).await;
            // The client may have gone: the answer is recorded and kept all the same.
            let _ = tx.send(res);
            return;
        }
        let late = self.state.config.late_answer;
        let permit = late_permit(&self.state);
        let _ = tx.send(
            self.finish
                .refused(self.timed_out(timeout, permit.is_some())),
        );
        let name = self.agent.cfg.name.as_str();
        let count = |outcome: &str| {
            self.state
                .metrics
                .late_answers
                .with_label_values(&[name, outcome])
                .inc();
        };
        if permit.is_none() {
            count("dropped");
            if !late.is_zero() {
                tracing::warn!(agent = %name, request_id = ?self.ctx.request_id, limit = MAX_LATE_ANSWERS,
                    "create timed out and too many late answers are awaited: this one is dropped");
            }
            self.settle(Err(UpstreamError::Timeout(timeout))).await;
            return;
        }
        let exchanged = tokio::time::timeout(late, work)
            .await
            .unwrap_or(Err(UpstreamError::Timeout(timeout + late)));
        exchange_answered(span.as_ref(), &exchanged, |(parts, _)| {
            parts.status.as_u16()
        });
        let outcome = match &exchanged {
            Ok((parts, _)) => format!("answered {}", parts.status),
            Err(e) => e.to_string(),
        };
        count(if exchanged.is_ok() {
            "recorded"
        } else {
            "none"
        });
        let res = self.settle(exchanged).await;
        tracing::info!(agent = %name, request_id = ?self.ctx.request_id, outcome = %outcome, answer = res.status().as_u16(),
            waited_ms = started.elapsed().as_millis() as u64, "late answer to a timed-out create");
        drop(permit);
    }

    /// The answer to the client, from what the exchange gave; the idempotency key stored with it
    /// or released.
    async fn settle(
        &self,
        exchanged: Result<(hyper::http::response::Parts, Bytes), UpstreamError>,
    ) -> Response<Body> {
        let (res, keep) = match exchanged {
            // Nothing came back: a retry should try again (the agent may still have made the
            // task; without an answer the gateway cannot know).
            Err(e) => (
                self.finish
                    .refused(ApiError::from(e.at(&self.agent.cfg.name))),
                false,
            ),
            Ok((parts, body)) => {
                // The agent's own failures are not final: a retry may succeed.
                let s = parts.status;
                let keep = !(s.is_server_error() || s == 408 || s == 429);
                let res = self
                    .finish
                    .finish(&self.state, &self.agent, &self.ctx, parts, body)
                    .await
                    .unwrap_or_else(|e| self.finish.refused(e));
                let keep = keep && res.extensions().get::<super::Unsettled>().is_none();
                (res, keep)
            }
        };
        if let Some(held) = &self.held {
            settle(&self.state, held, &res, keep).await;
        }
        res
    }

    /// 504 AGENT_TIMEOUT, saying that the task may exist and what becomes of it.
    fn timed_out(&self, timeout: Duration, awaited: bool) -> ApiError {
        let late = self.state.config.late_answer.as_secs();
        let base = UpstreamError::Timeout(timeout).at(&self.agent.cfg.name);
        let then = match (awaited, self.held.is_some()) {
            (true, true) => format!(
                "; the gateway awaits its answer for up to {late} s more and records the task: a retry with the same Idempotency-Key (an A2A message: the same messageId) returns it (IDEMPOTENCY_IN_PROGRESS until then)"
            ),
            (true, false) => format!(
                "; the gateway awaits its answer for up to {late} s more and records the task (send an Idempotency-Key to be able to retry safely)"
            ),
            (false, _) => "; the gateway has stopped waiting for its answer".to_owned(),
        };
        ApiError::new(
            Code::AgentTimeout,
            format!("{base}. The agent may have created the task{then}"),
        )
        .with_details(serde_json::json!({
            "task_may_exist": true,
            "late_answer_secs": if awaited { late } else { 0 },
            "idempotency_key": self.held.is_some(),
        }))
    }
}
