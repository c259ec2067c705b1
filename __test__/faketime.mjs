// libfaketime, preloaded into one child process: its wall clock (CLOCK_REALTIME) is moved by an
// offset, its monotonic clock is left alone. Preloaded directly, not through Debian's `faketime`
// wrapper: the wrapper creates a POSIX semaphore and shared memory named after its own PID
// (/dev/shm/sem.faketime_sem_<pid>) and does not always remove them, so a later wrapper that is
// given the same PID fails with "sem_open: File exists". The library alone creates neither.
import { existsSync } from 'node:fs'

/** The thread-safe build of the library (Node runs several threads). */
export const FAKETIME_LIB = '/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1'

/** The environment that runs a child with its wall clock `offset` off (libfaketime's format:
 * '+2' is two seconds ahead, '-1h' an hour behind). */
export const faketimeEnv = (offset) => ({ LD_PRELOAD: FAKETIME_LIB, FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: '1' })

/** A skip reason when the library is not installed, else false. */
export const noFaketime = !existsSync(FAKETIME_LIB) && 'needs faketime (Debian package faketime)'
