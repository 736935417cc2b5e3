//! Stage 3 of the pipeline, admission: who the caller is and whether the route is theirs to
//! call. [`admit`] runs for every request, after the route is known and before any handler:
//! it authenticates (a bearer key or JWT, from `Authorization`, or `?access_token=` on the
//! stream routes, where a browser's EventSource cannot set headers; without one, the client
//! certificate the TLS connection verified, by its `cert_subject`), takes a token from the
//! client's bucket if it has a `rate_per_sec` or is a token subject ([`rate`]), checks the
//! route's right, and takes a stream slot for the stream routes.
//!
//! What needs the ledger cannot be decided before the handler has the task: [`agent`] (the
//! caller may use this agent) and [`task`] (the caller may see this task) are the two checks a
//! handler makes when it resolves them, both through `exchange::task_agent` for the task routes.
//!
//! | route | needs |
//! |---|---|
//! | `/healthz`, `/readyz`, `/openapi.json`, `/ui` | nothing |
//! | `GET /agents`, a card, `/api/fleet` | any client (each lists only its agents) |
//! | create, get, cancel, artifacts, artifact content | `tasks`, the agent, ownership |
//! | task streams | `streams`, the agent, ownership, a stream slot |
//! | `/events` | `events`, a stream slot (own tasks only without `all_tasks`) |
//! | `/metrics` | `metrics` |
//! | `/admin/*` | `admin` (`admin_token` when no clients are configured) |
//! | push notifications | the agent's `ingest_token` (its handler checks it) |

use std::borrow::Cow;
use std::sync::Arc;

use hyper::header::{
    HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, RETRY_AFTER, WWW_AUTHENTICATE,
};

use super::context::{Ctx, Proof};
use super::error::{ApiError, Code};
use super::request::Request;
use super::route::{Needs, Route};
use crate::auth::{Caller, Client, Credential, Failure, StreamPermit};
use crate::config::Right;
use crate::ledger::Record;
use crate::limits::Quota;
use crate::registry::Agent;
use crate::state::State;

/// Admit the request to `route`, or refuse it: sets `ctx.caller` (and `ctx.quota` for a
/// rate-limited client, `ctx.permit` on the stream routes).
pub async fn admit(
    state: &State,
    ctx: &mut Ctx,
    route: &Route<'_>,
    req: &Request,
) -> Result<(), ApiError> {
    let needs = route.needs();
    one_credential(req)?;
    if !state.auth.enabled() {
        ctx.caller = Caller::Open;
        if needs == Needs::Right(Right::Admin) {
            return admin_token(state, req.headers());
        }
        return Ok(());
    }
    if needs == Needs::Nothing {
        ctx.caller = Caller::Public;
        return Ok(());
    }
    let from_query = matches!(needs, Needs::Stream(_));
    // A bearer credential first, when there is one (a wrong one is refused even on a
    // connection with a good certificate: what a request says explicitly is what is judged);
    // else the connection's verified client certificate.
    let bearer = credential(req, from_query);
    let client = match (&bearer, ctx.cert_subject.as_deref()) {
        (Ok(bearer), _) => authenticate(state, bearer).await,
        (Err(Failure::Missing), Some(subject)) => state.auth.authenticate_subject(subject),
        (Err(f), _) => Err(*f),
    }
    .map_err(|f| refuse(state, f))?;
    ctx.proof = match &bearer {
        Ok(b) if state.auth.is_token(b) => {
            Proof::Token(Arc::from(String::from_utf8_lossy(b).as_ref()))
        }
        Ok(_) => Proof::Key,
        Err(_) => Proof::Certificate,
    };
    // Known from here on, refused or not: its requests are counted under its name.
    ctx.caller = Caller::Client(client.clone());
    rate(state, ctx, &client)?;
    let right = match needs {
        Needs::Right(r) | Needs::Stream(r) => Some(r),
        Needs::Client | Needs::Nothing => None,
    };
    if let Some(r) = right.filter(|r| !client.can(*r)) {
        return Err(lacks(state, &client, r));
    }
    if let Needs::Stream(right) = needs {
        ctx.permit = Some(slot(state, ctx, &client, &bearer, right)?);
    }
    Ok(())
}

/// How long a request whose token names a key not held waits for the fetch it asked for.
const KEY_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// The client of a bearer credential. A token naming a key its issuer does not hold (a
/// rotation the gateway has not seen yet) waits, at most [`KEY_WAIT`], for the fetch it asked
/// for, and is judged again against what it found.
async fn authenticate(state: &State, bearer: &[u8]) -> Result<Arc<Client>, Failure> {
    match state.auth.authenticate(bearer) {
        Err(Failure::KeyPending) => {
            let _ = tokio::time::timeout(KEY_WAIT, state.auth.keys_fetched(bearer)).await;
            match state.auth.authenticate(bearer) {
                Err(Failure::KeyPending) => Err(Failure::Invalid(
                    "the token's key is not among its identity provider's keys",
                )),
                other => other,
            }
        }
        other => other,
    }
}

/// 403 FORBIDDEN: `client` lacks right `r` (counted).
fn lacks(state: &State, client: &Client, r: Right) -> ApiError {
    forbidden(
        state,
        format!("client {:?} lacks the `{}` right", client.name, r.as_str()),
    )
}

/// 403 FORBIDDEN with `message`, counted on `auth_failures_total{reason="forbidden"}`: every
/// refusal of an authenticated client outside what it may do (a right, an agent, a protocol's
/// method) is made here.
pub fn forbidden(state: &State, message: String) -> ApiError {
    state
        .metrics
        .auth_failures
        .with_label_values(&["forbidden"])
        .inc();
    ApiError::new(Code::Forbidden, message)
}

/// A stream slot of `client` (`max_streams`), kept with the stream to judge it again when
/// credentials change; TOO_MANY_STREAMS when it holds them all.
fn slot(
    state: &State,
    ctx: &Ctx,
    client: &Arc<Client>,
    bearer: &Result<Cow<'_, [u8]>, Failure>,
    right: Right,
) -> Result<StreamPermit, ApiError> {
    let proved = match (bearer, ctx.cert_subject.as_deref()) {
        (Ok(b), _) => Credential::Bearer(b),
        (Err(_), Some(subject)) => Credential::Cert(subject),
        (Err(_), None) => Credential::Bearer(b""),
    };
    state
        .auth
        .open_stream(client, proved, right)
        .ok_or_else(|| {
            state
                .metrics
                .streams_refused
                .with_label_values(&[&client.label])
                .inc();
            ApiError::new(
                Code::TooManyStreams,
                format!(
                    "client {:?} already holds its {} open streams (max_streams)",
                    client.name, client.max_streams
                ),
            )
            .with_details(serde_json::json!({ "max_streams": client.max_streams }))
        })
}

/// The stream slot of a call that is known to stream only once it is read (an A2A streaming
/// method; the route needed `tasks`): the `streams` right, and a slot of the client's
/// `max_streams`. `None` without clients.
pub fn stream_of_call(
    state: &State,
    ctx: &Ctx,
    headers: &HeaderMap,
) -> Result<Option<StreamPermit>, ApiError> {
    let Caller::Client(client) = &ctx.caller else {
        return Ok(None);
    };
    if !client.can(Right::Streams) {
        return Err(lacks(state, client, Right::Streams));
    }
    let bearer = match headers.get(AUTHORIZATION) {
        Some(v) => bearer(v.as_bytes())
            .map(Cow::Borrowed)
            .ok_or(Failure::Invalid("Authorization must be Bearer")),
        None => Err(Failure::Missing),
    };
    slot(state, ctx, client, &bearer, Right::Streams).map(Some)
}

/// A token from `client`'s bucket, if it has a rate; 429 RATE_LIMITED past it. Before the
/// right is checked: every authenticated request costs a token, so a client cannot hammer
/// the gateway with requests it will be refused anyway. An unlimited client costs nothing
/// here (no lookup, no lock). A token subject without a `[[clients]]` entry always has a rate
/// (`[auth] token_rate_per_sec`), its bucket in the table of at most `max_token_subjects`.
fn rate(state: &State, ctx: &mut Ctx, client: &Client) -> Result<(), ApiError> {
    let Some(rate) = client.rate else {
        return Ok(());
    };
    let taken = if client.is_token_subject() {
        state.buckets.take_subject(
            &client.name,
            &client.label,
            rate,
            state.config.auth.max_token_subjects,
            &state.metrics,
        )
    } else {
        state.buckets.take(&client.name, rate, &state.metrics)
    };
    match taken {
        Ok(quota) => {
            ctx.quota = Some(quota);
            Ok(())
        }
        Err(limited) => {
            ctx.quota = Some(limited.quota);
            Err(limited.into())
        }
    }
}

/// `RateLimit-Policy: "client";q=BURST;w=WINDOW` and `RateLimit: "client";r=LEFT;t=NEXT`
/// (draft-ietf-httpapi-ratelimit-headers-11, structured-field lists): the bucket as a quota of
/// `burst` requests over the seconds an empty bucket takes to fill, and the whole tokens left
/// with the seconds until the next one. On every answer to a rate-limited client.
pub fn quota_headers(h: &mut HeaderMap, q: &Quota) {
    let policy = format!("\"{POLICY}\";q={};w={}", q.limit, q.window_secs);
    let now = format!("\"{POLICY}\";r={};t={}", q.remaining, q.reset_secs);
    for (name, value) in [(RATELIMIT_POLICY, policy), (RATELIMIT, now)] {
        if let Ok(v) = HeaderValue::try_from(value) {
            h.insert(name, v);
        }
    }
}

/// The one policy a client's bucket is, by its name in the `RateLimit` headers.
const POLICY: &str = "client";
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");

/// 403 FORBIDDEN unless the caller may use `agent`.
pub fn agent(state: &State, ctx: &Ctx, agent: &Agent) -> Result<(), ApiError> {
    if ctx.caller.may_use(agent) {
        return Ok(());
    }
    Err(forbidden(
        state,
        format!("this client may not use agent {:?}", agent.cfg.name),
    ))
}

/// Whether the caller may use the admin API: a client with `admin`; without clients, a request
/// that brought the `admin_token` (the routes do not exist without one).
pub fn is_admin(state: &State, ctx: &Ctx, headers: &HeaderMap) -> bool {
    match ctx.caller {
        Caller::Open => admin_token(state, headers).is_ok(),
        _ => ctx.caller.can(Right::Admin),
    }
}

/// 404 TASK_NOT_FOUND unless the caller may see the task (`record` is `None` for a task the
/// ledger does not hold, which only an `all_tasks` client may reach through a passthrough
/// agent): another client's task is not found, as an unknown one is, so ids reveal nothing.
pub fn task(
    state: &State,
    ctx: &Ctx,
    task_id: &str,
    record: Option<&Record>,
) -> Result<(), ApiError> {
    if ctx.caller.sees(record.and_then(|r| r.owner.as_deref())) {
        return Ok(());
    }
    state
        .metrics
        .auth_failures
        .with_label_values(&["not_owner"])
        .inc();
    Err(ApiError::new(
        Code::TaskNotFound,
        format!("task {task_id} is not known to the gateway"),
    ))
}

/// 401 UNAUTHORIZED for a failed authentication, counted by reason.
fn refuse(state: &State, f: Failure) -> ApiError {
    state
        .metrics
        .auth_failures
        .with_label_values(&[f.reason()])
        .inc();
    let (message, challenge) = match f {
        Failure::Unavailable(retry) => {
            return ApiError::new(
                Code::AuthUnavailable,
                "the token's identity provider has not been reached yet: its keys are not held, so the token cannot be checked",
            )
            .with_header(RETRY_AFTER, HeaderValue::from(retry));
        }
        Failure::Missing => (
            "this route needs credentials: Authorization: Bearer <key or JWT>".to_owned(),
            "Bearer realm=\"a2a-gateway\"",
        ),
        Failure::Expired => (
            "the token has expired".to_owned(),
            "Bearer realm=\"a2a-gateway\", error=\"invalid_token\", error_description=\"expired\"",
        ),
        Failure::KeyPending => (
            "the credentials were refused: the token's key is not among its identity provider's keys".to_owned(),
            "Bearer realm=\"a2a-gateway\", error=\"invalid_token\"",
        ),
        Failure::Invalid(why) => (
            format!("the credentials were refused: {why}"),
            "Bearer realm=\"a2a-gateway\", error=\"invalid_token\"",
        ),
    };
    ApiError::new(Code::Unauthorized, message)
        .with_header(WWW_AUTHENTICATE, HeaderValue::from_static(challenge))
}

/// 400 INVALID_REQUEST for a request that brings more than one credential: two
/// `Authorization` headers, one with `?access_token=`, or two `access_token` parameters. Which
/// one is "the" credential is where a proxy in front and the gateway would disagree about who
/// is calling, so neither guesses. On every route, whether it reads credentials or not: a
/// push's ingest token travels in `Authorization` too.
fn one_credential(req: &Request) -> Result<(), ApiError> {
    let headers = req.headers().get_all(AUTHORIZATION).iter().count();
    // By the name as a framework behind a proxy decodes it (`access%5Ftoken` is one too); only
    // the plain spelling is read, so any other is refused rather than ignored.
    let (mut params, mut plain) = (0, 0);
    for kv in req.uri().query().unwrap_or("").split('&') {
        let name = kv.split_once('=').map_or(kv, |(k, _)| k);
        if name == "access_token" {
            plain += 1;
            params += 1;
        } else if name.contains(['%', '+'])
            && access_token(Some(&format!("access_token={name}"))).as_deref()
                == Some(&b"access_token"[..])
        {
            params += 1;
        }
    }
    if params > plain && params == 1 {
        return Err(ApiError::new(
            Code::InvalidRequest,
            "the access_token parameter must be spelled as is, not percent-encoded",
        ));
    }
    let why = match (headers, params) {
        (0 | 1, 0) | (0, 1) => return Ok(()),
        (h, 0) if h > 1 => "more than one Authorization header",
        (0, _) => "more than one access_token parameter",
        _ => "both an Authorization header and an access_token parameter",
    };
    Err(ApiError::new(
        Code::InvalidRequest,
        format!("one credential per request: this one brings {why}"),
    ))
}

/// The bearer credential: `Authorization: Bearer ...`, else (on stream routes) `access_token`
/// from the query. A non-Bearer `Authorization` is invalid rather than missing.
fn credential(req: &Request, from_query: bool) -> Result<Cow<'_, [u8]>, Failure> {
    if let Some(v) = req.headers().get(AUTHORIZATION) {
        return bearer(v.as_bytes())
            .map(Cow::Borrowed)
            .ok_or(Failure::Invalid("Authorization must be Bearer"));
    }
    if from_query {
        if let Some(t) = access_token(req.uri().query()) {
            return Ok(t);
        }
    }
    Err(Failure::Missing)
}

/// The credential of an `Authorization: Bearer <credential>` value (the scheme in any case,
/// RFC 9110 §11.1; the credential as sent, less surrounding white space). `None` for another
/// scheme or an empty credential. The one bearer parser: clients, the `admin_token` and the
/// agents' `ingest_token` are all read with it.
pub fn bearer(v: &[u8]) -> Option<&[u8]> {
    let rest = v
        .get(..7)
        .filter(|p| p.eq_ignore_ascii_case(b"bearer "))
        .map(|_| &v[7..])?;
    let rest = rest.trim_ascii();
    (!rest.is_empty()).then_some(rest)
}

/// The `access_token` query parameter, percent-decoded.
pub fn access_token(query: Option<&str>) -> Option<Cow<'_, [u8]>> {
    let v = query?
        .split('&')
        .find_map(|kv| kv.strip_prefix("access_token="))?;
    if !v.contains('%') && !v.contains('+') {
        return Some(Cow::Borrowed(v.as_bytes()));
    }
    crate::protocol::percent::decode_bytes(v, true).map(Cow::Owned)
}

/// The query without `access_token`: what may be passed on to an agent (or written anywhere).
pub fn without_access_token(query: &str) -> Cow<'_, str> {
    if !query.contains("access_token=") {
        return Cow::Borrowed(query);
    }
    let kept: Vec<&str> = query
        .split('&')
        .filter(|kv| !kv.starts_with("access_token="))
        .collect();
    Cow::Owned(kept.join("&"))
}

/// The admin API without clients: `Authorization: Bearer <admin_token>`; off (404) without one.
fn admin_token(state: &State, headers: &HeaderMap) -> Result<(), ApiError> {
    let Some(token) = state.config.admin_token.as_ref() else {
        return Err(ApiError::new(
            Code::NotFound,
            "the admin API is disabled; set admin_token in the config (or configure clients with the `admin` right) to enable it",
        ));
    };
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|v| bearer(v.as_bytes()));
    if presented.is_some_and(|p| token.matches(p)) {
        Ok(())
    } else {
        Err(ApiError::new(
            Code::Unauthorized,
            "Authorization: Bearer <admin_token> is required",
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_tokens_are_found_decoded_and_removed() {
        assert_eq!(
            access_token(Some("last_event_id=3&access_token=a%2Bb+c")).as_deref(),
            Some(&b"a+b c"[..])
        );
        assert_eq!(
            access_token(Some("access_token=abc")).as_deref(),
            Some(&b"abc"[..])
        );
        assert_eq!(access_token(Some("x_access_token=abc")), None);
        assert_eq!(access_token(Some("access_token=%zz")), None);
        assert_eq!(
            without_access_token("a=1&access_token=s3cret&b=2"),
            "a=1&b=2"
        );
        assert_eq!(without_access_token("a=1"), "a=1");
    }

    #[test]
    fn bearer_needs_the_scheme_and_a_value() {
        assert_eq!(bearer(b"Bearer abc"), Some(&b"abc"[..]));
        assert_eq!(bearer(b"bearer  abc "), Some(&b"abc"[..]));
        assert_eq!(bearer(b"Basic abc"), None);
        assert_eq!(bearer(b"Bearer "), None);
    }
}
