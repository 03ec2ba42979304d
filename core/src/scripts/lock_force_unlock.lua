-- RLock forceUnlock (§2.4), refusing to delete a key that is not a lock hash.
-- KEYS[1] lock hash, KEYS[2] unlock channel; ARGV[1] message "0"; ARGV[2] publish command.
-- Returns 1 when a lock was deleted, 0 when there was none.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'hash' and kind ~= 'none' then
    return redis.error_reply('WRONGTYPE key holds a ' .. kind .. ', not a lock hash')
end
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[2], KEYS[2], ARGV[1])
    return 1
end
return 0
