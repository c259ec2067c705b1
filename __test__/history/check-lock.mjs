// Checker of the Concurrency Lock: the semaphore's rules with one permit (check-semaphore.mjs),
// and a release or extend by a holder that a newer grant has replaced is never ok.
import { checkSemaphore } from './check-semaphore.mjs'

export const checkLock = (history) => checkSemaphore(history, { p: 'lock', permits: 1, staleOnNewerGrant: true })
