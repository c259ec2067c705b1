-- Item Tracker, shared by its scripts (prepended to each, before tracker_common.lua and, in
-- tracker_apply.lua, before its fast path: tracker_apply_fast.lua).
-- A group is KEYS[1..3], its in_progress (score: lease end), completed and failed (score: when
-- the record expires) indexes, and KEYS[4], its records: a hash of id -> packed record (below). A
-- record whose expiry (`x`) has passed counts as absent; `purge` deletes such records, and each key of
-- a group lives as long as its longest-lived record (`keep_alive`), so a group nobody touches
-- again disappears by itself.
-- Numbers become text only as redis.call arguments (Redis writes integers exactly) or through
-- string.format('%d', …); inside records they are packed as integers (below). Never by
-- concatenation, which uses '%.14g' ('1e+14').
-- The expiry of a record kept forever (tracker.rs NEVER): reached by no clock.
local NEVER = 99999999999999
-- Each index also holds an end mark, the member '' (no item id is empty) scored +inf, added with
-- every ZADD in the same command. An index emptied of its ids thus keeps existing, with its TTL,
-- while the group lives, and ZADD's reply tells when it did not exist (the mark was added too):
-- only then does the writer give it the group's expiry, rather than with a PEXPIREAT on every
-- write. Everything that reads an index by score stops below +inf (BELOW_END); indexes written
-- before the mark existed get it with their next ZADD.
local END = ''
local BELOW_END = '(inf'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Records are packed with Redis's `struct` library rather than JSON: a record is read and
-- rewritten by every claim and completion, and packing it costs a fraction of cjson's decode and
-- encode. The layout (tracker.rs `decode` reads it too), little-endian:
--   'P', status (p in_progress | c completed | f failed), attempts u32, lease end, created,
--   updated, finished, expiry (i64 ms each), owner (u32 length + bytes, empty for none: tokens
--   never are), last error ('-' none | 'e', then u32 length + bytes: an empty reason is one),
--   timeline length u16, then the timeline, oldest first: per entry its time i64, status
--   (p | a abandoned | c | f), attempt u32 and error (as the last error).
-- Owner tokens and error texts are arbitrary text, hence the lengths. Records written by earlier
-- versions are JSON (they start with '{'): read as such and written back packed.
-- In the scripts a status is its one-letter code, as packed (JSON records spell it out).
local HEAD = '<c1c1I4i8i8i8i8i8I4c0c1I4c0I2'
local ENTRY = '<i8c1I4c1I4c0'
-- Where the expiry sits in a packed record (struct positions are 1-based).
local X_AT = 39
-- The field of the records hash that holds the group's bookkeeping (see tracker_common.lua).
local META = ''
