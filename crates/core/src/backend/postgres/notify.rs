//! Releases announced with `NOTIFY`, heard with `LISTEN` (see [`crate::wakeup`]).
//!
//! A release of a lock, of a semaphore permit, or of an idempotency key (and the storing of its
//! result) sends, in its transaction (so only once it commits), `pg_notify(<schema>, <payload>)`:
//! the channel is the schema's name, the payload the topic's letter, the key prefix's length, `:`,
//! the prefix and the name (`*` for a name a payload cannot hold: NUL, or past 7,000 bytes; it
//! wakes every wait). Each client (store) has one connection of its own, outside the pool, that
//! `LISTEN`s on its schema's channel: made on the first wait, kept until `close()`, made again a
//! second after it is lost. While it is down the waits poll as without it (`Wakeups::set_live`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::task::JoinHandle;
use tokio_postgres::AsyncMessage;
use tokio_postgres_rustls::MakeRustlsConnect;

use super::{Ctx, Sql};
use crate::wakeup::{Release, Subscription, Topic, Wakeups};

/// The longest payload sent (PostgreSQL takes 8,000 bytes).
const MAX_PAYLOAD: usize = 7_000;
/// The pause before the listening connection is made again.
const RECONNECT: Duration = Duration::from_secs(1);

/// The payload announcing a release of `name` in prefix `ns`.
pub(crate) fn payload(topic: Topic, ns: &str, name: &str) -> String {
    let p = format!("{}{}:{ns}{name}", topic.code(), ns.len());
    if p.len() > MAX_PAYLOAD || p.contains('\0') {
        "*".to_string()
    } else {
        p
    }
}

/// What a payload announces (none: not one of flowguard's).
pub(crate) fn parse(p: &str) -> Option<Release> {
    if p == "*" {
        return Some(Release::All);
    }
    let topic = Topic::from_code(p.chars().next()?)?;
    let (len, rest) = p[1..].split_once(':')?;
    let len: usize = len.parse().ok()?;
    let (ns, name) = (rest.get(..len)?, rest.get(len..)?);
    Some(Release::One { topic, ns: ns.to_string(), name: name.to_string() })
}

impl Ctx<'_, '_> {
    /// Announces a release of `name`, when this transaction commits.
    pub(crate) async fn notify(&self, topic: Topic, name: &str) -> Sql<()> {
        let payload = payload(topic, self.ns, name);
        self.query("SELECT pg_notify($1, $2)::text", &[&self.schema, &payload]).await?;
        Ok(())
    }
}

/// The listening connection of one client, started on its first wait.
pub(crate) struct Listener {
    wakeups: Arc<Wakeups>,
    config: tokio_postgres::Config,
    tls: MakeRustlsConnect,
    channel: String,
    task: Mutex<Option<JoinHandle<()>>>,
    closed: std::sync::atomic::AtomicBool,
}

impl Listener {
    pub(crate) fn new(config: tokio_postgres::Config, tls: MakeRustlsConnect, schema: &str) -> Listener {
        Listener {
            wakeups: Arc::default(),
            config,
            tls,
            channel: schema.to_string(),
            task: Mutex::new(None),
            closed: Default::default(),
        }
    }

    /// A subscription to the releases of `name`; starts the listening connection when it is not
    /// (none until it listens).
    pub(crate) fn subscribe(&self, topic: Topic, ns: &str, name: &str) -> Option<Subscription> {
        self.start();
        self.wakeups.subscribe(topic, ns, name)
    }

    fn start(&self) {
        if self.closed.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let mut task = crate::backend::guard(&self.task);
        if task.is_some() {
            return;
        }
        let Ok(rt) = tokio::runtime::Handle::try_current() else { return };
        let (config, tls, channel, wakeups) =
            (self.config.clone(), self.tls.clone(), self.channel.clone(), self.wakeups.clone());
        *task = Some(rt.spawn(async move {
            loop {
                listen(&config, &tls, &channel, &wakeups).await;
                wakeups.set_live(false);
                tokio::time::sleep(RECONNECT).await;
            }
        }));
    }

    /// Closes the listening connection for good.
    pub(crate) fn stop(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = crate::backend::guard(&self.task).take() {
            t.abort();
        }
        self.wakeups.set_live(false);
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Connects, `LISTEN`s, and passes what is heard on, until the connection ends.
async fn listen(config: &tokio_postgres::Config, tls: &MakeRustlsConnect, channel: &str, wakeups: &Wakeups) {
    let Ok((client, mut connection)) = config.connect(tls.clone()).await else { return };
    let heard = async {
        while let Some(Ok(m)) = std::future::poll_fn(|cx| connection.poll_message(cx)).await {
            if let AsyncMessage::Notification(n) = m {
                if let Some(r) = parse(n.payload()) {
                    wakeups.announce(r);
                }
            }
        }
    };
    tokio::pin!(heard);
    // The channel is the schema, a checked identifier.
    let statement = format!("LISTEN \"{channel}\"");
    let subscribe = client.batch_execute(&statement);
    tokio::select! {
        r = subscribe => {
            if r.is_ok() {
                wakeups.set_live(true);
                heard.await;
            }
        }
        () = &mut heard => {}
    }
    drop(client);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn payloads_name_the_topic_the_prefix_and_the_name() {
        let p = payload(Topic::Permit, "fg:", "a:b");
        assert_eq!(p, "s3:fg:a:b");
        assert_eq!(
            parse(&p),
            Some(Release::One { topic: Topic::Permit, ns: "fg:".into(), name: "a:b".into() })
        );
        assert_eq!(payload(Topic::Lock, "fg:", "a\0b"), "*");
        assert_eq!(payload(Topic::Key, "fg:", &"x".repeat(8000)), "*");
        assert_eq!(parse("*"), Some(Release::All));
        for other in ["", "x3:fg:a", "l9:fg:", "lz:fg:a"] {
            assert_eq!(parse(other), None, "{other}");
        }
    }
}
