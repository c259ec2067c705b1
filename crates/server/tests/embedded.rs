//! Every route on the embedded store.
mod common;

route_suite!(None, []);
