// Types of the package entry: the generated binding plus the JavaScript helpers of index.js.
import type { LockOptions, LockResult } from './binding'

export * from './binding'

export type WithLockResult<T> =
  | { acquired: true; value: T; lock: LockResult; released: boolean }
  | { acquired: false; lock: LockResult }

declare module './binding' {
  interface Flowguard {
    /**
     * Runs `fn(signal, lock)` while holding lock `name`: extends the lease every `timeoutMs / 3`
     * while it runs and releases it afterwards, also when `fn` throws. When the lock is held by
     * someone else (after `waitMs`), resolves to `{ acquired: false, lock }` without calling `fn`.
     * `signal` aborts with an `ERR_LOCK_LOST` error if the lease could not be kept.
     */
    withLock<T>(name: string, fn: (signal: AbortSignal, lock: LockResult) => T | Promise<T>, options?: LockOptions): Promise<WithLockResult<T>>
  }
}
