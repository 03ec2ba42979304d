-- RReadWriteLock forceUnlock of the read or the write lock (docs/protocol.md, ReadWriteLock).
-- KEYS[1] lock hash, KEYS[2] channel; ARGV[1] "read" or "write"; ARGV[2] publish command.
-- Deletes the hash if it is in that mode and publishes "0" (read) or "1" and then "0" (write: see
-- write_release.lua for why the "0" follows).
-- Returns 1 when a lock was deleted, 0 otherwise.
local bad = not_a_rwlock(KEYS[1])
if bad then return wrong_type(bad) end
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    if ARGV[1] == 'write' then redis.call(ARGV[2], KEYS[2], '1') end
    redis.call(ARGV[2], KEYS[2], '0')
    return 1
end
return 0
