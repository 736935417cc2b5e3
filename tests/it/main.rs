//! The integration tests, as one test binary (`it`): the real gateway, in-process or as the built
//! binary, in front of real sample agents, subscribers and redis-servers on loopback. One module
//! per family; the setup they share is in `support`.

mod support;

/// No official A2A agent's address reaches a client or a push receiver, on every path: a
/// hostile agent's Part URLs, card fields, error texts and headers, scanned for in everything
/// a client reads; the rewritten file URL is its task owner's to fetch, and reaches nothing
/// else of the agent.
mod a2a_addresses;
/// The A2A alerts against the gateway: every reason it answers in the rule of the party at
/// fault, and a stopped, a slow, a busy and an erring agent making the series that promtool
/// fires each rule on.
mod a2a_alerts;
/// The record keeps what it was given, or says it did not: large artifacts whole through
/// GetTask, ListTasks and push, streamed appends folded, and past the artifact bound every
/// artifact listed, the cut marked and counted; in-process and on Redis.
mod a2a_artifacts;
/// Official A2A contexts bounded and fair: a client filling conversations is refused its own
/// new ones before the agent is called, never another client's; contexts free themselves.
mod a2a_contexts;
/// The official A2A routes at their edges: the extended card, reloads of protocol and
/// binding, subscribers' protocols, report mode, each binding's shapes for refusals.
mod a2a_edges;
/// Official A2A agents behind the gateway: the served card, both bindings either way, the
/// ledger's guarantees, ownership, hostile agents, the gateway's own errors, by both SDKs.
mod a2a_gateway;
/// A2A's gRPC binding through the gateway: a2a-sdk's gRPC client to agents of each binding,
/// both SDKs' JSON clients to a gRPC agent, statuses, push configs, streams shared with the
/// JSON bindings, endings as final statuses.
mod a2a_grpc;
/// Final states, ownership on one gateway and two replicas, hostile agents, messageId
/// idempotency and the gateway's own errors, for official A2A tasks.
mod a2a_guarantees;
/// ListTasks and GET /tasks from the ledger: 250 tasks, three clients, two replicas, pages of
/// 100, 50 and 7 while tasks keep arriving; tokens bound to their caller and filters.
mod a2a_listing;
/// Rights per A2A method (`[[clients]] methods`): a call of another method refused with 403
/// FORBIDDEN on every binding and version, before the agent, counted; the served card readable
/// whatever the methods; a reload that takes a streaming method away ends its streams.
mod a2a_methods;
/// Push receivers hear a task's progress: every tick of a task that reports WORKING with new
/// status messages, whether the agent pushes, streams or is polled, for a config created on a
/// running task and an inline config on a blocking message; a cancel heard all three ways; a
/// resubscription's Task told as updates.
mod a2a_progress;
/// A2A push configs kept and delivered by the gateway: both SDK clients, a real receiver, an
/// agent that pushes and one that is polled, guards, secrets, a receiver down for 30 s, kill -9.
mod a2a_push;
/// The official A2A SDKs as test peers (a2a-sdk agents, a2a-sdk and @a2a-js/sdk clients),
/// direct to each other: the harness the gateway's A2A tests stand on.
mod a2a_sdk;
/// Proto field names in requests (`message_id`): read on both bindings, JSON names to the agent,
/// both spellings of one field refused, another client's task named either way refused alike.
mod a2a_spelling;
mod a2a_streams;
mod a2a_v0_3;
/// No agent address reaches a client: `public_url` (else `Host`, never `X-Forwarded-*`), file
/// links and content redirects rewritten or refused, and a scan of every route for the address.
mod addresses;
/// Client identity, rights, ownership and CORS, on every route family and connection path.
mod auth;
/// A real browser (headless Chromium) on a page from an allowed origin, and one from another.
mod browser;
/// Agent cards: fetching at start, the catalog, the cached card, refresh with ETag and
/// Cache-Control, stale serving, unavailable and slow agents, redaction of `auth_header`.
mod cards;
/// The Chrome DevTools Protocol harness (`support::cdp`) against a page of its own: navigation,
/// evaluation, waiting on the DOM, thrown exceptions, screenshots.
mod cdp_harness;
/// The command line through the real binary: `check-config`, serving with `--config`, SIGTERM,
/// an unreachable Redis, usage errors, and no `auth_header` in the process's output.
mod cli;
/// One credential per request and one identity per caller: two credentials are 400 everywhere,
/// a JWT is a client only through `jwt_subject`, and `check-config` refuses weak JWKS keys and
/// placeholder secrets and warns about a missing `public_url`.
mod credentials;
/// `a2a-gateway demo`: the curl commands it prints work when pasted.
mod demo;
/// Agents' replicas found by DNS (`discover = "dns"`) against a real dnsmasq.
mod dns_discovery;
/// The README and docs/ in a clone: every relative link resolves, the README links every doc,
/// stays short and gives `scripts/test` as the test command.
mod docs;
/// What clients and agents must not be able to do to the gateway: idle connections, lost query
/// strings, future timestamps, proxying without a card, huge inputs echoed in errors, cards
/// whose schemas compile large.
mod hardening;
/// Safe retries of create: `Idempotency-Key` replays, reuse, in-flight and malformed keys,
/// late answers recorded after a timeout, and one key shared by two replicas on Redis.
mod idempotency;
/// The caller's identity, to the agent (`identity = "assertion"`): a2a-sdk agents verify the
/// gateway's `A2A-Caller` with PyJWT against `/.well-known/jwks.json` for a key, a certificate
/// and a real identity provider's token client, on both bindings; a client's own never arrives.
mod identity;
/// Terminal immutability and the state machine, from every direction a task can be pushed.
mod immutability;
/// JWT bearer tokens checked against a JWKS file: every algorithm allowed, every forgery refused.
mod jwt;
/// The in-process ledger's fair bounds: one global `max_tasks`, final tasks evicted oldest
/// first, no live task evicted for another client's create, 503 LEDGER_FULL and 429
/// TOO_MANY_TASKS before the agent is called.
mod ledger_fairness;
/// Limits: a client's rate (429 RATE_LIMITED and the IETF RateLimit headers), an agent's
/// `max_in_flight` (503 AGENT_BUSY), and ejection after consecutive failures with the half-open
/// probe that brings an agent back; `GET /agents` and the metrics at each step.
mod limits;
/// The ledger's listing on both backends: the same history listed alike, once, in order.
mod listing;
/// What deploy/ ships for monitoring against a live scrape: every metric family the Grafana
/// dashboard and the alert rules name is exported, with the labels they use.
mod monitoring;
/// `POST /agents/{name}/notifications`: authenticated pushes judged by the ledger.
mod notifications;
/// `[[auth.oidc]]` against a real identity provider (node's oidc-provider): keys by
/// discovery, rotation followed without a reload, the provider down at start.
mod oidc;
/// The official A2A clients and streams with a real identity provider's tokens: both SDKs'
/// clients through its key rotation, and a token's streams ended at its `exp`.
mod oidc_clients;
/// `GET /openapi.json`: public, the document built in, and the router and the document agree
/// both ways on a live gateway.
mod openapi;
/// What operators run: `--version`, completions, the man page, `probe`, subcommand options,
/// JSON logs with the access log and trace ids.
mod operators;
/// The one request pipeline: the lean stream path and HTTP/2 handled alike.
mod pipeline;
/// Push deliveries shared fairly: one client's 300 hanging receivers hold its own share of the
/// delivery slots, and another client's delivery arrives within a second, in process and on
/// Redis.
mod push_shares;
/// docs/quickstart-a2a.md as written: its files extracted, its commands run (an a2a-sdk agent,
/// the gateway, both SDKs' clients, curl at /a2a), its outputs and warnings checked.
mod quickstart;
/// The reconciler: tasks of agents that do not push reach their final state in the ledger, on
/// `/events` and in webhook deliveries, on the memory store and on Redis with two replicas
/// (each check made once, by one replica); and a restarted agent with a new `agent_id`
/// serving again within seconds.
mod reconciler;
/// Every Redis guarantee on a real three-master Redis Cluster started by the test: rules, races,
/// webhook order, kill -9, `/events` across replicas, keys on every master, a resharding under
/// traffic.
mod redis_cluster;
/// Redis killed and restarted under a create load; `rediss://` with an ACL user.
mod redis_failover;
/// The Redis ledger against a redis-server of the test's own: Lua and Rust rules agree, racing
/// replicas, gateways sharing tasks, a Redis restarted empty.
mod redis_ledger;
/// Live reload (SIGHUP), the SIGTERM drain, and secrets read from files.
mod reload;
/// One agent in front of three a2a-sdk replicas (`urls`): nginx's round-robin loses tasks
/// (TaskNotFoundError, counted), the gateway pins every call of a task to the replica holding it
/// and spreads new tasks evenly.
mod replicas;
/// One card per agent: a replica serving another card is `card_mismatch` and takes no new work.
mod replicas_cards;
/// Each replica's metric series, and a departed replica's removed after its grace.
mod replicas_metrics;
/// Replicas as operators live with them: one killed (ejected, REPLICA_UNAVAILABLE, FAILED after
/// the grace once out of `urls`), two gateways on one Redis pinning alike, replicas followed in
/// DNS, Clawpedia agents as replicas, replica addresses for operators only.
mod replicas_ops;
/// Withdrawn credentials cut what they opened: a removed client, a rotated key, a right or an
/// agent taken away, or a JWT's `exp` passing ends the streams they opened, with the reason.
mod revocation;
/// Every route over real HTTP: the proxied endpoints in both forms, every error code,
/// conformance in both modes, proxy header hygiene, health, readiness and metrics.
mod routes;
/// A real Prometheus scraping /metrics with the shipped deploy/prometheus.yml credentials.
mod scrape;
/// What the shipped files tell a user holds: `example-config` switched to an A2A agent serves
/// it, check-config's card path warning, the card fetch URL for operators only, the config's
/// JWT comments as the docs state the rule, `--help`.
mod shipped;
/// The shortest path through the gateway: create a task, then read it back.
mod smoke;
/// A Redis at `maxmemory` refusing writes: 503 STORE_UNAVAILABLE on both protocols without
/// Redis's words, not ready, counted, the alert firing in promtool, ready again by itself.
mod store_refusal;
/// Task event streams: shared upstreams, numbered events with replay, parsing, pings,
/// reconnects, the end of a task, slow consumers, and `/events`.
mod streams;
/// OpenTelemetry: a trace from orchestrator to agent to webhook, received by an OTLP/HTTP
/// collector on loopback, on the in-process store and on Redis; sampling; the config keys.
mod telemetry;
/// TLS in and out with a CA the test makes (rcgen): HTTP/1.1 and HTTP/2 by ALPN, a task
/// stream over TLS, client certificates required and optional (refused at the handshake, or
/// naming their client by `cert_subject`), certificates rotated under traffic, an https agent
/// trusted through its `ca_file`, and `check-config` naming broken TLS files.
mod tls;
/// The fleet page at `/ui` in headless Chromium: the demo without and with a key (agents, a
/// task moving live, a refused transition, the key prompt), and 200 agents with a burst.
mod ui;
/// The fleet page for both protocols in Chromium: recent tasks from the ledger, A2A and
/// Clawpedia tasks live, artifacts downloaded, sparklines from real traffic.
mod ui_fleet;
/// What operators see: the Redis series as Redis goes and comes back, "Redis answers again"
/// only after a failure, a failed webhook attempt logged once per retry without secrets, open
/// connections by transport, and the process collector.
mod visibility;
/// Webhook delivery across real gateway processes on one Redis: SIGKILL with deliveries in
/// flight loses none, and racing gateways never move a terminal task.
mod webhook_processes;
/// Webhook fan-out in-process: signed deliveries in order per task, retries, 410s, dead letters
/// and a Redis restart.
mod webhooks;
