//! Which handler answers which route: the one table (the pipeline's stage 4). Each
//! protocol's handlers are in its folder (`clawpedia/`, `a2a/`), the routes every protocol
//! shares in `handlers/`.

use std::sync::Arc;

use super::a2a;
use super::clawpedia::{artifacts, create, notifications, streams, tasks};
use super::context::Ctx;
use super::error::{ApiError, ApiResult, Code};
use super::handlers::{admin, catalog, events, listing, probes, ui};
use super::request::Request;
use super::route::Route;
use crate::config::Protocol;
use crate::state::State;

/// The handler of `route`, called.
pub async fn handler(
    state: &Arc<State>,
    ctx: &mut Ctx,
    route: Route<'_>,
    req: Request,
) -> ApiResult {
    match route {
        Route::Healthz => probes::healthz(),
        Route::Readyz => probes::readyz(state),
        Route::Metrics => probes::metrics(state).await,
        Route::OpenApi => probes::openapi(),
        Route::Jwks => probes::jwks(state),
        Route::Catalog => catalog::agents(state, ctx, &req),
        Route::Card(a) => catalog::card(state, ctx, a),
        Route::Fleet => catalog::fleet(state, ctx, &req).await,
        Route::Ui(asset) => ui::asset(asset, req.headers()),
        Route::CreateTask(a) => create::create(state, ctx, a, req).await,
        Route::ListTasks => listing::tasks(state, ctx, req).await,
        Route::GetTask(a, t) => tasks::get(state, ctx, a, t, req).await,
        Route::CancelTask(a, t) => tasks::cancel(state, ctx, a, t, req).await,
        Route::ListArtifacts(a, t) => artifacts::list(state, ctx, a, t, req).await,
        Route::ArtifactContent(a, id) => artifacts::content(state, ctx, a, id, req).await,
        Route::Stream(a, t) => streams::subscribe(state, ctx, a, t, req).await,
        Route::Notifications(a) => notifications::ingest(state, ctx, a, req).await,
        // Asked again: a reload since the route was parsed may have changed the agent.
        Route::A2aPush(a) => match state.registry.resolve(a) {
            Some(agent) if agent.cfg.protocol == Protocol::A2a => {
                a2a::push_configs::ingest(state, ctx, agent, req).await
            }
            _ => notifications::ingest(state, ctx, a, req).await,
        },
        Route::Events => events::events(state, ctx, req).await,
        Route::DeadLetters => admin::dead_letters(state, req).await,
        Route::Redrive => admin::redrive(state, req).await,
        Route::Subscribers => admin::subscribers(state).await,
        Route::EnableSubscriber(s) => admin::enable(state, s).await,
        Route::RefreshAgent(a) => catalog::refresh(state, ctx, a).await,
        Route::A2a(a, tail) => a2a::serve(state, ctx, a, tail, req).await,
        Route::A2aFleet => a2a::fleet(state, ctx, req).await,
        Route::A2aService => a2a::service(state, ctx, req).await,
        Route::NotFound => Err(ApiError::new(Code::NotFound, "no such route")),
    }
}
