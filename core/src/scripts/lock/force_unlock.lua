-- RLock forceUnlock (docs/protocol.md, Lock), refusing to delete a key that is not a lock hash.
-- Also the spin, fenced and non-reentrant locks'.
-- KEYS[1] lock hash, KEYS[2] unlock channel; ARGV[1] message "0"; ARGV[2] publish command ("" for none).
-- Returns 1 when a lock was deleted, 0 when there was none.
local bad = not_a_lock(KEYS[1])
if bad then return wrong_type(bad) end
if redis.call('del', KEYS[1]) == 1 then
    if ARGV[2] ~= '' then redis.call(ARGV[2], KEYS[2], ARGV[1]) end
    return 1
end
return 0
