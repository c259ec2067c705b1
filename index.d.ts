// Types of the package entry: the generated binding plus the JavaScript helpers of index.js.
import type { ClaimOptions, ClaimResult, FinishOptions, ItemState, LockOptions, LockResult, StateSetOptions } from './binding'

export * from './binding'

export type WithLockResult<T> =
  | { acquired: true; value: T; lock: LockResult; released: boolean }
  | { acquired: false; lock: LockResult }

/** A value Job State can store: what JSON can represent (objects with toJSON, such as Date, too). */
export type JsonValue = string | number | boolean | null | JsonValue[] | { [key: string]: JsonValue } | { toJSON(): unknown }

export interface SetStateResult<T> {
  /** False only with `ifAbsent` when the key held a value, which was kept and is `value`. */
  written: boolean
  value: T | unknown
  /** When the value expires, in ms since the epoch (the backend's clock), if it does. */
  expiresAt?: number
}

export interface OnceOptions {
  /** How long the result is kept, in ms. Default 86400000 (24 h). */
  ttlMs?: number
  /** How long the first caller may run `fn` before another caller may take over, in ms. Default 600000. */
  leaseMs?: number
  /** How long a concurrent caller waits for the first caller's result, in ms. Default `leaseMs`. */
  waitMs?: number
}

declare module './binding' {
  interface Flowguard {
    /**
     * Atomically claims an item for `timeoutMs`. A busy or completed item is a result
     * (`claimed: false` with `reason`), not an error.
     */
    claim(group: string, id: string, options?: ClaimOptions): Promise<ClaimResult>
    /**
     * Marks an item completed and ends its lease. With `owner`, refused with `ERR_NOT_OWNER`
     * when a newer claim owns the item.
     */
    complete(group: string, id: string, options?: FinishOptions): Promise<ItemState>
    /**
     * Marks an item failed with a reason and ends its lease; it can be claimed again. With
     * `owner`, refused with `ERR_NOT_OWNER` when a newer claim owns the item.
     */
    fail(group: string, id: string, reason: string, options?: FinishOptions): Promise<ItemState>

    /**
     * Runs `fn(signal, lock)` while holding lock `name`: extends the lease every `timeoutMs / 3`
     * while it runs and releases it afterwards, also when `fn` throws. When the lock is held by
     * someone else (after `waitMs`), resolves to `{ acquired: false, lock }` without calling `fn`.
     * `signal` aborts with an `ERR_LOCK_LOST` error if the lease could not be kept.
     */
    withLock<T>(name: string, fn: (signal: AbortSignal, lock: LockResult) => T | Promise<T>, options?: LockOptions): Promise<WithLockResult<T>>

    /** The value of `key`, or undefined when it is absent or expired. */
    getState<T = unknown>(key: string): Promise<T | undefined>
    /** The values of `keys` in one round trip (undefined for each absent one). */
    getStates<T = unknown>(keys: string[]): Promise<Array<T | undefined>>
    /**
     * Writes a JSON-serializable value (at most 1 MiB of JSON), with `ttlMs` or `expiresAt`, or
     * only when absent (`ifAbsent`). Values JSON cannot represent (undefined, functions, symbols,
     * BigInt, NaN, Infinity, cycles) reject with `ERR_INVALID_ARGUMENT` and nothing is written.
     */
    setState<T>(key: string, value: T, options?: StateSetOptions): Promise<SetStateResult<T>>
    /**
     * Runs `fn` once per idempotency `key`: the first caller runs it and its result is stored for
     * `ttlMs`; concurrent callers wait for it and later ones get it without running `fn` (`ran:
     * false`). When `fn` throws, the key is freed so a retry can run, and the error is passed on.
     * The result must be JSON-serializable (undefined is kept as undefined).
     */
    once<T>(key: string, fn: () => T | Promise<T>, options?: OnceOptions): Promise<{ value: T; ran: boolean }>
  }
}
