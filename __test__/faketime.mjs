// libfaketime, preloaded into one child process: its wall clock (CLOCK_REALTIME) is moved by an
// offset, its monotonic clock is left alone. Preloaded directly, not through Debian's `faketime`
// wrapper: the wrapper creates a POSIX semaphore and shared memory named after its own PID
// (/dev/shm/sem.faketime_sem_<pid>) and fails with "sem_open: File exists" when an earlier process
// of the same PID left them (CI saw it). The preloaded library makes the same pair for each
// process but runs when they are there already (checked with a planted pair).
import { existsSync, rmSync } from 'node:fs'
import { join } from 'node:path'

/** The thread-safe build of the library (Node runs several threads). */
export const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/** The environment that runs a child with its wall clock `offset` off (libfaketime's format:
 * '+2' is two seconds ahead, '-1h' an hour behind). */
export const faketimeEnv = (offset) => ({ LD_PRELOAD: FAKETIME_LIB, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1' })

/** A skip reason when the library is not installed, else false. */
export const noFaketime = !existsSync(FAKETIME_LIB) && 'needs faketime (Debian package faketime)'

/** libfaketime gives each process it runs in a shared-memory segment and a semaphore named after
 * its PID (/dev/shm/faketime_shm_<pid>, /dev/shm/sem.faketime_sem_<pid>) and removes them when the
 * process exits, which a SIGKILL skips: a test that kills such a process removes them. */
export function forgetKilled(pid) {
  for (const name of [`faketime_shm_${pid}`, `sem.faketime_sem_${pid}`]) rmSync(join('/dev/shm', name), { force: true })
}
