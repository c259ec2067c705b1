//! Every route on Redis. Needs REDIS_URL; `npm test` starts a throwaway redis-server and runs
//! these with `--include-ignored`.
mod common;

fn url() -> Option<String> {
    Some(std::env::var("REDIS_URL").expect("REDIS_URL must point at a Redis for the Redis suite"))
}

route_suite!(url(), [#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]]);
