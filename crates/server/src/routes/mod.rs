//! The API routes of the patterns, all `POST` with a JSON body (see docs/server.md).

pub mod catalog;
pub mod limiter;
pub mod lock;
pub mod queue;
pub mod semaphore;
pub mod state;
pub mod tracker;

use axum::routing::post;
use axum::Router;

use crate::app::App;

/// Every API route: the router and the list of its paths (the OpenAPI document must list the
/// same, a test checks it).
macro_rules! api_routes {
    ($($path:literal => $handler:path),* $(,)?) => {
        /// The paths of the API routes, all `POST`.
        pub const PATHS: &[&str] = &[$($path),*];

        pub fn api() -> Router<App> {
            Router::new()$(.route($path, post($handler)))*
        }
    };
}

api_routes! {
    "/v1/tracker/claim" => tracker::claim,
    "/v1/tracker/claimBatch" => tracker::claim_batch,
    "/v1/tracker/claimMany" => tracker::claim_many,
    "/v1/tracker/complete" => tracker::complete,
    "/v1/tracker/fail" => tracker::fail,
    "/v1/tracker/setItems" => tracker::set_items,
    "/v1/tracker/getItem" => tracker::get_item,
    "/v1/tracker/getItems" => tracker::get_items,
    "/v1/tracker/listItems" => tracker::list_items,
    "/v1/tracker/unsetItem" => tracker::unset_item,
    "/v1/lock/acquire" => lock::acquire,
    "/v1/lock/release" => lock::release,
    "/v1/lock/extend" => lock::extend,
    "/v1/lock/get" => lock::get,
    "/v1/queue/enqueue" => queue::enqueue,
    "/v1/queue/readBatch" => queue::read_batch,
    "/v1/queue/ack" => queue::ack,
    "/v1/queue/release" => queue::release,
    "/v1/queue/size" => queue::size,
    "/v1/queue/peek" => queue::peek,
    "/v1/state/get" => state::get,
    "/v1/state/getMany" => state::get_many,
    "/v1/state/set" => state::set,
    "/v1/state/delete" => state::delete,
    "/v1/state/increment" => state::increment,
    "/v1/state/claimKey" => state::claim_key,
    "/v1/state/completeKey" => state::complete_key,
    "/v1/state/releaseKey" => state::release_key,
    "/v1/tracker/listGroups" => catalog::groups,
    "/v1/lock/list" => catalog::locks,
    "/v1/queue/list" => catalog::queues,
    "/v1/limiter/take" => limiter::take,
    "/v1/limiter/wait" => limiter::wait,
    "/v1/semaphore/acquire" => semaphore::acquire,
    "/v1/semaphore/release" => semaphore::release,
    "/v1/semaphore/extend" => semaphore::extend,
    "/v1/semaphore/get" => semaphore::get,
    "/v1/limiter/list" => catalog::limiters,
    "/v1/semaphore/list" => catalog::semaphores,
}
