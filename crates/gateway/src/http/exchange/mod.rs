//! The agent exchange: how every route that talks to an agent does it, as named steps taken in
//! one order, so that every route does them the same way:
//!
//! 1. **resolve** ([`resolve`]): the agent the route names, or that the ledger records the task
//!    under, checked against the caller (the agent's right, the task's owner);
//! 2. **admit** ([`call::admit_agent`]): the agent's own limits, right before it is called;
//! 3. **call** ([`call`]): the request built under the agent's configured origin and sent,
//!    timed, bounded to [`MAX_AGENT_JSON`](crate::upstream::MAX_AGENT_JSON), traced;
//! 4. **judge** ([`judge`]): the answer within the agent's protocol, or counted (and refused in
//!    `enforce` mode);
//! 5. **record** ([`record`]): what it says about the task, through the ledger's one rule;
//! 6. **relay** ([`relay`]): the answer passed on, with the body the ledger's verdict chose.
//!
//! [`Exchange`] is that sequence for a task route: [`Exchange::resolve`] (1), then
//! [`Exchange::call`] (2, 3), or [`Exchange::ask_task`] (2–5) for an answer that is a document
//! about the task. A create runs the same steps through `http::create`, whose exchange may
//! outlive its request. Handlers decide what to ask and what to answer; this module is how.

pub mod call;
pub mod judge;
pub mod record;
pub mod relay;
pub mod replica;
pub mod resolve;

use std::sync::Arc;

use bytes::Bytes;
use hyper::http::response::Parts;
use hyper::{Method, Response, StatusCode};

use super::body::Body;
use super::context::Ctx;
use super::error::ApiError;
use crate::ledger::Record;
use serde_json::Value;

use crate::protocol::task::{TaskRef, Verdict};
use crate::protocol::time::now_ms;
use crate::registry::Agent;
use crate::state::State;

pub use call::{ask, build_request, pass_through, ClientSide};
pub use judge::{check_identity, conformance, parse_agent_json};
pub use record::{apply, record};
pub use relay::{relay, relay_substituted, AgentError};
pub use resolve::{named_agent, task_agent, unknown_agent};

/// One task route's exchange with the task's agent, once resolved (step 1).
pub struct Exchange<'a> {
    state: &'a State,
    ctx: &'a Ctx,
    task_id: &'a str,
    /// The task's agent.
    pub agent: Arc<Agent>,
    /// The task's record, if the ledger has one.
    pub record: Option<Record>,
}

/// What an agent answered: its head and its (bounded) body.
pub struct Answer {
    /// The agent's status and headers.
    pub parts: Parts,
    /// The agent's body, read whole (at most `MAX_AGENT_JSON`).
    pub body: Bytes,
}

impl Answer {
    /// The agent's status.
    pub fn status(&self) -> StatusCode {
        self.parts.status
    }

    /// Step 6 as the agent said it.
    pub fn relay(self) -> Response<Body> {
        relay(self.parts, self.body)
    }

    /// Step 6 with the body the ledger chose (see [`record()`]).
    pub fn relay_with(self, body: Bytes) -> Response<Body> {
        relay_substituted(self.parts, &self.body, body)
    }
}

/// What [`Exchange::ask_task`] learned.
pub enum Asked {
    /// Not a task document to judge (another status than 200, or a body report mode passes on
    /// unread): to be relayed as it is.
    Other(Answer),
    /// A document about the task, judged and recorded.
    Task {
        /// The agent's answer.
        answer: Answer,
        /// The ledger's verdict (`None`: not recordable, passed in report mode).
        verdict: Option<Verdict>,
        /// The body to pass on: the agent's, or the recorded task if the ledger refused it.
        body: Bytes,
    },
}

impl<'a> Exchange<'a> {
    /// Step 1: the task's agent and record, checked against the caller ([`task_agent`]).
    pub async fn resolve(
        state: &'a State,
        ctx: &'a mut Ctx,
        prefix: Option<&str>,
        task_id: &'a str,
    ) -> Result<Exchange<'a>, ApiError> {
        let (agent, record) = task_agent(state, ctx, prefix, task_id).await?;
        Ok(Exchange {
            state,
            ctx,
            task_id,
            agent,
            record,
        })
    }

    /// The task's record when it is final: what every read answers without the agent.
    pub fn final_record(&self) -> Option<&Record> {
        self.record.as_ref().filter(|r| r.head.status.is_terminal())
    }

    /// Steps 2 and 3: ask the agent for `path` with no body, on the client's behalf.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        client: ClientSide<'_>,
    ) -> Result<Answer, ApiError> {
        let (parts, body) = ask(self.state, &self.agent, self.ctx, method, path, client).await?;
        Ok(Answer { parts, body })
    }

    /// Steps 2 to 5, the sequence every read of a task repeats: call, and when the agent
    /// answers 200 with a document, judge it as a document about this task under the agent's
    /// card and record it.
    pub async fn ask_task(
        &self,
        method: Method,
        path: &str,
        client: ClientSide<'_>,
    ) -> Result<Asked, ApiError> {
        let answer = self.call(method, path, client).await?;
        if answer.status() != StatusCode::OK {
            return Ok(Asked::Other(answer));
        }
        self.judge_task(answer).await
    }

    /// Steps 4 and 5 for an answer that should be a document about this task.
    pub async fn judge_task(&self, answer: Answer) -> Result<Asked, ApiError> {
        let (state, agent, ctx) = (self.state, &*self.agent, self.ctx);
        match parse_agent_json(agent, ctx, state, "task", &answer.body)? {
            Some(doc) => self.record_task(answer, &doc).await,
            None => Ok(Asked::Other(answer)),
        }
    }

    /// Steps 4 and 5 for `doc`, the answer's body read: judged under the agent's card as a
    /// document about this task, and recorded.
    pub async fn record_task(&self, answer: Answer, doc: &Value) -> Result<Asked, ApiError> {
        let card = self.agent.card()?;
        judge::check_identity(&self.agent, &card, doc);
        let (task, found) = card.read_task(doc, Some(self.task_id), now_ms());
        conformance(self.state, &self.agent, self.ctx, "task", found)?;
        let (verdict, body) = self.record(task, &answer.body).await?;
        Ok(Asked::Task {
            answer,
            verdict,
            body,
        })
    }

    /// Step 5: record what the agent said of this task (`task`, read from `raw`).
    pub async fn record(
        &self,
        task: Option<TaskRef>,
        raw: &Bytes,
    ) -> Result<(Option<Verdict>, Bytes), ApiError> {
        record(
            self.state,
            &self.agent,
            self.ctx,
            Some(self.task_id),
            task,
            raw,
        )
        .await
    }

    /// The request's context.
    pub fn ctx(&self) -> &Ctx {
        self.ctx
    }
}
