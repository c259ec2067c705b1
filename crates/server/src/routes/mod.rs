//! The API routes of the patterns, all `POST` with a JSON body (see docs/server.md).

pub mod catalog;
pub mod limiter;
pub mod lock;
pub mod queue;
pub mod semaphore;
pub mod state;
pub mod tracker;

use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::app::App;

/// Every API route, each with its OpenAPI operation (the path and method are given once, by the
/// handler's `#[utoipa::path]`).
pub fn api() -> OpenApiRouter<App> {
    OpenApiRouter::new()
        .routes(routes!(tracker::claim))
        .routes(routes!(tracker::claim_batch))
        .routes(routes!(tracker::claim_many))
        .routes(routes!(tracker::complete))
        .routes(routes!(tracker::fail))
        .routes(routes!(tracker::set_items))
        .routes(routes!(tracker::get_item))
        .routes(routes!(tracker::get_items))
        .routes(routes!(tracker::list_items))
        .routes(routes!(tracker::unset_item))
        .routes(routes!(tracker::revive_items))
        .routes(routes!(catalog::groups))
        .routes(routes!(lock::acquire))
        .routes(routes!(lock::release))
        .routes(routes!(lock::force_release))
        .routes(routes!(lock::extend))
        .routes(routes!(lock::get))
        .routes(routes!(catalog::locks))
        .routes(routes!(queue::enqueue))
        .routes(routes!(queue::read_batch))
        .routes(routes!(queue::ack))
        .routes(routes!(queue::release))
        .routes(routes!(queue::size))
        .routes(routes!(queue::peek))
        .routes(routes!(queue::dead_letters))
        .routes(routes!(queue::requeue_dead))
        .routes(routes!(catalog::queues))
        .routes(routes!(state::get))
        .routes(routes!(state::get_many))
        .routes(routes!(state::set))
        .routes(routes!(state::delete))
        .routes(routes!(state::increment))
        .routes(routes!(state::claim_key))
        .routes(routes!(state::complete_key))
        .routes(routes!(state::release_key))
        .routes(routes!(limiter::take))
        .routes(routes!(limiter::wait))
        .routes(routes!(limiter::pause))
        .routes(routes!(catalog::limiters))
        .routes(routes!(semaphore::acquire))
        .routes(routes!(semaphore::release))
        .routes(routes!(semaphore::force_release))
        .routes(routes!(semaphore::extend))
        .routes(routes!(semaphore::get))
        .routes(routes!(catalog::semaphores))
}

/// The paths of the API routes (all `POST`), as the OpenAPI document lists them.
pub fn paths() -> Vec<String> {
    api().into_openapi().paths.paths.into_keys().collect()
}
