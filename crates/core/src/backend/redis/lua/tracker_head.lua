-- Item Tracker, shared by its scripts (prepended to each, before tracker_common.lua and, in
-- tracker_apply.lua, before its fast path: tracker_apply_fast.lua).
-- A group is KEYS[1..3], its in_progress (score: lease end), completed and failed (score: when
-- the record expires) indexes, KEYS[4], its records: a hash of id -> packed record (below), and
-- KEYS[5], its dead index (score: when the record expires; absent until an item dies); KEYS[6]
-- and KEYS[7], the compact layout's tree hash and root (docs/redis-compact.md, `compact` in
-- tracker_common.lua): completed records of at most COMPACT bytes live in record buckets, and
-- every completed id in the counted index whose leaves are named after KEYS[6]; KEYS[2], the
-- completed index of groups written before it, is only read and emptied. A
-- record whose expiry (`x`) has passed counts as absent; `purge` deletes such records, and each key of
-- a group lives as long as its longest-lived record (`keep_alive`; a bucket or leaf, as its own),
-- so a group nobody touches again disappears by itself.
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
-- encode. Every record is one field of the group's hash, so its size is most of what an item
-- costs in Redis's memory: the layout (tracker_record.rs reads it too) holds each fact once.
-- Little-endian:
--   status (p in_progress | c completed | f failed | x dead), attempts u32, created, updated and
--   expiry (u48 ms each: NEVER fits), and only when in progress the lease end (u48); a completed,
--   failed or dead record's finished time is its updated time (both are set by the same write)
--   and its lease is over (0) (a revival changes neither);
--   only when the latest claim gave a maxAttempts: 'm' and that number (u32) (no owner form
--   starts with 'm');
--   owner: '-' none | 'h' and 16 bytes, a token of 32 lowercase hex digits as binary (every
--   token the tracker makes) | 't', u16 length and the text (any other);
--   last error: '-' none | 'e', u32 length and the text (an empty reason is one);
--   only when the latest claim gave a note: 'n', u16 length and the text; only when the
--   completion gave a result: 'r', u32 length and its JSON text (a timeline count is at most
--   20, never the 110 of 'n' nor the 114 of 'r'), so a record without them takes no byte more;
--   timeline: u8 count, then the entries, oldest first: per entry its time i64, status
--   (p | a abandoned | c | f | x | r revived), attempt u32 and error (as the last error). A count
--   of 0 stands for
--   the timeline the record's own fields imply (`implied`, tracker_common.lua): the first attempt
--   claimed at `created` (and completed or failed at `updated` with the last error), or a record
--   finished without a claim at `updated`. Every record has at least one transition, so a 0 is
--   never a real count. The usual item, claimed once and then completed, so stores no entry; a
--   retry, an abandoned lease or a second completion stores its whole timeline. The timeline a
--   reader sees is the same either way.
-- In the scripts a status is its one-letter code, as packed, and an owner its packed form
-- (`owner_field`), compared as such.
local HEAD = '<c1I4I6I6I6'
local ENTRY = '<i8c1I4c1I4c0'
-- Where the expiry sits in a packed record (struct positions are 1-based).
local X_AT = 18
-- An owner token as packed in a record. Scripts are handed tokens packed already (tracker.rs, by
-- `pack_owner` of tracker_record.rs), or '' for none (a completion without an owner check), so
-- no script turns hex into bytes.
local function owner_field(o)
  if o == '' then return '-' end
  return o
end
-- The field of the records hash that holds the group's bookkeeping (see tracker_common.lua).
local META = ''
-- The longest id and completed record a record bucket takes (tracker_crec.lua): Redis keeps a
-- hash whose fields and values are at most this long (hash-max-listpack-value) as a listpack.
local COMPACT = 64
