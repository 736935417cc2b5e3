//! Every route of the gateway, parsed from the path alone: one enum, so the pipeline, the
//! metrics labels and the lean stream path all agree on what a path is. A route carries what
//! the pipeline asks of it, whatever its protocol or wire form: its label and method
//! ([`Route::meta`]), what admission needs of its caller ([`Route::needs`]), and the shape of
//! the gateway's own errors on it ([`Route::errors`]).

use hyper::{HeaderMap, Method, Response};

use crate::config::Right;
use crate::http::a2a::wire::{self, Form};
use crate::http::body::Body;
use crate::http::error::ApiError;

/// Every route of the gateway. Segments borrow from the request path.
#[derive(Debug, PartialEq, Eq)]
pub enum Route<'a> {
    /// `GET /healthz`: the process is up.
    Healthz,
    /// `GET /readyz`: the gateway is ready to take traffic.
    Readyz,
    /// `GET /metrics`: the Prometheus scrape.
    Metrics,
    /// `GET /openapi.json`: the OpenAPI document of every route here.
    OpenApi,
    /// `GET /.well-known/jwks.json`: the public keys of the gateway's `A2A-Caller` assertions.
    Jwks,
    /// `GET /agents`: the catalog of agents.
    Catalog,
    /// `GET /agents/{name}/agent-card.json`: the card of one agent, as the gateway serves it.
    Card(&'a str),
    /// `POST [/agents/{name}]/tasks`: create a task, on the named agent if the path names one.
    CreateTask(Option<&'a str>),
    /// `GET /tasks`: the gateway's listing of tasks, of both protocols. Its path is the
    /// create's: [`Route::with_method`] tells them apart.
    ListTasks,
    /// `GET [/agents/{name}]/tasks/{id}`: (agent, task id).
    GetTask(Option<&'a str>, &'a str),
    /// `POST [/agents/{name}]/tasks/{id}/cancel`: (agent, task id).
    CancelTask(Option<&'a str>, &'a str),
    /// `GET [/agents/{name}]/tasks/{id}/artifacts`: (agent, task id).
    ListArtifacts(Option<&'a str>, &'a str),
    /// `GET [/agents/{name}]/tasks/{id}/stream`: a task's event stream; (agent, task id).
    Stream(Option<&'a str>, &'a str),
    /// `GET [/agents/{name}]/artifacts/{id}/content`: (agent, artifact id).
    ArtifactContent(Option<&'a str>, &'a str),
    /// `POST /agents/{name}/notifications`: a Clawpedia agent's push notification.
    Notifications(&'a str),
    /// `POST /agents/{name}/notifications` of an official A2A agent: its pushes to the push
    /// configs the gateway gave it.
    A2aPush(&'a str),
    /// `GET /events`: the feed of task changes.
    Events,
    /// `GET /admin/dead-letters`: list webhook dead letters.
    DeadLetters,
    /// `POST /admin/dead-letters/redrive`: queue dead letters again.
    Redrive,
    /// `GET /admin/subscribers`: the webhook subscribers and their state.
    Subscribers,
    /// `POST /admin/subscribers/{name}/enable`: lift a 410's disable.
    EnableSubscriber(&'a str),
    /// `POST /admin/agents/{name}/refresh`: fetch an agent's card now.
    RefreshAgent(&'a str),
    /// `GET /ui` (and its two assets): the live fleet page, compiled into the binary.
    Ui(UiAsset),
    /// `GET /api/fleet`: what the fleet page shows, in one snapshot.
    Fleet,
    /// Anything under `/agents/{name}/` of an official A2A agent: (agent, the path after
    /// `/agents/{name}/`, still percent-encoded). Its card, its JSON-RPC endpoint (`jsonrpc`)
    /// and the HTTP+JSON routes; which one, and the method it takes, `http::a2a` decides.
    A2a(&'a str, &'a str),
    /// `POST /a2a`: the fleet's JSON-RPC endpoint, over every A2A agent the caller may use.
    A2aFleet,
    /// `POST /lf.a2a.v1.A2AService/{method}` (and 0.3's `/a2a.v1.A2AService/...`, refused):
    /// A2A's gRPC service over every A2A agent the caller may use, the tenant naming the agent.
    A2aService,
    /// Any other path, and a task or artifact id that is not a [`valid_id`].
    NotFound,
}

/// The files of the fleet page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UiAsset {
    /// `/ui`: the page.
    Page,
    /// `/ui/app.js`: its script.
    Script,
    /// `/ui/app.css`: its style sheet.
    Style,
}

impl<'a> Route<'a> {
    /// The route of a request path, where `a2a` says which agent names are official A2A
    /// agents: everything under their `/agents/{name}/` is theirs (their routes and the
    /// Clawpedia routes share paths, `/agents/{name}/tasks/{id}`, so the path alone cannot say).
    pub fn parse_with(path: &'a str, a2a: impl Fn(&str) -> bool) -> Route<'a> {
        if path == "/a2a" {
            return Route::A2aFleet;
        }
        if let Some((name, tail)) = path
            .strip_prefix("/agents/")
            .and_then(|rest| rest.split_once('/'))
        {
            if !name.is_empty() && a2a(name) {
                // An A2A agent's own pushes to the gateway (the config the gateway gave it):
                // answered to the agent's token, not to a client's credential.
                if tail == "notifications" {
                    return Route::A2aPush(name);
                }
                return Route::A2a(name, tail);
            }
        }
        Route::parse(path)
    }

    /// The route a request's method chooses where one path is two routes: `GET /tasks` lists
    /// tasks, `POST /tasks` creates one.
    pub fn with_method(self, method: &Method) -> Route<'a> {
        match self {
            Route::CreateTask(None) if method == Method::GET => Route::ListTasks,
            other => other,
        }
    }

    /// The route of a request path, with no agent of the official A2A protocol: every route of
    /// the gateway's own and of Clawpedia agents.
    pub fn parse(path: &'a str) -> Route<'a> {
        if wire::is_service_path(path) {
            return Route::A2aService;
        }
        let mut segs = path.strip_prefix('/').unwrap_or(path).split('/');
        let parts: [Option<&str>; 6] = std::array::from_fn(|_| segs.next());
        if segs.next().is_some() {
            return Route::NotFound;
        }
        match parts {
            [Some("healthz"), None, ..] => Route::Healthz,
            [Some("readyz"), None, ..] => Route::Readyz,
            [Some("metrics"), None, ..] => Route::Metrics,
            [Some("openapi.json"), None, ..] => Route::OpenApi,
            [Some(".well-known"), Some("jwks.json"), None, ..] => Route::Jwks,
            [Some("agents"), None, ..] => Route::Catalog,
            [Some("events"), None, ..] => Route::Events,
            [Some("ui"), None | Some(""), None, ..] => Route::Ui(UiAsset::Page),
            [Some("ui"), Some("app.js"), None, ..] => Route::Ui(UiAsset::Script),
            [Some("ui"), Some("app.css"), None, ..] => Route::Ui(UiAsset::Style),
            [Some("api"), Some("fleet"), None, ..] => Route::Fleet,
            [Some("admin"), Some("dead-letters"), None, ..] => Route::DeadLetters,
            [Some("admin"), Some("dead-letters"), Some("redrive"), None, ..] => Route::Redrive,
            [Some("admin"), Some("subscribers"), None, ..] => Route::Subscribers,
            [Some("admin"), Some("subscribers"), Some(s), Some("enable"), None, ..]
                if !s.is_empty() =>
            {
                Route::EnableSubscriber(s)
            }
            [Some("admin"), Some("agents"), Some(a), Some("refresh"), None, ..]
                if !a.is_empty() =>
            {
                Route::RefreshAgent(a)
            }
            [Some("agents"), Some(a), Some("agent-card.json"), None, ..] if !a.is_empty() => {
                Route::Card(a)
            }
            [Some("agents"), Some(a), rest @ ..] if !a.is_empty() => {
                Route::task_routes(Some(a), [rest[0], rest[1], rest[2], rest[3]])
            }
            [first, second, third, fourth, None, None] => {
                Route::task_routes(None, [first, second, third, fourth])
            }
            _ => Route::NotFound,
        }
    }

    fn task_routes(agent: Option<&'a str>, p: [Option<&'a str>; 4]) -> Route<'a> {
        let id = |s: &'a str| valid_id(s).then_some(s);
        match p {
            [Some("tasks"), None, None, None] => Route::CreateTask(agent),
            [Some("notifications"), None, None, None] => {
                agent.map_or(Route::NotFound, Route::Notifications)
            }
            [Some("tasks"), Some(t), None, None] => {
                id(t).map_or(Route::NotFound, |t| Route::GetTask(agent, t))
            }
            [Some("tasks"), Some(t), Some("cancel"), None] => {
                id(t).map_or(Route::NotFound, |t| Route::CancelTask(agent, t))
            }
            [Some("tasks"), Some(t), Some("artifacts"), None] => {
                id(t).map_or(Route::NotFound, |t| Route::ListArtifacts(agent, t))
            }
            [Some("tasks"), Some(t), Some("stream"), None] => {
                id(t).map_or(Route::NotFound, |t| Route::Stream(agent, t))
            }
            [Some("artifacts"), Some(a), Some("content"), None] => {
                id(a).map_or(Route::NotFound, |a| Route::ArtifactContent(agent, a))
            }
            _ => Route::NotFound,
        }
    }

    /// The task id a route names, if any.
    pub fn task_id(&self) -> Option<&'a str> {
        match self {
            Route::GetTask(_, t)
            | Route::CancelTask(_, t)
            | Route::ListArtifacts(_, t)
            | Route::Stream(_, t) => Some(t),
            _ => None,
        }
    }

    /// Answered by the gateway itself (so HEAD is answered like GET, without a body).
    pub fn is_local(&self) -> bool {
        matches!(
            self,
            Route::Healthz
                | Route::Readyz
                | Route::Metrics
                | Route::OpenApi
                | Route::Jwks
                | Route::Catalog
                | Route::Card(_)
                | Route::Ui(_)
                | Route::Fleet
        )
    }

    /// Whether the route is answered in the official A2A protocol's shapes.
    pub fn is_a2a(&self) -> bool {
        matches!(self, Route::A2a(..) | Route::A2aFleet | Route::A2aService)
    }

    /// Whether the route's handler answers a method it does not take itself (405 with its own
    /// `Allow`): each path of a wire form takes its own methods.
    pub fn checks_own_methods(&self) -> bool {
        self.is_a2a()
    }

    /// The wire form a client speaks on the route, for the official A2A routes: by the route
    /// and the version the request asks (`A2A-Version`, header or query parameter).
    fn form(&self, headers: &HeaderMap, query: Option<&str>) -> Option<&'static dyn Form> {
        let asked = || wire::asked_version(headers, query);
        match self {
            Route::A2a(_, tail) => Some(wire::of_route(Some(tail), asked().as_deref())),
            Route::A2aFleet => Some(wire::of_route(None, None)),
            Route::A2aService => Some(wire::of_service_path()),
            _ => None,
        }
    }

    /// How the gateway's own errors are answered on the route (a refusal at admission, a 404 or
    /// 405, a handler's error): in the wire form the request speaks, or as the gateway's error
    /// body.
    pub fn errors(&self, headers: &HeaderMap, query: Option<&str>) -> Errors {
        Errors(self.form(headers, query).filter(|f| f.speaks(headers)))
    }

    /// What admission asks of the route's caller.
    pub fn needs(&self) -> Needs {
        match self {
            Route::Healthz
            | Route::Readyz
            | Route::OpenApi
            | Route::Jwks
            | Route::Ui(_)
            | Route::Notifications(_)
            | Route::A2aPush(_)
            | Route::NotFound => Needs::Nothing,
            Route::Catalog | Route::Card(_) | Route::Fleet => Needs::Client,
            Route::A2a(_, tail) if is_a2a_card(tail) => Needs::Client,
            // Send, get, cancel and the push configs; streams come with their own right.
            Route::A2a(..) | Route::A2aFleet | Route::A2aService => Needs::Right(Right::Tasks),
            Route::Metrics => Needs::Right(Right::Metrics),
            Route::CreateTask(_)
            | Route::ListTasks
            | Route::GetTask(..)
            | Route::CancelTask(..)
            | Route::ListArtifacts(..)
            | Route::ArtifactContent(..) => Needs::Right(Right::Tasks),
            Route::Stream(..) => Needs::Stream(Right::Streams),
            Route::Events => Needs::Stream(Right::Events),
            Route::DeadLetters
            | Route::Redrive
            | Route::Subscribers
            | Route::EnableSubscriber(_)
            | Route::RefreshAgent(_) => Needs::Right(Right::Admin),
        }
    }

    /// (metrics label, the one method the route answers)
    pub fn meta(&self) -> (&'static str, Method) {
        match self {
            Route::Healthz => ("healthz", Method::GET),
            Route::Readyz => ("readyz", Method::GET),
            Route::Metrics => ("metrics", Method::GET),
            Route::OpenApi => ("openapi", Method::GET),
            Route::Jwks => ("jwks", Method::GET),
            Route::Catalog => ("catalog", Method::GET),
            Route::Card(_) => ("card", Method::GET),
            Route::CreateTask(_) => ("create_task", Method::POST),
            Route::ListTasks => ("list_tasks", Method::GET),
            Route::GetTask(..) => ("get_task", Method::GET),
            Route::CancelTask(..) => ("cancel_task", Method::POST),
            Route::ListArtifacts(..) => ("list_artifacts", Method::GET),
            Route::Stream(..) => ("stream", Method::GET),
            Route::ArtifactContent(..) => ("artifact_content", Method::GET),
            Route::Notifications(_) | Route::A2aPush(_) => ("notifications", Method::POST),
            Route::Events => ("events", Method::GET),
            Route::DeadLetters => ("admin_dead_letters", Method::GET),
            Route::Redrive => ("admin_redrive", Method::POST),
            Route::Subscribers => ("admin_subscribers", Method::GET),
            Route::EnableSubscriber(_) => ("admin_enable_subscriber", Method::POST),
            Route::RefreshAgent(_) => ("admin_refresh_agent", Method::POST),
            Route::Ui(_) => ("ui", Method::GET),
            Route::Fleet => ("api_fleet", Method::GET),
            // Each tail takes its own methods: `http::a2a` answers 405 with `Allow` itself.
            Route::A2a(..) => ("a2a", Method::POST),
            Route::A2aFleet => ("a2a_fleet", Method::POST),
            Route::A2aService => ("a2a_grpc", Method::POST),
            Route::NotFound => ("not_found", Method::GET),
        }
    }

    /// The path template of the route as `GET /openapi.json` documents it, `None` for
    /// [`Route::NotFound`]. No wildcard arm: a new route does not compile until it has one, and
    /// the tests then fail until the document describes it (and it is in [`TEMPLATES`]).
    pub fn template(&self) -> Option<&'static str> {
        let agent = |a: &Option<&str>, agentless: &'static str, named: &'static str| {
            Some(if a.is_some() { named } else { agentless })
        };
        match self {
            Route::Healthz => Some("/healthz"),
            Route::Readyz => Some("/readyz"),
            Route::Metrics => Some("/metrics"),
            Route::OpenApi => Some("/openapi.json"),
            Route::Jwks => Some("/.well-known/jwks.json"),
            Route::Catalog => Some("/agents"),
            Route::Card(_) => Some("/agents/{name}/agent-card.json"),
            Route::CreateTask(a) => agent(a, "/tasks", "/agents/{name}/tasks"),
            Route::ListTasks => Some("/tasks"),
            Route::GetTask(a, _) => agent(a, "/tasks/{task_id}", "/agents/{name}/tasks/{task_id}"),
            Route::CancelTask(a, _) => agent(
                a,
                "/tasks/{task_id}/cancel",
                "/agents/{name}/tasks/{task_id}/cancel",
            ),
            Route::ListArtifacts(a, _) => agent(
                a,
                "/tasks/{task_id}/artifacts",
                "/agents/{name}/tasks/{task_id}/artifacts",
            ),
            Route::Stream(a, _) => agent(
                a,
                "/tasks/{task_id}/stream",
                "/agents/{name}/tasks/{task_id}/stream",
            ),
            Route::ArtifactContent(a, _) => agent(
                a,
                "/artifacts/{artifact_id}/content",
                "/agents/{name}/artifacts/{artifact_id}/content",
            ),
            Route::Notifications(_) | Route::A2aPush(_) => Some("/agents/{name}/notifications"),
            Route::Events => Some("/events"),
            Route::DeadLetters => Some("/admin/dead-letters"),
            Route::Redrive => Some("/admin/dead-letters/redrive"),
            Route::Subscribers => Some("/admin/subscribers"),
            Route::EnableSubscriber(_) => Some("/admin/subscribers/{subscriber}/enable"),
            Route::RefreshAgent(_) => Some("/admin/agents/{name}/refresh"),
            Route::Ui(UiAsset::Page) => Some("/ui"),
            Route::Ui(UiAsset::Script) => Some("/ui/app.js"),
            Route::Ui(UiAsset::Style) => Some("/ui/app.css"),
            Route::Fleet => Some("/api/fleet"),
            Route::A2a(_, tail) => Some(a2a_template(tail)),
            Route::A2aFleet => Some("/a2a"),
            Route::A2aService => Some(SERVICE_TEMPLATE),
            Route::NotFound => None,
        }
    }
}

/// The template of the gRPC service's route.
pub const SERVICE_TEMPLATE: &str = "/lf.a2a.v1.A2AService/{method}";
/// The template of the gRPC service's route under one agent (for a proxy that prefixes the
/// path: the agent is the route's, as on the JSON bindings' routes).
pub const AGENT_SERVICE_TEMPLATE: &str = "/agents/{name}/lf.a2a.v1.A2AService/{method}";

/// What a route asks of its caller (`admission::admit` judges it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing (probes; pushes, whose handler checks the agent's ingest token).
    Nothing,
    /// Any authenticated client.
    Client,
    /// A client with this right.
    Right(Right),
    /// A client with this right, and a free stream slot; `?access_token=` is accepted.
    Stream(Right),
}

/// How the gateway's own errors are answered on a route (see [`Route::errors`]).
#[derive(Debug, Clone, Copy)]
pub struct Errors(Option<&'static dyn Form>);

impl Errors {
    /// The error `e` as the route answers it.
    pub fn answer(self, e: ApiError) -> Response<Body> {
        match self.0 {
            Some(form) => form.refusal(e),
            None => e.into_response(),
        }
    }
}

/// Whether the tail after an official A2A agent's `/agents/{name}/` is one of its card's
/// paths.
pub fn is_a2a_card(tail: &str) -> bool {
    matches!(tail, ".well-known/agent-card.json" | "agent-card.json")
}

/// The template of an A2A agent's path (its tail after `/agents/{name}/`): the document's, or
/// for the paths it does not list (the stream routes, a tail of no route) a name for spans.
fn a2a_template(tail: &str) -> &'static str {
    let mut segs = tail.split('/');
    match (
        segs.next(),
        segs.next(),
        segs.next(),
        segs.next(),
        segs.next(),
    ) {
        (Some("jsonrpc"), None, ..) => "/agents/{name}/jsonrpc",
        (Some(".well-known"), Some("agent-card.json"), None, ..) => {
            "/agents/{name}/.well-known/agent-card.json"
        }
        (Some("agent-card.json"), None, ..) => "/agents/{name}/agent-card.json",
        (Some("message:send"), None, ..) => "/agents/{name}/message:send",
        (Some("message:stream"), None, ..) => "/agents/{name}/message:stream",
        (Some("extendedAgentCard"), None, ..) => "/agents/{name}/extendedAgentCard",
        (Some("files"), Some(_), None, ..) => "/agents/{name}/files/{file_id}",
        (Some("tasks"), None, ..) => "/agents/{name}/tasks",
        (Some("tasks"), Some(_), Some("pushNotificationConfigs"), None, _) => {
            "/agents/{name}/tasks/{task_id}/pushNotificationConfigs"
        }
        (Some("tasks"), Some(_), Some("pushNotificationConfigs"), Some(_), None) => {
            "/agents/{name}/tasks/{task_id}/pushNotificationConfigs/{config_id}"
        }
        (Some("tasks"), Some(t), None, ..) if t.ends_with(":cancel") => {
            "/agents/{name}/tasks/{task_id}:cancel"
        }
        (Some("tasks"), Some(t), None, ..) if t.ends_with(":subscribe") => {
            "/agents/{name}/tasks/{task_id}:subscribe"
        }
        (Some("tasks"), Some(_), None, ..) => "/agents/{name}/tasks/{task_id}",
        (Some("lf.a2a.v1.A2AService"), Some(_), None, ..) => AGENT_SERVICE_TEMPLATE,
        _ => "/agents/{name}/{a2a_path}",
    }
}

/// The documented path templates of official A2A agents' routes (`Route::A2a`, `Route::A2aFleet`)
/// and the methods each takes there. Three are also Clawpedia templates: two with the same
/// method (`/agents/{name}/tasks/{task_id}` and the card: GET), so the route depends on the
/// agent.
/// `/agents/{name}/tasks` is both: ListTasks (GET) on an A2A agent, a create (POST) on a
/// Clawpedia agent.
pub const A2A_TEMPLATES: [(&str, &[&str]); 14] = [
    ("/agents/{name}/.well-known/agent-card.json", &["GET"]),
    ("/agents/{name}/tasks", &["GET"]),
    ("/agents/{name}/agent-card.json", &["GET"]),
    ("/agents/{name}/jsonrpc", &["POST"]),
    ("/agents/{name}/message:send", &["POST"]),
    ("/agents/{name}/tasks/{task_id}", &["GET"]),
    ("/agents/{name}/tasks/{task_id}:cancel", &["POST"]),
    (
        "/agents/{name}/tasks/{task_id}/pushNotificationConfigs",
        &["POST", "GET"],
    ),
    (
        "/agents/{name}/tasks/{task_id}/pushNotificationConfigs/{config_id}",
        &["GET", "DELETE"],
    ),
    ("/agents/{name}/extendedAgentCard", &["GET"]),
    ("/agents/{name}/files/{file_id}", &["GET"]),
    ("/a2a", &["POST"]),
    (SERVICE_TEMPLATE, &["POST"]),
    (AGENT_SERVICE_TEMPLATE, &["POST"]),
];

/// The name [`instantiate_a2a`] puts in `{name}`: the official A2A agent of the agreement tests.
pub const A2A_TEST_AGENT: &str = "echo";

/// A path of an A2A `template` with each `{parameter}` replaced, `{name}` by
/// [`A2A_TEST_AGENT`], and a task id with a slash and a colon (percent-encoded as a client sends
/// it).
pub fn instantiate_a2a(template: &str) -> String {
    template
        .replace("{name}", A2A_TEST_AGENT)
        .replace("{task_id}", "t%2F1:x")
        .replace("{config_id}", "cfg-1")
        .replace("{file_id}", "f_1-AbC")
        .replace("{method}", "SendMessage")
}

/// Every path template of the router (each route's [`Route::template`]), in the order of the
/// document.
pub const TEMPLATES: [&str; 30] = [
    "/healthz",
    "/readyz",
    "/openapi.json",
    "/.well-known/jwks.json",
    "/metrics",
    "/agents",
    "/agents/{name}/agent-card.json",
    "/tasks",
    "/tasks/{task_id}",
    "/tasks/{task_id}/cancel",
    "/tasks/{task_id}/artifacts",
    "/tasks/{task_id}/stream",
    "/artifacts/{artifact_id}/content",
    "/agents/{name}/tasks",
    "/agents/{name}/tasks/{task_id}",
    "/agents/{name}/tasks/{task_id}/cancel",
    "/agents/{name}/tasks/{task_id}/artifacts",
    "/agents/{name}/tasks/{task_id}/stream",
    "/agents/{name}/artifacts/{artifact_id}/content",
    "/agents/{name}/notifications",
    "/events",
    "/admin/dead-letters",
    "/admin/dead-letters/redrive",
    "/admin/subscribers",
    "/admin/subscribers/{subscriber}/enable",
    "/admin/agents/{name}/refresh",
    "/api/fleet",
    "/ui",
    "/ui/app.js",
    "/ui/app.css",
];

/// A path of `template` with each `{parameter}` replaced by a value the router takes.
pub fn instantiate(template: &str) -> String {
    template
        .replace("{name}", "scripts")
        .replace("{task_id}", "123e4567-e89b-12d3-a456-426614174000")
        .replace("{artifact_id}", "a1b2c3d4_artifact")
        .replace("{subscriber}", "orchestrator")
}

/// The (agent prefix, task id) of a task-stream path, for the lean event-stream path.
pub fn stream_route(path: &str) -> Option<(Option<&str>, &str)> {
    match Route::parse(path) {
        Route::Stream(a, t) => Some((a, t)),
        _ => None,
    }
}

/// Ids go into the agent's URL path, so only unreserved characters are let through (no `..`,
/// no `/`, no percent-escapes): a crafted id cannot reach another path on the agent.
pub fn valid_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 128
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::Route::*;
    use super::*;

    #[test]
    fn routes_parse() {
        assert_eq!(Route::parse("/healthz"), Healthz);
        assert_eq!(Route::parse("/agents"), Catalog);
        assert_eq!(Route::parse("/agents/x/agent-card.json"), Card("x"));
        assert_eq!(Route::parse("/agents/x/tasks"), CreateTask(Some("x")));
        assert_eq!(Route::parse("/tasks"), CreateTask(None));
        assert_eq!(
            Route::parse("/agents/x/tasks/t-1"),
            GetTask(Some("x"), "t-1")
        );
        assert_eq!(Route::parse("/tasks/t/cancel"), CancelTask(None, "t"));
        assert_eq!(
            Route::parse("/agents/x/tasks/t/artifacts"),
            ListArtifacts(Some("x"), "t")
        );
        assert_eq!(Route::parse("/tasks/t/stream"), Stream(None, "t"));
        assert_eq!(
            Route::parse("/artifacts/a/content"),
            ArtifactContent(None, "a")
        );
        assert_eq!(
            Route::parse("/agents/x/artifacts/a/content"),
            ArtifactContent(Some("x"), "a")
        );
        assert_eq!(Route::parse("/admin/dead-letters"), DeadLetters);
        assert_eq!(Route::parse("/admin/dead-letters/redrive"), Redrive);
        assert_eq!(
            Route::parse("/admin/subscribers/s1/enable"),
            EnableSubscriber("s1")
        );
        assert_eq!(Route::parse("/admin/subscribers//enable"), NotFound);
        assert_eq!(Route::parse("/admin/agents/x/refresh"), RefreshAgent("x"));
        assert_eq!(Route::parse("/admin/agents//refresh"), NotFound);
        assert_eq!(Route::parse("/ui"), Ui(UiAsset::Page));
        assert_eq!(Route::parse("/ui/"), Ui(UiAsset::Page));
        assert_eq!(Route::parse("/ui/app.js"), Ui(UiAsset::Script));
        assert_eq!(Route::parse("/ui/app.css"), Ui(UiAsset::Style));
        assert_eq!(Route::parse("/ui/other.js"), NotFound);
        assert_eq!(Route::parse("/api/fleet"), Fleet);
        assert_eq!(Route::parse("/api"), NotFound);
    }

    #[test]
    fn an_a2a_agents_paths_are_all_its_own() {
        let a2a = |name: &str| name == "echo";
        let parse = |p| Route::parse_with(p, a2a);
        assert_eq!(parse("/agents/echo/tasks/t-1"), A2a("echo", "tasks/t-1"));
        assert_eq!(parse("/agents/echo/jsonrpc"), A2a("echo", "jsonrpc"));
        assert_eq!(
            parse("/agents/echo/tasks/a%2Fb:c:cancel"),
            A2a("echo", "tasks/a%2Fb:c:cancel")
        );
        assert_eq!(parse("/agents/echo/"), A2a("echo", ""));
        assert_eq!(parse("/a2a"), A2aFleet);
        // A Clawpedia agent's paths, and the gateway's own, are as before.
        assert_eq!(parse("/agents/x/tasks/t-1"), GetTask(Some("x"), "t-1"));
        assert_eq!(parse("/agents/echo"), NotFound);
        assert_eq!(parse("/agents"), Catalog);
        assert_eq!(parse("/tasks/t-1"), GetTask(None, "t-1"));
    }

    #[test]
    fn crafted_paths_do_not_route() {
        for p in [
            "/tasks/../agent-card.json",
            "/tasks/a%2Fb",
            "/agents//tasks",
            "/agents/x/tasks/t/cancel/x",
            "/tasks/t/",
            "/",
            "/agents/x/tasks/t/x/y/z",
        ] {
            assert_eq!(Route::parse(p), NotFound, "{p}");
        }
    }
}
