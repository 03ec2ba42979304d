-- RReadWriteLock forceUnlock of the read or the write lock (docs/protocol.md, ReadWriteLock).
-- KEYS[1] lock hash, KEYS[2] channel; ARGV[1] "read" or "write"; ARGV[2] publish command.
-- Deletes the hash if it is in that mode and publishes "0" (read) or "1" (write).
-- Returns 1 when a lock was deleted, 0 otherwise.
local bad = not_a_rwlock(KEYS[1])
if bad then return wrong_type(bad) end
if redis.call('hget', KEYS[1], 'mode') == ARGV[1] then
    redis.call('del', KEYS[1])
    redis.call(ARGV[2], KEYS[2], ARGV[1] == 'write' and '1' or '0')
    return 1
end
return 0
