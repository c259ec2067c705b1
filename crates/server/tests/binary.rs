//! The binary as an operator runs it: flags and environment, JSON logs without the token, and a
//! graceful stop on SIGTERM.
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Duration;

const TOKEN: &str = "binary-test-token-0123456789";

/// Starts the binary on a free loopback port with `args` and `envs`, and reads its first log line
/// (JSON): the child, the rest of its output, that line as text and as JSON.
fn start(
    args: &[&str],
    envs: &[(&str, &str)],
) -> (std::process::Child, BufReader<std::process::ChildStdout>, String, serde_json::Value) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_flowguard-server"))
        .args(["--listen", "127.0.0.1:0"])
        .args(args)
        // A FLOWGUARD_POSTGRES_URL in the caller's environment would turn this server to PostgreSQL.
        .env_remove("FLOWGUARD_POSTGRES_URL")
        .envs(envs.iter().copied())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    out.read_line(&mut first).unwrap();
    let line = serde_json::from_str(&first).unwrap_or_else(|_| panic!("a JSON log line: {first}"));
    (child, out, first, line)
}

#[tokio::test]
async fn sigterm_stops_the_binary_cleanly_and_logs_never_hold_the_token() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let prefix = format!("bin{}:", std::process::id());
    let (mut child, mut out, first, line) =
        start(&["--prefix", &prefix], &[("FLOWGUARD_TOKEN", TOKEN), ("FLOWGUARD_LOG", "debug")]);
    assert_eq!(line["fields"]["message"], "flowguard-server listening", "{first}");
    let base = format!("http://{}", line["fields"]["listen"].as_str().unwrap());

    let http = reqwest::Client::new();
    let ok = http
        .post(format!("{base}/v1/lock/acquire"))
        .bearer_auth(TOKEN)
        .json(&serde_json::json!({"name": "L"}));
    assert_eq!(ok.send().await.unwrap().status().as_u16(), 200);
    let wrong = http.post(format!("{base}/v1/lock/get")).bearer_auth("wrong-token-0123456789abc");
    assert_eq!(wrong.json(&serde_json::json!({"name": "L"})).send().await.unwrap().status().as_u16(), 401);

    let kill = Command::new("kill").args(["-TERM", &child.id().to_string()]).status().unwrap();
    assert!(kill.success());
    let mut status = None;
    for _ in 0..100 {
        if let Some(s) = child.try_wait().unwrap() {
            status = Some(s);
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let status = status.expect("the server exits after SIGTERM");
    assert!(status.success(), "{status}");
    let mut logs = first;
    out.read_to_string(&mut logs).unwrap();
    child.stderr.take().unwrap().read_to_string(&mut logs).unwrap();
    assert!(logs.contains("shutting down") && logs.contains("\"stopped\""), "{logs}");
    assert!(logs.contains("/v1/lock/acquire"), "requests are logged at debug: {logs}");
    assert!(!logs.contains(TOKEN) && !logs.contains("wrong-token"), "a token in the logs: {logs}");
}

/// `--healthcheck` asks the running server for /healthz: exit 0 while it serves, 1 once it is gone,
/// with no shell or HTTP client in the image.
#[tokio::test]
async fn healthcheck_exits_0_while_the_server_serves_and_1_when_it_is_gone() {
    let prefix = format!("hc{}:", std::process::id());
    let (mut child, _out, _, line) = start(&["--prefix", &prefix], &[]);
    let listen = line["fields"]["listen"].as_str().unwrap().to_string();
    let check = || {
        Command::new(env!("CARGO_BIN_EXE_flowguard-server"))
            .args(["--healthcheck", "--listen", &listen])
            .output()
            .unwrap()
    };
    let healthy = check();
    assert_eq!(healthy.status.code(), Some(0), "{}", String::from_utf8_lossy(&healthy.stderr));
    child.kill().unwrap();
    child.wait().unwrap();
    let gone = check();
    assert_eq!(gone.status.code(), Some(1));
    let said = String::from_utf8_lossy(&gone.stderr);
    assert!(said.contains("unhealthy") && said.contains(&listen), "{said}");
}
