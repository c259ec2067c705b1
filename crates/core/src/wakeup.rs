//! Waits woken by the backend's announcements of releases.
//!
//! A wait (a lock's or a semaphore permit's `wait`, a wait for an idempotency key) tries, and when
//! it did not get what it wanted, pauses and tries again (`lock::retry`). A backend that can
//! announce releases (PostgreSQL: `LISTEN`/`NOTIFY`) gives each such wait a [`Subscription`],
//! taken before each try, so that a release committed after the try wakes it at once; its pauses
//! are then longer ([`FALLBACK_POLL_MS`]): the poll is left as the fallback for what is not
//! announced (a lease that runs out is not: the pause never lasts past the holder's lease end),
//! and for announcements lost while the backend's listener is down (it then says so, every
//! subscription wakes, and the waits poll as without announcements until it is back).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use tokio::sync::broadcast;

/// The longest pause of a wait whose subscription is live: a poll in case an announcement was
/// missed. Without a live subscription the pauses are the lock's backoff (at most 500 ms).
pub const FALLBACK_POLL_MS: u64 = 2_000;

/// What a release frees.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Topic {
    Lock,
    Permit,
    Key,
}

impl Topic {
    /// One letter per topic (the first of an announcement's text).
    pub fn code(self) -> char {
        match self {
            Topic::Lock => 'l',
            Topic::Permit => 's',
            Topic::Key => 'k',
        }
    }

    pub fn from_code(c: char) -> Option<Topic> {
        Some(match c {
            'l' => Topic::Lock,
            's' => Topic::Permit,
            'k' => Topic::Key,
            _ => return None,
        })
    }
}

/// An announcement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Release {
    /// `name` of `topic` in key prefix `ns` was released (or its result stored).
    One { topic: Topic, ns: String, name: String },
    /// Announcements may have been lost (the listener's connection ended): every wait tries again.
    All,
}

/// The announcements of one backend to its waits, and whether they are being received (live).
pub struct Wakeups {
    tx: broadcast::Sender<Arc<Release>>,
    live: AtomicBool,
    /// Announcements received (for tests and metrics).
    received: AtomicU64,
}

impl Default for Wakeups {
    fn default() -> Self {
        Wakeups { tx: broadcast::channel(1024).0, live: AtomicBool::new(false), received: AtomicU64::new(0) }
    }
}

impl Wakeups {
    /// Passes an announcement on to the subscriptions.
    pub fn announce(&self, r: Release) {
        self.received.fetch_add(1, Ordering::Relaxed);
        // No subscription: nobody waits.
        let _ = self.tx.send(Arc::new(r));
    }

    /// Whether announcements are being received. Going down wakes every wait (what was announced
    /// meanwhile is lost), which then polls until it is up again.
    pub fn set_live(&self, live: bool) {
        let was = self.live.swap(live, Ordering::SeqCst);
        if was && !live {
            let _ = self.tx.send(Arc::new(Release::All));
        }
    }

    pub fn is_live(&self) -> bool {
        self.live.load(Ordering::SeqCst)
    }

    /// How many announcements were received.
    pub fn received(&self) -> u64 {
        self.received.load(Ordering::Relaxed)
    }

    /// A subscription to the releases of `name`, or none while announcements are not received.
    pub fn subscribe(self: &Arc<Self>, topic: Topic, ns: &str, name: &str) -> Option<Subscription> {
        // Subscribed before the liveness is read: an announcement after a live read reaches it.
        let rx = self.tx.subscribe();
        self.is_live().then(|| Subscription {
            rx,
            wakeups: self.clone(),
            topic,
            ns: ns.to_string(),
            name: name.to_string(),
        })
    }
}

/// A wait's interest in the releases of one name.
pub struct Subscription {
    rx: broadcast::Receiver<Arc<Release>>,
    wakeups: Arc<Wakeups>,
    topic: Topic,
    ns: String,
    name: String,
}

impl Subscription {
    /// Whether announcements are still being received.
    pub fn live(&self) -> bool {
        self.wakeups.is_live()
    }

    /// Resolves once a release of the name was announced since the subscription was taken or
    /// this last resolved, or once announcements may have been missed.
    pub async fn released(&mut self) {
        loop {
            match self.rx.recv().await {
                Ok(r) => match &*r {
                    Release::All => return,
                    Release::One { topic, ns, name }
                        if *topic == self.topic && *ns == self.ns && *name == self.name =>
                    {
                        return
                    }
                    Release::One { .. } => {}
                },
                Err(broadcast::error::RecvError::Lagged(_)) => return,
                // The backend is gone: nothing will be announced, the pause decides.
                Err(broadcast::error::RecvError::Closed) => std::future::pending::<()>().await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_subscription_wakes_for_its_name_only_and_when_announcements_are_lost() {
        let w = Arc::new(Wakeups::default());
        assert!(w.subscribe(Topic::Lock, "fg:", "a").is_none(), "not live: no subscription");
        w.set_live(true);
        let mut s = w.subscribe(Topic::Lock, "fg:", "a").unwrap();
        w.announce(Release::One { topic: Topic::Permit, ns: "fg:".into(), name: "a".into() });
        w.announce(Release::One { topic: Topic::Lock, ns: "x:".into(), name: "a".into() });
        w.announce(Release::One { topic: Topic::Lock, ns: "fg:".into(), name: "b".into() });
        let now = futures_util::FutureExt::now_or_never(s.released());
        assert!(now.is_none(), "other topics, prefixes and names do not wake it");
        w.announce(Release::One { topic: Topic::Lock, ns: "fg:".into(), name: "a".into() });
        s.released().await;
        w.set_live(false);
        assert!(!s.live());
        s.released().await;
        assert_eq!(w.received(), 4);
    }
}
