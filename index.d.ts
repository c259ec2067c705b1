// Types of the package entry (index.js): the class `Flowguard`, which holds a native client of
// the generated binding. Its native methods and their docs come from binding.d.ts (through the
// interface below); the JavaScript helpers of lib/ are declared here.
import type {
  ClaimOptions,
  ClaimResult,
  FinishOptions,
  ItemState,
  LockOptions,
  LockResult,
  OpenOptions,
  PermitOptions,
  PermitResult,
  QueueAckOptions,
  QueueEnqueueOptions,
  QueueReadOptions,
  QueueReleaseOptions,
  StateSetOptions,
  Flowguard as NativeFlowguard,
} from './binding'

export * from './binding'

export type WithLockResult<T> =
  | { acquired: true; value: T; lock: LockResult; released: boolean }
  | { acquired: false; lock: LockResult }

export type WithPermitResult<T> =
  | { acquired: true; value: T; permit: PermitResult; released: boolean }
  | { acquired: false; permit: PermitResult }

export interface QueueEnqueued {
  id: string
  shard: number
  /**
   * `added`: new; `duplicate`: already waiting, due time kept; `debounced`: already waiting,
   * due time moved; `claimed`: held by a reader now, delivered once more after its claim ends;
   * `dead`: a dead letter, left one (not enqueued) until `requeueDead` (SQS keeps a message in its
   * dead-letter queue until it is redriven).
   */
  outcome: 'added' | 'duplicate' | 'debounced' | 'claimed' | 'dead'
  /** When the id is due, in ms since the epoch (the backend's clock); 0 for a dead letter. */
  dueAt: number
}

export interface QueueEnqueueResult {
  added: number
  duplicates: number
  debounced: number
  claimed: number
  /** Ids that are dead letters (left as they are). */
  dead: number
  /** One entry per id given, in order. */
  items: Array<QueueEnqueued>
}

export interface QueueItem {
  id: string
  shard: number
  /** When it became due, in ms since the epoch. */
  dueAt: number
}

export interface QueueBatch {
  /** The owner token (receipt) of this read: pass it to `ack` and `release`. */
  owner: string
  /** Until when the ids are held, in ms since the epoch (0 when the batch is empty). */
  visibleUntil: number
  /** The claimed ids, oldest first. */
  ids: Array<string>
  items: Array<QueueItem>
  /**
   * Present when some shards could not be read (unreachable, or no reply within the command
   * timeout; e.g. a Redis Cluster node failing over): their due ids stay due for a later read.
   * The call fails when no shard could be read.
   */
  failedShards?: Array<number>
}

export interface QueueSettled {
  id: string
  shard: number
  ok: boolean
  /**
   * Why it was not acked or released: not claimed (any more), claimed by another read, or
   * past its visibility timeout (it will be delivered again).
   */
  reason?: 'not_claimed' | 'not_owner' | 'expired'
  /** The id had been enqueued again while claimed, so it is waiting again. */
  requeued: boolean
  /** When the id is due again, if it is waiting again after this call. */
  dueAt?: number
}

export interface QueueSettleResult {
  /** How many ids were acked (or released). */
  done: number
  /** How many were refused (see each item's `reason`). */
  refused: number
  items: Array<QueueSettled>
}

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

/**
 * What every flowguard call rejects (or throws) with: an `Error` with a stable `code`
 * (`ERR_INVALID_ARGUMENT`, `ERR_BACKEND_UNAVAILABLE`, …) and, on an `ERR_INVALID_ARGUMENT` about one
 * argument, that argument's path as `field` (`options.timeoutMs`, `requests[3].id`), the start of
 * the message.
 */
export interface FlowguardError extends Error {
  code: string
  field?: string
}

/**
 * The error of `once` when `fn` ran but its result could not be stored (code
 * `ERR_RESULT_NOT_STORED`). The key is not freed: it stays claimed until its lease ends (then a
 * retry runs `fn` again), so a store failure alone never runs `fn` twice.
 */
export interface OnceResultNotStoredError<T = unknown> extends FlowguardError {
  code: 'ERR_RESULT_NOT_STORED'
  /** What `fn` returned (as JSON would give it back). */
  value: T
  /** When the key's lease ends, in ms since the epoch (this process's clock, approximately). */
  leaseExpiresAt: number
  /** The store's own error (e.g. `ERR_BACKEND_UNAVAILABLE`, `ERR_TIMEOUT`, `ERR_NOT_OWNER`). */
  cause: Error & { code?: string }
}

/** The native methods and getters of binding.d.ts, each called on the client's native one. */
export interface Flowguard extends NativeFlowguard {}

/**
 * A client of one backend. Open it once and share it; connections are pooled per URL and
 * timeouts, so opening again with the same settings reuses the connection, and a connection is
 * closed when the last client using it is closed (`close()`, or `await using`).
 */
export declare class Flowguard {
  /** `close()`, for `await using client = await Flowguard.open(…)`. */
  [Symbol.asyncDispose](): Promise<void>
  /** Not public: use `Flowguard.open`. */
  private constructor()
  /**
   * Opens a client: Redis with `options.url` (connecting now, and failing within the connect
   * timeout when it cannot be reached), a Redis Cluster with `options.cluster`, a Sentinel-managed
   * Redis with `options.sentinel` (the primary of `masterName` resolved through the sentinels now,
   * and again after a failover), a PostgreSQL database with `options.postgres` (its schema created
   * or checked now; every pattern, see docs/postgres.md), the durable
   * embedded store in file `options.path`, else the in-memory embedded store.
   */
  static open(options?: OpenOptions): Promise<Flowguard>
  /**
   * The shard of `id` in a queue of `shards` shards: `fnv1a(id) % shards`, as the npm
   * package `fnv1a` computes it.
   */
  static shardOf(id: string, shards: number): number

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
   * Enqueues one id or many: each to shard `fnv1a(id) % shards`, one atomic step per shard.
   * An id already waiting is not added again.
   */
  enqueue(queue: string, ids: string | Array<string>, options?: QueueEnqueueOptions): Promise<QueueEnqueueResult>
  /**
   * Atomically claims up to `limit` due ids, oldest first, for the visibility timeout. Two
   * reads never hold the same id; ids not acked or released in time become due again.
   */
  readBatch(queue: string, options?: QueueReadOptions): Promise<QueueBatch>
  /**
   * Acks ids read with owner token `owner`: they leave the queue (an id enqueued again while
   * claimed waits again). Ids not held by `owner` are refused per item.
   */
  ack(queue: string, owner: string, ids: string | Array<string>, options?: QueueAckOptions): Promise<QueueSettleResult>
  /** Releases ids read with owner token `owner`: they become due again (after `delayMs`). */
  release(queue: string, owner: string, ids: string | Array<string>, options?: QueueReleaseOptions): Promise<QueueSettleResult>

  /**
   * Runs `fn(signal, lock)` while holding lock `name`: extends the lease every `timeoutMs / 3`
   * while it runs and releases it afterwards, also when `fn` throws. When the lock is held by
   * someone else (after `waitMs`), resolves to `{ acquired: false, lock }` without calling `fn`.
   * Only a successful extend keeps the lease, counted from when that extend was sent. `signal`
   * aborts with an `ERR_LOCK_LOST` error when the lock was lost, or when less than a fifth of the
   * lease may be left without a confirmed extend (renewals failing or hanging): `fn` should then
   * stop before another worker can take the lock.
   */
  withLock<T>(name: string, fn: (signal: AbortSignal, lock: LockResult) => T | Promise<T>, options?: LockOptions): Promise<WithLockResult<T>>

  /**
   * Runs `fn(signal, permit)` while holding a permit of semaphore `name`, as `withLock` does with
   * a lock: the lease extended every `timeoutMs / 3` while it runs, released afterwards, also when
   * `fn` throws. When all permits are held (after `waitMs`), resolves to `{ acquired: false,
   * permit }` without calling `fn`. `signal` aborts with an `ERR_PERMIT_LOST` error when the
   * permit was lost, or when less than a fifth of the lease may be left without a confirmed extend.
   */
  withPermit<T>(name: string, fn: (signal: AbortSignal, permit: PermitResult) => T | Promise<T>, options: PermitOptions): Promise<WithPermitResult<T>>

  /** The value of `key`, or undefined when it is absent or expired. */
  getState<T = unknown>(key: string): Promise<T | undefined>
  /** The values of `keys` in one round trip (undefined for each absent one). */
  getStates<T = unknown>(keys: string[]): Promise<Array<T | undefined>>
  /**
   * Writes a JSON-serializable value (at most 1 MiB of JSON), with `ttlMs` or `expiresAt`, or
   * only when absent (`ifAbsent`). Values JSON cannot represent (undefined, functions, symbols,
   * BigInt, NaN, Infinity, cycles, nesting too deep) reject with `ERR_INVALID_ARGUMENT` and
   * nothing is written.
   */
  setState<T>(key: string, value: T, options?: StateSetOptions): Promise<SetStateResult<T>>
  /**
   * Runs `fn` once per idempotency `key`: the first caller runs it and its result is stored for
   * `ttlMs`; concurrent callers wait for it and later ones get it without running `fn` (`ran:
   * false`). When `fn` throws, or its result cannot be stored at all (not JSON, over 1 MiB), the
   * key is freed so a retry can run, and the error is passed on. When `fn` succeeded but storing
   * its result failed (Redis down, a timeout, the lease ran out), the key is NOT freed and the
   * call rejects with `ERR_RESULT_NOT_STORED` ({@link OnceResultNotStoredError}: the result, the
   * store's error, when the key's lease ends); a retry before then waits, a retry after it runs
   * `fn` again. The result must be JSON-serializable (undefined is kept as undefined). Unknown or
   * bad options reject with `ERR_INVALID_ARGUMENT` before `fn` runs.
   */
  once<T>(key: string, fn: () => T | Promise<T>, options?: OnceOptions): Promise<{ value: T; ran: boolean }>
}
