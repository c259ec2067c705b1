//! The API routes of the four patterns, all `POST` with a JSON body (see docs/server.md).

pub mod lock;
pub mod queue;
pub mod state;
pub mod tracker;

use axum::routing::post;
use axum::Router;

use crate::app::App;

/// Every API route: (path, handler). The OpenAPI document lists the same paths (a test checks it).
pub fn api() -> Router<App> {
    Router::new()
        .route("/v1/tracker/claim", post(tracker::claim))
        .route("/v1/tracker/claimBatch", post(tracker::claim_batch))
        .route("/v1/tracker/claimMany", post(tracker::claim_many))
        .route("/v1/tracker/complete", post(tracker::complete))
        .route("/v1/tracker/fail", post(tracker::fail))
        .route("/v1/tracker/setItems", post(tracker::set_items))
        .route("/v1/tracker/getItem", post(tracker::get_item))
        .route("/v1/tracker/getItems", post(tracker::get_items))
        .route("/v1/tracker/listItems", post(tracker::list_items))
        .route("/v1/tracker/unsetItem", post(tracker::unset_item))
        .route("/v1/lock/acquire", post(lock::acquire))
        .route("/v1/lock/release", post(lock::release))
        .route("/v1/lock/extend", post(lock::extend))
        .route("/v1/lock/get", post(lock::get))
        .route("/v1/queue/enqueue", post(queue::enqueue))
        .route("/v1/queue/readBatch", post(queue::read_batch))
        .route("/v1/queue/ack", post(queue::ack))
        .route("/v1/queue/release", post(queue::release))
        .route("/v1/queue/size", post(queue::size))
        .route("/v1/queue/peek", post(queue::peek))
        .route("/v1/state/get", post(state::get))
        .route("/v1/state/getMany", post(state::get_many))
        .route("/v1/state/set", post(state::set))
        .route("/v1/state/delete", post(state::delete))
        .route("/v1/state/increment", post(state::increment))
        .route("/v1/state/claimKey", post(state::claim_key))
        .route("/v1/state/completeKey", post(state::complete_key))
        .route("/v1/state/releaseKey", post(state::release_key))
}
