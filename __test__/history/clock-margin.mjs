// How much of a lease a checker may count on, from the client's side.
//
// A grant (acquire, claim, read) that the client invoked at time `start` and saw complete at
// `end` was decided by the backend at some moment in [start, end], and its lease runs until that
// moment + timeoutMs on the backend's clock. So, on the clients' shared monotonic clock, the lease
// is certainly live from `end` until `start + timeoutMs`, and certainly over after
// `end + timeoutMs` — up to the difference between the two clocks over one lease. That difference
// is the margin, subtracted from the sure end and added to the latest end:
// - the backends count leases in whole milliseconds (Redis PX and its TIME, the durable store's
//   ms clock), which rounds an end down by up to 1 ms each way;
// - Redis decides on its wall clock (TIME), the clients measure CLOCK_MONOTONIC; NTP slews the
//   wall clock by at most 500 ppm (0.05 %), and a step of the wall clock is not covered (no run
//   here steps it);
// - the durable store uses the later of the process's clock and the last time handed out in the
//   file (never backwards), which may be ahead of this process's clock by the scheduling delay of
//   the process that wrote it (ms, more on a loaded 2-core machine).
// 20 ms + 2 % of the lease covers these with room; it is the only tolerance the checkers have,
// and it only ever makes them accept less than the real lease would allow (fewer false alarms,
// never a missed double grant longer than the margin).
export const clockMargin = (timeoutMs) => 20 + timeoutMs * 0.02

/** The interval in which a grant is certainly live: [end, start + timeoutMs - margin]. */
export const surelyLive = (op, timeoutMs) => [op.end, op.start + timeoutMs - clockMargin(timeoutMs)]

/** The time after which a grant (or extend) is certainly over: end + timeoutMs + margin. */
export const surelyOver = (op, timeoutMs) => op.end + timeoutMs + clockMargin(timeoutMs)
