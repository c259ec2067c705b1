//! Redis-only cases: values written behind flowguard's back, large fencing tokens, connect
//! timeouts and a connection that goes silent. Needs REDIS_URL (`npm test` sets it and passes
//! `--include-ignored`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use flowguard_core::keys::Keys;
use flowguard_core::lock::AcquireOptions;
use flowguard_core::{Client, ErrorCode, OpenOptions};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

mod common;

fn url() -> String {
    std::env::var("REDIS_URL").expect("REDIS_URL must point at a Redis for the Redis suite")
}

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    common::runtime().block_on(f)
}

/// A plain connection, to write what a person with redis-cli would.
async fn raw() -> redis::aio::MultiplexedConnection {
    redis::Client::open(url()).unwrap().get_multiplexed_async_connection().await.unwrap()
}

fn keys(c: &Client) -> &Keys {
    &c.config().keys
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn fences_are_exact_up_to_2_pow_53() {
    block_on(async {
        let c = common::open(Some(url())).await;
        let mut r = raw().await;
        // Counters above the clock in µs (a token is the larger of the two; the clock passes 4e15 µs
        // in 2096): 4e15, a round number Lua would print as 4e+15, and the last exact one.
        for (name, start) in [("4e15", 4_000_000_000_000_000u64 - 1), ("max", (1u64 << 53) - 2)] {
            let fence_key = keys(&c).lock_fence(name);
            let _: () = redis::cmd("SET").arg(&fence_key).arg(start).query_async(&mut r).await.unwrap();
            let a = c.acquire_lock(name, AcquireOptions { label: Some("x".into()), ..Default::default() });
            let a = a.await.unwrap();
            assert!(a.acquired);
            assert_eq!(a.fence, start + 1);
            let v: String = redis::cmd("GET").arg(keys(&c).lock(name)).query_async(&mut r).await.unwrap();
            assert!(v.ends_with(&format!(":{}:x", start + 1)), "lock value {v:?}");
            let info = c.get_lock(name).await.unwrap();
            assert_eq!((info.locked, info.fence, info.holder.as_deref()), (true, start + 1, Some("x")));
            let held = c.acquire_lock(name, AcquireOptions::default()).await.unwrap();
            assert_eq!((held.acquired, held.fence), (false, start + 1));
            let owner = a.owner.unwrap();
            assert!(c.extend_lock(name, &owner, Some(Duration::from_millis(5_000))).await.unwrap().extended);
            assert!(c.release_lock(name, &owner).await.unwrap().released);
            assert_eq!(c.get_lock(name).await.unwrap().fence, start + 1);
            let again = c.acquire_lock(name, AcquireOptions::default()).await.unwrap();
            assert_eq!((again.acquired, again.fence), (true, start + 2));
        }
    });
}

fn assert_foreign(e: flowguard_core::Error, key: &str) {
    assert_eq!(e.code, ErrorCode::Backend, "{}", e.message);
    assert!(e.message.contains(key), "{}", e.message);
    assert!(e.message.contains("did not write"), "{}", e.message);
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn a_lock_key_with_a_foreign_value_is_a_coded_error_naming_it() {
    block_on(async {
        let c = common::open(Some(url())).await;
        let mut r = raw().await;
        let owner = flowguard_core::token::new_token();
        // A string set by hand, and a key of another type.
        let (s, h) = (keys(&c).lock("by-hand"), keys(&c).lock("a-hash"));
        let _: () = redis::cmd("SET").arg(&s).arg("hello").query_async(&mut r).await.unwrap();
        let _: () = redis::cmd("HSET").arg(&h).arg("f").arg("v").query_async(&mut r).await.unwrap();
        for (name, key) in [("by-hand", &s), ("a-hash", &h)] {
            assert_foreign(c.acquire_lock(name, AcquireOptions::default()).await.unwrap_err(), key);
            assert_foreign(c.get_lock(name).await.unwrap_err(), key);
            assert_foreign(c.release_lock(name, &owner).await.unwrap_err(), key);
            assert_foreign(c.extend_lock(name, &owner, None).await.unwrap_err(), key);
        }
        // Nothing was changed, and no fencing token was issued.
        let v: String = redis::cmd("GET").arg(&s).query_async(&mut r).await.unwrap();
        assert_eq!(v, "hello");
        let f: Option<String> =
            redis::cmd("GET").arg(keys(&c).lock_fence("by-hand")).query_async(&mut r).await.unwrap();
        assert_eq!(f.as_deref().unwrap_or("0"), "0");
        // A fence counter that is not a number (with a lifetime of its own), and one of another
        // type: the acquire is refused, the counter is as it was and the lock was not taken.
        let fk = keys(&c).lock_fence("bad-fence");
        let _: () =
            redis::cmd("SET").arg(&fk).arg("abc").arg("PX").arg(600_000).query_async(&mut r).await.unwrap();
        assert_foreign(c.acquire_lock("bad-fence", AcquireOptions::default()).await.unwrap_err(), &fk);
        assert_foreign(c.get_lock("bad-fence").await.unwrap_err(), &fk);
        let v: String = redis::cmd("GET").arg(&fk).query_async(&mut r).await.unwrap();
        assert_eq!(v, "abc");
        let ttl: i64 = redis::cmd("PTTL").arg(&fk).query_async(&mut r).await.unwrap();
        assert!(ttl > 500_000 && ttl <= 600_000, "the counter's own lifetime kept: {ttl}");
        let hk = keys(&c).lock_fence("hash-fence");
        let _: () = redis::cmd("HSET").arg(&hk).arg("f").arg("v").query_async(&mut r).await.unwrap();
        assert_foreign(c.acquire_lock("hash-fence", AcquireOptions::default()).await.unwrap_err(), &hk);
        let h: Vec<String> = redis::cmd("HGETALL").arg(&hk).query_async(&mut r).await.unwrap();
        assert_eq!(h, ["f", "v"]);
        for name in ["bad-fence", "hash-fence"] {
            let n: i64 = redis::cmd("EXISTS").arg(keys(&c).lock(name)).query_async(&mut r).await.unwrap();
            assert_eq!(n, 0, "lock {name:?} not taken");
        }
    });
}

#[test]
fn a_server_that_never_answers_fails_naming_the_connect_timeout() {
    block_on(async {
        // Accepts and keeps the connection, never answers the handshake.
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let held = tokio::spawn(async move {
            let mut kept = Vec::new();
            while let Ok((s, _)) = l.accept().await {
                kept.push(s);
            }
        });
        let t0 = Instant::now();
        let e = Client::open(OpenOptions {
            url: Some(format!("redis://127.0.0.1:{port}")),
            connect_timeout: Some(Duration::from_millis(300)),
            command_timeout: Some(Duration::from_millis(4_000)),
            ..Default::default()
        })
        .await
        .err()
        .expect("no Redis answers there");
        held.abort();
        assert_eq!(e.code, ErrorCode::BackendUnavailable, "{}", e.message);
        assert!(e.message.contains("connectTimeoutMs = 300 ms"), "{}", e.message);
        assert!(!e.message.contains("4000"), "{}", e.message);
        assert!(t0.elapsed() < Duration::from_millis(1_500), "took {:?}", t0.elapsed());
    });
}

/// A TCP proxy on loopback to `upstream` that can black-hole every connection open so far (their
/// bytes are read and dropped in both directions, the sockets stay open) while new connections
/// are forwarded.
struct Proxy {
    port: u16,
    generation: Arc<std::sync::atomic::AtomicU64>,
}

impl Proxy {
    async fn start(upstream: String) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let generation = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let g = generation.clone();
        tokio::spawn(async move {
            while let Ok((down, _)) = l.accept().await {
                let Ok(up) = TcpStream::connect(&upstream).await else { continue };
                let dead = Arc::new(AtomicBool::new(false));
                let born = g.load(Ordering::SeqCst);
                let (dr, dw) = down.into_split();
                let (ur, uw) = up.into_split();
                for (mut from, mut to) in [
                    (
                        Box::new(dr) as Box<dyn tokio::io::AsyncRead + Unpin + Send>,
                        Box::new(uw) as Box<dyn tokio::io::AsyncWrite + Unpin + Send>,
                    ),
                    (Box::new(ur), Box::new(dw)),
                ] {
                    let (g, dead) = (g.clone(), dead.clone());
                    tokio::spawn(async move {
                        let mut buf = vec![0u8; 16 * 1024];
                        loop {
                            let n = match from.read(&mut buf).await {
                                Ok(0) | Err(_) => break,
                                Ok(n) => n,
                            };
                            if g.load(Ordering::SeqCst) != born {
                                dead.store(true, Ordering::SeqCst);
                            }
                            if dead.load(Ordering::SeqCst) {
                                continue;
                            }
                            if to.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                        // Keep the write half open: a black hole never closes.
                        std::future::pending::<()>().await;
                        drop(to);
                    });
                }
            }
        });
        Proxy { port, generation }
    }

    /// Every connection open now stops carrying bytes; new ones work.
    fn black_hole(&self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn a_black_holed_connection_is_retired_after_timeouts_in_a_row() {
    block_on(async {
        let u = url::parse(&url());
        let proxy = Proxy::start(u.clone()).await;
        let c = Client::open(OpenOptions {
            url: Some(format!("redis://127.0.0.1:{}", proxy.port)),
            prefix: Some(format!("bh:{}:", flowguard_core::token::new_token())),
            connect_timeout: Some(Duration::from_millis(500)),
            command_timeout: Some(Duration::from_millis(300)),
            ..Default::default()
        })
        .await
        .unwrap();
        assert!(c.acquire_lock("a", AcquireOptions::default()).await.unwrap().acquired);
        proxy.black_hole();
        let t0 = Instant::now();
        let mut timeouts = 0;
        let recovered = loop {
            match c.get_lock("a").await {
                Ok(info) => break info,
                Err(e) => {
                    assert_eq!(e.code, ErrorCode::Timeout, "{}", e.message);
                    timeouts += 1;
                }
            }
            assert!(t0.elapsed() < Duration::from_secs(5), "no recovery after {timeouts} timeouts");
        };
        assert!(recovered.locked);
        assert!((1..=3).contains(&timeouts), "{timeouts} timeouts before the connection was retired");
        // Calls keep working on the new connection.
        for _ in 0..5 {
            assert!(c.get_lock("a").await.unwrap().locked);
        }
    });
}

/// `host:port` of a `redis://` URL without credentials or db (enough for the proxy).
mod url {
    pub fn parse(u: &str) -> String {
        let rest = u.split_once("://").map(|(_, r)| r).unwrap_or(u);
        let rest = rest.rsplit_once('@').map(|(_, r)| r).unwrap_or(rest);
        rest.split('/').next().unwrap_or(rest).to_string()
    }
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn a_semaphore_key_with_a_foreign_value_is_a_coded_error_naming_it() {
    use flowguard_core::semaphore::PermitOptions;
    block_on(async {
        let c = common::open(Some(url())).await;
        let mut r = raw().await;
        let owner = flowguard_core::token::new_token();
        let opts = || PermitOptions { permits: 2, ..Default::default() };
        for part in ["h", "fence"] {
            let name = format!("sem-foreign-{part}");
            let key = keys(&c).semaphore(&name, part);
            // A list where the holders or the counter belong.
            let _: () = redis::cmd("RPUSH").arg(&key).arg("by-hand").query_async(&mut r).await.unwrap();
            assert_foreign(c.acquire_permit(&name, opts()).await.unwrap_err(), &key);
            assert_foreign(c.get_semaphore(&name).await.unwrap_err(), &key);
            if part == "h" {
                assert_foreign(c.release_permit(&name, &owner).await.unwrap_err(), &key);
                assert_foreign(c.extend_permit(&name, &owner, None).await.unwrap_err(), &key);
            } else {
                // Release and extend read no counter: not held, nothing changed.
                assert!(!c.release_permit(&name, &owner).await.unwrap().released);
                assert!(!c.extend_permit(&name, &owner, None).await.unwrap().extended);
            }
            // Nothing was changed, and no fencing token or permit was issued.
            let list: Vec<String> =
                redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query_async(&mut r).await.unwrap();
            assert_eq!(list, ["by-hand"]);
            let all: Vec<String> = redis::cmd("KEYS")
                .arg(format!("{}*", keys(&c).semaphore(&name, "")))
                .query_async(&mut r)
                .await
                .unwrap();
            assert_eq!(all, std::slice::from_ref(&key), "written although {key} is foreign");
        }
        // A counter that is text, with a lifetime of its own: refused, and kept as it was.
        let name = "sem-foreign-text";
        let key = keys(&c).semaphore(name, "fence");
        let _: () =
            redis::cmd("SET").arg(&key).arg("abc").arg("PX").arg(600_000).query_async(&mut r).await.unwrap();
        assert_foreign(c.acquire_permit(name, opts()).await.unwrap_err(), &key);
        let v: String = redis::cmd("GET").arg(&key).query_async(&mut r).await.unwrap();
        assert_eq!(v, "abc");
        let ttl: i64 = redis::cmd("PTTL").arg(&key).query_async(&mut r).await.unwrap();
        assert!(ttl > 500_000 && ttl <= 600_000, "the counter's own lifetime kept: {ttl}");
        let all: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{}*", keys(&c).semaphore(name, "")))
            .query_async(&mut r)
            .await
            .unwrap();
        assert_eq!(all, std::slice::from_ref(&key), "written although {key} is foreign");
        // A holder's permit key overwritten by hand: the listing names it (without the owner).
        let name = "sem-foreign-permit";
        let held = c.acquire_permit(name, opts()).await.unwrap();
        let permit = keys(&c).semaphore(name, &format!("p:{}", held.owner.as_deref().unwrap()));
        let _: () = redis::cmd("DEL").arg(&permit).query_async(&mut r).await.unwrap();
        let _: () = redis::cmd("RPUSH").arg(&permit).arg("by-hand").query_async(&mut r).await.unwrap();
        assert_foreign(c.get_semaphore(name).await.unwrap_err(), &keys(&c).semaphore(name, "p:<owner>"));
    });
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn a_semaphores_keys_live_as_long_as_its_longest_lease() {
    use flowguard_core::semaphore::{PermitOptions, PermitResult};
    block_on(async {
        let c = common::open(Some(url())).await;
        let r = raw().await;
        let lease = |s: u64| PermitOptions {
            permits: 3,
            timeout: Some(Duration::from_secs(s)),
            ..Default::default()
        };
        let name = "sem-lifetime";
        let long = c.acquire_permit(name, lease(600)).await.unwrap();
        let short = c.acquire_permit(name, lease(1)).await.unwrap();
        assert!(long.acquired && short.acquired);
        let permit =
            |p: &PermitResult| keys(&c).semaphore(name, &format!("p:{}", p.owner.as_deref().unwrap()));
        let ttl = |k: String| {
            let mut r = r.clone();
            async move { redis::cmd("PTTL").arg(&k).query_async::<i64>(&mut r).await.unwrap() }
        };
        let h = keys(&c).semaphore(name, "h");
        for k in [h.clone(), permit(&long)] {
            let t = ttl(k.clone()).await;
            assert!(t > 590_000, "{k}: {t} ms left, shorter than the 600 s lease held");
        }
        let t = ttl(permit(&short)).await;
        assert!((1..=1_000).contains(&t), "the 1 s permit: {t} ms left");
        // Extending the short lease past the long one lengthens the holders' key and its permit.
        c.extend_permit(name, short.owner.as_deref().unwrap(), Some(Duration::from_secs(900))).await.unwrap();
        for k in [h.clone(), permit(&short)] {
            let t = ttl(k.clone()).await;
            assert!(t > 890_000, "{k}: {t} ms left after an extension to 900 s");
        }
        // Released one by one: the holders and their permits are gone, the counter stays.
        c.release_permit(name, long.owner.as_deref().unwrap()).await.unwrap();
        c.release_permit(name, short.owner.as_deref().unwrap()).await.unwrap();
        let n: i64 = redis::cmd("EXISTS")
            .arg(&h)
            .arg(permit(&long))
            .arg(permit(&short))
            .query_async(&mut r.clone())
            .await
            .unwrap();
        assert_eq!(n, 0);
        assert_eq!(c.get_semaphore(name).await.unwrap().fence, short.fence);
    });
}

#[test]
#[ignore = "needs a Redis: set REDIS_URL and pass --include-ignored (npm test does)"]
fn a_semaphores_ended_holders_are_dropped_in_bounded_steps() {
    use flowguard_core::semaphore::PermitOptions;
    block_on(async {
        let c = common::open(Some(url())).await;
        let mut r = raw().await;
        let name = "sem-sweep";
        let h = keys(&c).semaphore(name, "h");
        // 100 holders that never release, each lease 1 ms: each ends before the next acquisition.
        let brief =
            || PermitOptions { permits: 2, timeout: Some(Duration::from_millis(1)), ..Default::default() };
        let mut most = 0;
        for _ in 0..100 {
            let p = c.acquire_permit(name, brief()).await.unwrap();
            assert!(p.acquired);
            tokio::time::sleep(Duration::from_millis(2)).await;
            let n: i64 = redis::cmd("ZCARD").arg(&h).query_async(&mut r).await.unwrap();
            most = most.max(n);
        }
        // Ended entries are never counted, and are dropped every 16th fence: at most 2 + 16 left.
        assert!(most <= 18, "the holders' key held {most} entries");
        // The permits of those holders are gone with their leases: not held, nothing listed.
        assert!(c.get_semaphore(name).await.unwrap().holders.is_empty());
        let permits: Vec<String> =
            redis::cmd("KEYS").arg(keys(&c).semaphore(name, "p:*")).query_async(&mut r).await.unwrap();
        assert!(permits.is_empty(), "{permits:?}");
    });
}
