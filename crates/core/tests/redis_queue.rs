//! Redis-only Dedup Queue cases: shards written before shard marks existed (ids, no mark; the
//! queue's record counting them) are read, written and emptied as the others, and the shard count
//! is still checked on them. Needs REDIS_URL (`npm test` sets it and passes `--include-ignored`).

use flowguard_core::queue::{EnqueueOptions, ReadOptions, ShardSelect};
use flowguard_core::{Client, ErrorCode};

mod common;

fn url() -> String {
    std::env::var("REDIS_URL").expect("REDIS_URL must point at a Redis for the Redis suite")
}

async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

fn mark(c: &Client, shard: u32) -> String {
    let k = &c.config().keys;
    k.queue_key(&k.queue_shard("q", shard), 'n')
}

async fn drop_marks(c: &Client, r: &mut redis::aio::MultiplexedConnection) {
    let _: () = redis::cmd("DEL").arg(mark(c, 0)).arg(mark(c, 1)).query_async(r).await.unwrap();
}

fn shards(n: u64) -> Option<u64> {
    Some(n)
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn shards_written_before_marks_are_checked_read_and_emptied() {
    common::runtime().block_on(async {
        let c = common::open(Some(url())).await;
        let mut r = raw().await;
        let two = EnqueueOptions { shards: shards(2), ..Default::default() };
        let ids: Vec<String> = (0..20).map(|i| format!("id-{i}")).collect();
        c.enqueue("q", ids.clone(), two.clone()).await.unwrap();
        let marks: Vec<Option<String>> =
            redis::cmd("MGET").arg(mark(&c, 0)).arg(mark(&c, 1)).query_async(&mut r).await.unwrap();
        assert_eq!(marks, [Some("2".to_string()), Some("2".to_string())]);

        // As a shard of the previous layout: ids, no mark. Another count is refused on it.
        drop_marks(&c, &mut r).await;
        let four = ReadOptions { shards: shards(4), shard: Some(1), ..Default::default() };
        let e = c.read_batch("q", four).await.unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArgument, "{}", e.message);
        assert!(e.message.contains("shards = 2"), "{}", e.message);
        // Its own count reads it, and marks it.
        let size = c.queue_size("q", ShardSelect { shards: shards(2), shard: None }).await.unwrap();
        assert_eq!(size.waiting, 20);
        let marks: Vec<Option<String>> =
            redis::cmd("MGET").arg(mark(&c, 0)).arg(mark(&c, 1)).query_async(&mut r).await.unwrap();
        assert_eq!(marks, [Some("2".to_string()), Some("2".to_string())]);

        // An enqueue onto such a shard: the reserved place is given back (the record counted it).
        drop_marks(&c, &mut r).await;
        let added = c.enqueue("q", vec!["new".into()], two.clone()).await.unwrap();
        assert_eq!(added.len(), 1);
        let meta = c.config().keys.queue_meta("q");
        let k: Option<i64> = redis::cmd("HGET").arg(&meta).arg("k").query_async(&mut r).await.unwrap();
        assert_eq!(k, Some(2), "two shards counted, no place left reserved");

        // Read and acked whole: marks and record gone, and another count is taken.
        drop_marks(&c, &mut r).await;
        let b = c
            .read_batch("q", ReadOptions { shards: shards(2), limit: Some(100), ..Default::default() })
            .await
            .unwrap();
        assert_eq!(b.items.len(), 21);
        let got: Vec<String> = b.items.iter().map(|d| d.id.clone()).collect();
        let done = c.ack("q", &b.owner, got, shards(2)).await.unwrap();
        assert_eq!(done.len(), 21);
        let left: i64 = redis::cmd("EXISTS")
            .arg(&meta)
            .arg(mark(&c, 0))
            .arg(mark(&c, 1))
            .query_async(&mut r)
            .await
            .unwrap();
        assert_eq!(left, 0, "an empty queue keeps no key");
        let eight = EnqueueOptions { shards: shards(8), ..Default::default() };
        c.enqueue("q", ids, eight).await.unwrap();
    });
}
