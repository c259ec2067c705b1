//! The store's clock: wall time (ms since the epoch) shared by the processes that use a file,
//! that never runs backwards by more than a bound, and that one process with a wrong clock
//! cannot move for the others.
//!
//! The file keeps the last time a write handed out (`meta.clock`), with the host's boot clock
//! (`CLOCK_BOOTTIME`: time since boot, suspend included, never stepped by NTP or by hand) when it
//! was written and which boot that was. So a process can tell what the file's time is now: the
//! time written plus the boot clock's time since, its *reference*. A process's own clock is
//! compared with it:
//!
//! - Within [`MAX_SKEW_MS`] of it (the usual case: the processes of a host read one clock), the
//!   time is max(own clock, time last handed out): it never runs backwards, so a lease or a due
//!   time taken earlier is never in the future of a later call.
//! - Further from it, ahead or behind, while another process whose clock agreed with the file
//!   wrote within [`LIVE_MS`]: this process's clock is the wrong one. Its calls are refused with
//!   `ERR_CLOCK_SKEW` (nothing written), so it cannot take every rate-limiter token or put leases
//!   and locks an hour ahead, nor wait silently behind the file's time.
//! - Further from it while no such process is live (another boot, an older file, or every
//!   process's clock stepped together): this process's clock is taken and the file's time
//!   follows it, back (a lease taken at the later time ends that much later, never early), or
//!   ahead when this clock agrees with the host's (the kernel's wall clock) within the bound: a
//!   clock ahead of its host's is refused with `ERR_CLOCK_SKEW` (leases taken in the file would
//!   end early). A process's clock is the wall clock when it started plus the monotonic time
//!   since (`now_ms`): one started before the host's clock was set back stays ahead of it.
//!
//! The boot and wall clocks of the host are read from the kernel by its system call, not
//! through the C library's time functions that a preloaded library (`faketime`) may replace for
//! one process: they are the referees between the processes' clocks. Where there is no boot clock (not Linux), the time is
//! max(own clock, time last handed out), as without the check.
//!
//! The stored values are remembered between transactions (see `remembered`), so they are read
//! again only after a commit by someone else.

use rusqlite::{params, Connection};

use super::remembered::Remembered;
use super::{checked_scan, Fail, Sql};
use crate::backend::embedded::now_ms;

/// How far a process's clock may be from the file's time before it is judged wrong.
pub(crate) const MAX_SKEW_MS: i64 = 1_000;
/// How long after its last write a process whose clock agreed with the file counts as live.
pub(crate) const LIVE_MS: i64 = 10_000;
/// How often a process writing the file marks itself live (its row `w:<boot>:<token>`).
const MARK_MS: i64 = 1_000;

/// The file's clock as stored: the last time handed out, and (when written on a host with a
/// boot clock) the boot and the boot clock's reading then.
#[derive(Clone, Copy)]
struct Stored {
    time: i64,
    boot: Option<(i64, i64)>,
}

/// The host's boot: an id, the boot clock now (ms), and the host's wall clock now as the kernel
/// keeps it (ms since the epoch).
#[derive(Clone, Copy, PartialEq)]
struct Boot {
    id: i64,
    ms: i64,
    host: Option<i64>,
}

/// The kernel's clock `id` in ms, read by the system call (see the module's comment).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn kernel_ms(id: libc::clockid_t) -> Option<i64> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime(2) with a clock id and a pointer to a timespec it fills.
    let rc = unsafe { libc::syscall(libc::SYS_clock_gettime, id, &mut ts as *mut libc::timespec) };
    (rc == 0).then_some(ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000)
}

#[cfg(target_os = "linux")]
fn boot() -> Option<Boot> {
    static ID: std::sync::OnceLock<Option<i64>> = std::sync::OnceLock::new();
    let id = (*ID.get_or_init(|| {
        let s = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        let hex: String = s.chars().filter(char::is_ascii_hexdigit).take(15).collect();
        i64::from_str_radix(&hex, 16).ok()
    }))?;
    let ms = kernel_ms(libc::CLOCK_BOOTTIME)?;
    Some(Boot { id, ms, host: kernel_ms(libc::CLOCK_REALTIME) })
}

#[cfg(not(target_os = "linux"))]
fn boot() -> Option<Boot> {
    None
}

/// The stored clock. The boot and boot clock reading hold for the time they were written with
/// (`clock_for`): a flowguard without them (an older one on the same file) moves `clock` alone.
fn stored(c: &Connection) -> rusqlite::Result<Stored> {
    let mut st = c.prepare_cached(
        "SELECT k, v FROM meta WHERE k IN ('clock', 'clock_boot', 'clock_at', 'clock_for')",
    )?;
    let mut rows = st.query([])?;
    let (mut time, mut id, mut at, mut of) = (0, None, None, None);
    while let Some(r) = rows.next()? {
        let v = Some(r.get(1)?);
        match r.get_ref(0)?.as_str().map_err(rusqlite::Error::from)? {
            "clock" => time = r.get(1)?,
            "clock_boot" => id = v,
            "clock_at" => at = v,
            _ => of = v,
        }
    }
    Ok(Stored { time, boot: id.zip(at).filter(|_| of == Some(time)) })
}

/// The clock of one connection: the remembered stored values, and this process's mark.
pub(super) struct Clock {
    stored: Remembered<Stored>,
    /// This process's row among the writers' marks (see [`LIVE_MS`]).
    mark: String,
    /// The boot clock when this process last wrote its mark.
    marked: Option<Boot>,
}

impl Default for Clock {
    fn default() -> Self {
        Clock { stored: Remembered::default(), mark: format!("{:016x}", rand::random::<u64>()), marked: None }
    }
}

/// What a process's clock says against the file's.
enum Judged {
    /// The time to use.
    Now(i64),
    /// Off by this much (ms, positive: ahead) from the file's time now: wrong when another
    /// process that agreed with the file is live.
    Off(i64),
}

fn judge(own: i64, s: Stored, boot: Option<Boot>) -> Judged {
    let reference = match (s.boot, boot) {
        (Some((id, at)), Some(b)) if id == b.id && b.ms >= at => s.time + (b.ms - at),
        // Another boot, or an older file: the time since is unknown.
        (_, Some(_)) => s.time,
        // No boot clock here: never judged.
        (_, None) => return Judged::Now(own.max(s.time)),
    };
    let off = own - reference;
    if off.abs() <= MAX_SKEW_MS {
        Judged::Now(own.max(s.time))
    } else {
        Judged::Off(off)
    }
}

impl Clock {
    /// Whether a process other than this one, whose clock agreed with the file, wrote within
    /// [`LIVE_MS`] of the boot clock `b`.
    fn other_live(&self, c: &Connection, b: Boot) -> Sql<bool> {
        // The marks of this boot, read with only their start in the SQL (a count over the range
        // in SQL stops short at a damaged record, see `checked_scan`).
        let (from, to, own) = (format!("w:{:015x}:", b.id), format!("w:{:015x};", b.id), self.own(b));
        let mut st = c.prepare_cached("SELECT k, v FROM meta WHERE k > ?1 ORDER BY k")?;
        let mut live = false;
        checked_scan::scan(
            st.query([&from])?,
            |r| r.get::<_, String>(0),
            |k| k.as_str() < to.as_str(),
            || "the clock's marks".to_string(),
            |k, r| {
                live = *k != own && r.get::<_, i64>(1)? >= b.ms - LIVE_MS;
                Ok(!live)
            },
        )?;
        Ok(live)
    }

    fn own(&self, b: Boot) -> String {
        format!("w:{:015x}:{}", b.id, self.mark)
    }

    /// The time now by the rules of the module's comment, and the boot clock read for it.
    fn decide(&mut self, c: &Connection) -> Sql<(i64, Option<Boot>)> {
        self.decide_at(c, now_ms(), boot())
    }

    /// [`Clock::decide`] with this process's clock reading `own` and the boot clock `boot`.
    fn decide_at(&mut self, c: &Connection, own: i64, boot: Option<Boot>) -> Sql<(i64, Option<Boot>)> {
        let s = self.stored.get(c, stored)?;
        match judge(own, s, boot) {
            Judged::Now(now) => Ok((now, boot)),
            Judged::Off(off) => match boot {
                Some(b) if self.other_live(c, b)? => Err(Fail::ClockSkew(off)),
                // Nobody live disagrees. Moving the file's time ahead would end the leases taken
                // in it early: only a clock that agrees with the host's (the kernel's) may.
                Some(Boot { host: Some(host), .. }) if off > 0 && own - host > MAX_SKEW_MS => {
                    Err(Fail::HostClockSkew(own - host))
                }
                // This clock is taken.
                _ => Ok((own, boot)),
            },
        }
    }

    /// The time now, without moving the stored clock (inside a read transaction).
    pub(super) fn now(&mut self, c: &Connection) -> Sql<i64> {
        Ok(self.decide(c)?.0)
    }

    /// The time now, stored as the last time handed out with the boot clock's reading, and this
    /// process marked live (inside a write transaction).
    pub(super) fn advance(&mut self, c: &Connection) -> Sql<i64> {
        let (own, boot) = (now_ms(), boot());
        self.advance_at(c, own, boot)
    }

    /// [`Clock::advance`] with this process's clock reading `own` and the boot clock `boot`.
    fn advance_at(&mut self, c: &Connection, own: i64, boot: Option<Boot>) -> Sql<i64> {
        let (now, boot) = self.decide_at(c, own, boot)?;
        let last = self.stored.get(c, stored)?;
        let at = boot.map(|b| (b.id, b.ms));
        if now != last.time || (at.is_some() && last.boot.is_none()) {
            match at {
                // The same boot as stored (the usual case): its id stays, the time and the boot
                // clock's reading move together.
                Some((id, ms)) if last.boot.is_some_and(|(was, _)| was == id) => c
                    .prepare_cached(
                        "INSERT INTO meta VALUES ('clock', ?1), ('clock_at', ?2), ('clock_for', ?1)
                         ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                    )?
                    .execute(params![now, ms])?,
                Some((id, ms)) => c
                    .prepare_cached(
                        "INSERT INTO meta VALUES ('clock', ?1), ('clock_boot', ?2), ('clock_at', ?3), ('clock_for', ?1)
                         ON CONFLICT (k) DO UPDATE SET v = excluded.v",
                    )?
                    .execute(params![now, id, ms])?,
                None => c.prepare_cached("UPDATE meta SET v = ?1 WHERE k = 'clock'")?.execute([now])?,
            };
            self.stored.set(Stored { time: now, boot: at });
        }
        if let Some(b) = boot {
            if self.marked.is_none_or(|m| m.id != b.id || b.ms - m.ms >= MARK_MS) {
                self.mark_live(c, b)?;
            }
        }
        Ok(now)
    }

    /// Writes this process's mark, and forgets the marks of processes no longer live.
    fn mark_live(&mut self, c: &Connection, b: Boot) -> rusqlite::Result<()> {
        let own = self.own(b);
        c.prepare_cached("INSERT INTO meta VALUES (?1, ?2) ON CONFLICT (k) DO UPDATE SET v = excluded.v")?
            .execute(params![own, b.ms])?;
        let this_boot = format!("w:{:015x}:", b.id);
        c.prepare_cached(
            "DELETE FROM meta WHERE k > 'w:' AND k < 'w;' AND (substr(k, 1, length(?1)) <> ?1 OR v < ?2)",
        )?
        .execute(params![this_boot, b.ms - LIVE_MS])?;
        self.marked = Some(b);
        Ok(())
    }

    /// After a transaction: remembers the stored values when it committed (`ok`), else forgets
    /// them (and the mark, which was rolled back).
    pub(super) fn settle(&mut self, c: &Connection, ok: bool) {
        self.stored.settle(c, ok);
        if !ok {
            self.marked = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: i64 = 1_800_000_000_000;
    const HOUR: i64 = 3_600_000;
    /// A boot clock reading of boot 7 at `ms`.
    fn at(ms: i64) -> Option<Boot> {
        Some(Boot { id: 7, ms, host: None })
    }

    /// A process on a file: its connection and its clock.
    struct Process {
        c: Connection,
        clock: Clock,
    }

    impl Process {
        fn on(path: &std::path::Path) -> Process {
            Process { c: super::super::schema::open(path).unwrap(), clock: Clock::default() }
        }

        /// One write transaction with this process's clock at `own` and the boot clock at
        /// `boot`: the time it got, or how far off its clock was judged.
        fn write(&mut self, own: i64, boot: Option<Boot>) -> std::result::Result<i64, i64> {
            self.c.execute_batch("BEGIN IMMEDIATE").unwrap();
            let out = self.clock.advance_at(&self.c, own, boot);
            self.c.execute_batch(if out.is_ok() { "COMMIT" } else { "ROLLBACK" }).unwrap();
            self.clock.settle(&self.c, out.is_ok());
            match out {
                Ok(t) => Ok(t),
                Err(Fail::ClockSkew(off) | Fail::HostClockSkew(off)) => Err(off),
                Err(_) => panic!("the write failed"),
            }
        }

        fn stored_time(&self) -> i64 {
            stored(&self.c).unwrap().time
        }
    }

    fn file() -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("fg-clock-{}-{}", std::process::id(), rand::random::<u32>()));
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("c.db")
    }

    /// A process whose clock is an hour ahead of (or behind) a file another process writes is
    /// refused, by how much, and moves nothing: the other's time goes on.
    #[test]
    fn a_clock_far_from_a_live_file_is_refused_and_moves_nothing() {
        let path = file();
        let (mut a, mut fast, mut slow) = (Process::on(&path), Process::on(&path), Process::on(&path));
        assert_eq!(a.write(T0, at(1_000_000)), Ok(T0), "the first write of a new file takes its clock");
        let off = fast.write(T0 + HOUR + 100, at(1_000_100)).unwrap_err();
        assert_eq!(off, HOUR, "refused: an hour ahead");
        let off = slow.write(T0 - HOUR + 200, at(1_000_200)).unwrap_err();
        assert_eq!(off, -HOUR, "refused: an hour behind");
        assert_eq!(a.stored_time(), T0, "neither moved the file's time");
        assert_eq!(a.write(T0 + 1_000, at(1_001_000)), Ok(T0 + 1_000), "the file's time goes on");
        // Within the bound: accepted, and the time never runs back.
        assert_eq!(slow.write(T0 + 1_000 - 600, at(1_001_100)), Ok(T0 + 1_000));
        assert_eq!(fast.write(T0 + 1_100 + 900, at(1_001_100)), Ok(T0 + 2_000));
    }

    /// A file left alone for days (or since another boot) is not skew: the boot clock says that
    /// much time went by, or nobody wrote in this boot.
    #[test]
    fn an_idle_file_takes_the_clock_of_its_next_writer() {
        let path = file();
        let (mut a, mut b) = (Process::on(&path), Process::on(&path));
        assert_eq!(a.write(T0, at(1_000_000)), Ok(T0));
        let days = 3 * 24 * HOUR;
        assert_eq!(b.write(T0 + days, at(1_000_000 + days)), Ok(T0 + days));
        let rebooted = Some(Boot { id: 8, ms: 5_000, host: None });
        assert_eq!(a.write(T0 + 2 * days, rebooted), Ok(T0 + 2 * days), "another boot: nobody live");
    }

    /// A process with a fast clock that wrote alone moves the file ahead; once it is gone, the
    /// others take their clocks back instead of waiting an hour. While it is live, they are
    /// refused (not left waiting silently).
    #[test]
    fn after_a_fast_process_stops_the_others_are_not_frozen() {
        let path = file();
        let (mut a, mut fast) = (Process::on(&path), Process::on(&path));
        assert_eq!(a.write(T0, at(1_000_000)), Ok(T0));
        // `a` wrote 20 s ago (by the boot clock): not live; the fast clock is taken.
        let ahead = T0 + 20_000 + HOUR;
        assert_eq!(fast.write(ahead, at(1_020_000)), Ok(ahead));
        assert_eq!(a.write(T0 + 25_000, at(1_025_000)), Err(-HOUR), "the fast process is live");
        // 11 s after the fast process's last write it is no longer live.
        assert_eq!(a.write(T0 + 31_000, at(1_031_000)), Ok(T0 + 31_000), "back to this clock");
        assert_eq!(a.write(T0 + 32_000, at(1_032_000)), Ok(T0 + 32_000), "and its time runs");
        assert_eq!(fast.write(ahead + 13_000, at(1_033_000)), Err(HOUR), "now the fast one is refused");
    }

    /// A flowguard without the boot clock on the same file moves `clock` alone: the boot clock
    /// reading written before is not applied to that time (it would put the file's time ahead).
    #[test]
    fn a_time_written_without_the_boot_clock_is_not_carried_forward_by_an_older_reading() {
        let path = file();
        let (mut a, mut b) = (Process::on(&path), Process::on(&path));
        assert_eq!(a.write(T0, at(1_000_000)), Ok(T0));
        assert_eq!(b.write(T0 + 5_000, at(1_005_000)), Ok(T0 + 5_000), "`b` is live");
        // 3 s later an older flowguard writes the time then, T0 + 8 s.
        a.c.execute("UPDATE meta SET v = ?1 WHERE k = 'clock'", [T0 + 8_000]).unwrap();
        // Carried forward from `b`'s reading, the file's time 1 s later would be T0 + 12 s, and
        // a clock at T0 + 9 s 3 s behind it.
        assert_eq!(a.write(T0 + 9_000, at(1_009_000)), Ok(T0 + 9_000));
    }

    /// A process alone on a file, whose clock is ahead of its host's, cannot move the file's
    /// time ahead (another's lease taken in it would end early); behind it, or agreeing with
    /// the host, it can.
    #[test]
    fn a_clock_ahead_of_its_host_cannot_move_an_unwatched_file_ahead() {
        let path = file();
        let (mut a, mut fast) = (Process::on(&path), Process::on(&path));
        assert_eq!(a.write(T0, at(1_000_000)), Ok(T0));
        let host = |ms: i64, wall: i64| Some(Boot { id: 7, ms, host: Some(wall) });
        // 20 s later (nobody live), a clock an hour ahead of the host's.
        assert_eq!(fast.write(T0 + 20_000 + HOUR, host(1_020_000, T0 + 20_000)), Err(HOUR));
        assert_eq!(fast.stored_time(), T0);
        // On a new file, too.
        let mut alone = Process::on(&file());
        assert_eq!(alone.write(T0 + HOUR, host(1_000_000, T0)), Err(HOUR));
        // A clock that agrees with its host moves a file written by a fast one back to it.
        let mut b = Process::on(&path);
        b.c.execute("UPDATE meta SET v = ?1 WHERE k IN ('clock', 'clock_for')", [T0 + 2 * HOUR]).unwrap();
        assert_eq!(b.write(T0 + 30_000, host(1_030_000, T0 + 30_000)), Ok(T0 + 30_000));
    }

    /// Without a boot clock (not Linux) the time is max(own clock, time last handed out).
    #[test]
    fn without_a_boot_clock_the_time_never_runs_back() {
        let path = file();
        let (mut a, mut b) = (Process::on(&path), Process::on(&path));
        assert_eq!(a.write(T0 + HOUR, None), Ok(T0 + HOUR));
        assert_eq!(b.write(T0, None), Ok(T0 + HOUR));
    }
}
