//! How the tests wait: for a condition, bounded, never for a fixed time.
//!
//! A test that sleeps "long enough" for something to happen passes on a quiet machine and
//! fails on a loaded one (a fresh machine runs the suite beside three forge builds), and one
//! that checks something is absent after a sleep passes whether or not it happened. So the
//! tests of this workspace wait for the thing itself — what the fake forge recorded, what the
//! server counts in `/metrics`, a line of its log, a process's exit — asking again until it
//! holds, and give up only after a bound far beyond what any machine needs; and they prove an
//! absence only after a positive sign that comes after it. Where time passing is itself what a
//! test does (a lifetime that must run out), it says so with [`let_time_pass`]; a tidy rule of
//! the server crate keeps every other sleep out of the tests.

use std::time::{Duration, Instant};

/// How long a test waits, at most, for something the server, the fake forge or a helper
/// process will do: long enough for a 2-core machine that builds three forges and runs
/// `stress-ng` beside the suite, so that only what never happens runs into it. A bound on the
/// waiting, never on the behaviour: how fast something happens is measured in a benchmark,
/// and a test of a server's own timer asserts the timer's lower bound.
pub const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// How soon [`wait_until`] asks again at first, and at most: a condition met at once is seen
/// at once, a long wait (a lease running out) asks a few times a second.
const POLL: (Duration, Duration) = (Duration::from_millis(10), Duration::from_millis(250));

/// Waits until `condition` gives a value, asking it again at growing intervals (10 ms, up to
/// 250 ms), and returns that value; panics with `what` (the condition, said as what should
/// have happened) after `limit`.
pub async fn wait_until<T>(what: &str, limit: Duration, mut condition: impl AsyncFnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    let mut poll = POLL.0;
    loop {
        if let Some(v) = condition().await {
            return v;
        }
        assert!(Instant::now() < deadline, "waited {limit:?} for this, which did not happen: {what}");
        tokio::time::sleep(poll).await;
        poll = (poll * 3 / 2).min(POLL.1);
    }
}

/// [`wait_until`] for a condition that is true or false.
pub async fn wait_for(what: &str, limit: Duration, mut condition: impl AsyncFnMut() -> bool) {
    wait_until(what, limit, async || condition().await.then_some(())).await
}

/// Lets `time` pass where time itself is what the test does to the server — a lifetime or a
/// timeout of the server's that must run out — never to give something a moment (that is
/// [`wait_until`]). Each use is listed, with its reason, in the tidy rule that keeps bare
/// sleeps out of the tests; `why` says it at the call.
pub async fn let_time_pass(time: Duration, why: &str) {
    let _ = why;
    tokio::time::sleep(time).await;
}
