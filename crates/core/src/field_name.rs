//! The one renderer of the core's field names in the public API's terms, which the Node API and
//! the server's JSON bodies share: camelCase, and a duration's unit in its name (`timeout` is
//! `timeoutMs`). Errors name their field with it ([`crate::error::FieldPath::render`]).

use std::borrow::Cow;

/// A field name of the core (Rust, snake_case, durations without their unit) as the Node API's
/// options and the server's request bodies name it. A name already in those terms is kept.
pub fn public(rust: &str) -> Cow<'_, str> {
    Cow::Borrowed(match rust {
        "timeout" => "timeoutMs",
        "keep" => "keepMs",
        "wait" => "waitMs",
        "lease" => "leaseMs",
        "ttl" => "ttlMs",
        "delay" => "delayMs",
        "visibility_timeout" => "visibilityTimeoutMs",
        "connect_timeout" => "connectTimeoutMs",
        "command_timeout" => "commandTimeoutMs",
        "retention" => "retentionMs",
        "period" => "periodMs",
        "max_wait" => "maxWaitMs",
        "max_delay" => "maxDelayMs",
        other if other.contains('_') => return Cow::Owned(camel(other)),
        other => other,
    })
}

/// snake_case as camelCase.
fn camel(snake: &str) -> String {
    let mut out = String::with_capacity(snake.len());
    let mut up = false;
    for c in snake.chars() {
        if c == '_' {
            up = true;
        } else if up {
            out.extend(c.to_uppercase());
            up = false;
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::public;

    #[test]
    fn names_in_the_public_terms() {
        assert_eq!(public("timeout"), "timeoutMs");
        assert_eq!(public("visibility_timeout"), "visibilityTimeoutMs");
        assert_eq!(public("max_delay"), "maxDelayMs");
        assert_eq!(public("reclaim_completed"), "reclaimCompleted");
        assert_eq!(public("expires_at"), "expiresAt");
        assert_eq!(public("until_ms"), "untilMs");
        assert_eq!(public("retry_after"), "retryAfter");
        assert_eq!(public("group"), "group");
        assert_eq!(public("timeoutMs"), "timeoutMs");
    }
}
