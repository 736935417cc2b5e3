//! POST /tasks and POST /agents/{name}/tasks, the Clawpedia create: content type →
//! `Idempotency-Key` → size → JSON → `input` against the card's input_schema → the key claimed
//! → the create driver (`http::create`, which outlives a timeout) → [`Created`]: conformance of
//! the reply → ledger → the key's answer stored.

use std::sync::Arc;

use bytes::Bytes;
use hyper::header::{self, HeaderValue};
use hyper::http::response::Parts;
use hyper::{Method, StatusCode};
use opentelemetry::trace::SpanKind;
use opentelemetry::KeyValue;
use serde_json::Value;

use crate::http::context::Ctx;
use crate::http::create::idempotency::{self, Claimed};
use crate::http::create::pending::record_later;
use crate::http::create::{drive, Finish};
use crate::http::error::{store_unavailable, ApiError, ApiResult, Code};
use crate::http::exchange::{
    build_request, check_identity, conformance, named_agent, parse_agent_json, record, relay,
    relay_substituted, ClientSide,
};
use crate::http::request::{is_json, read_body, Request};
use crate::ledger;
use crate::protocol::clawpedia::card::{violations, Card};
use crate::protocol::clawpedia::conform::{check_task, TaskExpect};
use crate::protocol::clawpedia::task::task_ref;
use crate::protocol::json;
use crate::protocol::task::Status;
use crate::protocol::time::now_ms;
use crate::protocol::Violation;
use crate::registry::Agent;
use crate::state::State;
use crate::telemetry;

/// POST /tasks and POST /agents/{name}/tasks.
pub async fn create(
    state: &Arc<State>,
    ctx: &mut Ctx,
    prefix: Option<&str>,
    req: Request,
) -> ApiResult {
    let mut agent = prefix
        .map(|name| named_agent(state, ctx, name))
        .transpose()?;
    if !is_json(req.headers()) {
        return Err(ApiError::new(
            Code::UnsupportedMediaType,
            "POST /tasks takes Content-Type: application/json",
        ));
    }
    let idempotency_key = idempotency::key_of(req.headers())?;
    let (parts, raw) = read_body(req, state.config.max_body_bytes).await?;
    // One document: what is validated below is what the agent reads (duplicate keys refused).
    let doc = json::parse(&raw)?;
    let Value::Object(obj) = &doc else {
        return Err(ApiError::new(
            Code::InvalidRequest,
            "request body must be a JSON object with an `input` object",
        ));
    };
    if agent.is_none() {
        let name = obj.get("agent").and_then(Value::as_str).ok_or_else(|| {
            ApiError::new(
                Code::InvalidRequest,
                "POST /tasks needs `agent` (a route name or agent_id) and `input`",
            )
        })?;
        let named = named_agent(state, ctx, name)?;
        // An official A2A agent takes messages, not Clawpedia creates: the client's mistake,
        // said with where to go (its route under /agents/{name}/ is the A2A protocol's).
        if named.cfg.protocol != crate::config::Protocol::Clawpedia {
            return Err(ApiError::new(
                Code::InvalidRequest,
                format!(
                    "agent {:?} speaks the official A2A protocol: send it a message (SendMessage at /agents/{}/jsonrpc or /agents/{}/message:send)",
                    named.cfg.name, named.cfg.name, named.cfg.name
                ),
            ));
        }
        agent = Some(named);
    }
    let Some(agent) = agent else {
        return Err(ApiError::new(Code::UnknownAgent, "no agent"));
    };
    let input = match obj.get("input") {
        Some(v @ Value::Object(_)) => v,
        _ => {
            return Err(ApiError::new(
                Code::InvalidRequest,
                "request body must have an `input` object",
            ))
        }
    };
    let card = super::card_of(&agent)?;
    let span = ctx.trace.as_ref().map(|t| {
        t.child(
            "validate input",
            SpanKind::Internal,
            vec![KeyValue::new(telemetry::AGENT, agent.cfg.name.clone())],
        )
    });
    let valid = card.input.is_valid(input);
    if let Some(span) = span {
        if !valid {
            span.fail("input does not match the agent's input_schema");
        }
    }
    if !valid {
        state
            .metrics
            .validation_failures
            .with_label_values(&[agent.cfg.name.as_str()])
            .inc();
        let found = violations(&card.input, input, "/input");
        return Err(ApiError::new(
            Code::InputSchemaViolation,
            format!(
                "input does not match the input_schema of agent {:?} ({} violation(s))",
                agent.cfg.name,
                found.len()
            ),
        )
        .with_details(found));
    }
    if !state.ledger.available() {
        // Known down (a call just failed on a broken connection, or the store has not
        // connected yet): refused before the agent is called, so the agent never holds a task
        // the gateway does not know. The state of a create already past this point is settled
        // by `created` (x-a2a-ledger: pending).
        let mut refused = store_unavailable(state.ledger.refusing());
        refused.message += ": the create was not sent to the agent";
        return Err(refused);
    }
    crate::http::create::admit_task(state, &ctx.caller, raw.len()).await?;
    // Only a keyed create is compared with an earlier one.
    let fingerprint = idempotency_key
        .is_some()
        .then(|| ledger::idempotency::fingerprint(&raw));
    // The agent gets exactly what the client sent, except that the agent-less form's routing
    // field is the gateway's business.
    let forward = if prefix.is_some() {
        raw
    } else {
        let body = serde_json::to_vec(&serde_json::json!({ "input": input }))
            .map_err(|e| ApiError::new(Code::InvalidRequest, e.to_string()))?;
        Bytes::from(body)
    };
    let mut up = build_request(
        &agent,
        ctx,
        Method::POST,
        "/tasks",
        ClientSide {
            headers: &parts.headers,
            query: parts.uri.query(),
        },
        forward,
        true,
    )?;
    up.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    if let (Some(client), Some(key)) = (ctx.caller.owner(), idempotency_key.as_deref()) {
        // An agent that honours Idempotency-Key itself must not see two clients' equal keys
        // as one: it gets a key of this client's own, the same on every retry.
        up.headers_mut().insert(
            idempotency::IDEMPOTENCY_KEY,
            idempotency::agent_key(client, key),
        );
    }
    // A key is claimed last, after every check of the request: a refused request holds none.
    let held = match idempotency_key.zip(fingerprint) {
        None => None,
        Some((key, fingerprint)) => {
            let timeout = agent.cfg.timeout;
            let scope = idempotency::scope(&agent.cfg.name, &ctx.caller);
            match idempotency::claim(state, &agent.cfg.name, scope, key, fingerprint, timeout)
                .await?
            {
                Claimed::Held(held) => Some(held),
                Claimed::Answered(res) => return Ok(res),
            }
        }
    };
    drive(state, ctx, agent, Created { card }, up, held).await
}

/// The Clawpedia step from the agent's answer to a create to the client's, holding the card the
/// create was checked under.
struct Created {
    card: Arc<Card>,
}

impl Finish for Created {
    async fn finish(
        &self,
        state: &Arc<State>,
        agent: &Arc<Agent>,
        ctx: &Ctx,
        res: Parts,
        body: Bytes,
    ) -> ApiResult {
        created(state, agent, ctx, &self.card, res, body).await
    }
}

/// The answer to a create, from the agent's: its refusal relayed, its Task checked and recorded.
/// Called by the create driver ([`drive`]), in time or late.
async fn created(
    state: &Arc<State>,
    agent: &Arc<Agent>,
    ctx: &Ctx,
    card: &Card,
    res: Parts,
    body: Bytes,
) -> ApiResult {
    if !res.status.is_success() {
        // The agent's own refusal (400, 409, 5xx...) is its answer to give.
        return Ok(relay(res, body));
    }
    if res.status != StatusCode::ACCEPTED {
        conformance(
            state,
            agent,
            ctx,
            "create_status",
            vec![Violation::new(
                "",
                "status",
                format!("create answered {} instead of 202 Accepted", res.status),
            )],
        )?;
    }
    let Some(task) = parse_agent_json(agent, ctx, state, "task", &body)? else {
        return Ok(relay(res, body));
    };
    let expect = TaskExpect {
        status: Some(Status::Submitted),
        ..TaskExpect::under(Some(card), None, now_ms())
    };
    if let Ok(serving) = agent.card() {
        check_identity(agent, &serving, &task);
    }
    conformance(state, agent, ctx, "task", check_task(&task, expect))?;
    let task = task_ref(&task);
    match record(state, agent, ctx, None, task.clone(), &body).await {
        Ok((_, out)) => Ok(relay_substituted(res, &body, out)),
        // The agent has created the task: a 503 now would make the client retry and create it
        // twice. Pass the 202 on, marked, and record the task in the background as soon as
        // the ledger answers (its webhooks follow from that record).
        Err(e) if e.code.unrecorded() => {
            let pending = record_later(state, agent, ctx, task, body.clone());
            tracing::warn!(agent = %agent.cfg.name, request_id = ?ctx.request_id, error = %e.message, pending,
                "task created but not recorded yet: the ledger is unavailable");
            let mut out = relay(res, body);
            out.headers_mut().insert(
                "x-a2a-ledger",
                HeaderValue::from_static(if pending { "pending" } else { "unrecorded" }),
            );
            Ok(out)
        }
        Err(e) => Err(e),
    }
}
