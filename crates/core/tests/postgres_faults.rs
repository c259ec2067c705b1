//! The PostgreSQL backend when its server goes away and comes back: calls answer
//! ERR_BACKEND_UNAVAILABLE within the connect timeout (no hang, no panic) while it is down, and
//! succeed again once it is back, on the same client (the pool drops the dead connections). Stops
//! the cluster, so it runs alone in its own test binary, after `postgres.rs`: `node
//! scripts/postgres.mjs -- cargo test … --test postgres_faults -- --include-ignored` (the script
//! sets FLOWGUARD_POSTGRES_DATA and FLOWGUARD_POSTGRES_BIN).
mod common;

use std::process::Command;
use std::time::{Duration, Instant};

use flowguard_core::backend::postgres::PostgresOptions;
use flowguard_core::lock::AcquireOptions;
use flowguard_core::{Client, ErrorCode, OpenOptions};

fn env(name: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| panic!("{name} must be set (node scripts/postgres.mjs sets it)"))
}

/// Runs pg_ctl with `args` on the test cluster, as the `postgres` user when this is root.
fn pg_ctl(args: &[&str]) {
    let bin = format!("{}/pg_ctl", env("FLOWGUARD_POSTGRES_BIN"));
    let data = env("FLOWGUARD_POSTGRES_DATA");
    let root = Command::new("id").arg("-u").output().map(|o| o.stdout == b"0\n").unwrap_or(false);
    let mut cmd = if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", &bin]);
        c
    } else {
        Command::new(&bin)
    };
    let out = cmd.args(["-D", &data, "-w"]).args(args).output().expect("pg_ctl runs");
    assert!(out.status.success(), "pg_ctl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[ignore = "stops a PostgreSQL: needs FLOWGUARD_TEST_POSTGRES_URL/_DATA/_BIN and --include-ignored (scripts/postgres.mjs)"]
fn a_server_that_goes_away_is_unavailable_by_code_then_comes_back() {
    common::runtime().block_on(async {
        let c = Client::open(OpenOptions {
            postgres: Some(PostgresOptions { url: env("FLOWGUARD_TEST_POSTGRES_URL"), ..Default::default() }),
            prefix: Some(format!("faults:{}:", flowguard_core::token::new_token())),
            connect_timeout: Some(Duration::from_millis(500)),
            ..Default::default()
        })
        .await
        .unwrap();
        let held = c.acquire_lock("kept", AcquireOptions::default()).await.unwrap();
        assert!(held.acquired);

        pg_ctl(&["-m", "immediate", "stop"]);
        for _ in 0..3 {
            let t = Instant::now();
            let e = c.get_lock("kept").await.unwrap_err();
            assert_eq!(e.code, ErrorCode::BackendUnavailable, "{e}");
            assert!(t.elapsed() < Duration::from_secs(5), "within the connect timeout: {:?}", t.elapsed());
        }

        // Its log to a file: a server started with pg_ctl's output would hold this test's pipes.
        let log = std::path::Path::new(&env("FLOWGUARD_POSTGRES_DATA")).with_file_name("log");
        pg_ctl(&["-l", log.to_str().unwrap(), "restart"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        let info = loop {
            match c.get_lock("kept").await {
                Ok(info) => break info,
                Err(e) if Instant::now() < deadline => {
                    assert_eq!(e.code, ErrorCode::BackendUnavailable, "{e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("not back within 10 s: {e}"),
            }
        };
        assert!(info.locked, "the acknowledged acquisition survived the restart");
        assert_eq!(info.fence, held.fence);
        assert!(c.release_lock("kept", held.owner.as_deref().unwrap()).await.unwrap().released);
    });
}
