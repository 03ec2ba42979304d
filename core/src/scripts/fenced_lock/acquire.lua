-- RFencedLock acquire with token (docs/protocol.md, FencedLock).
-- KEYS[1] lock hash, KEYS[2] token counter "redisson_lock_token:{name}"; ARGV[1] lease ms; ARGV[2] holder.
-- Returns {-1, token} when acquired or re-entered (every acquisition takes the next token),
-- otherwise {PTTL, -1}.
local lease = ms_arg(ARGV[1], 'the lease')
local kind = redis.call('type', KEYS[2])['ok']
if kind ~= 'none' and kind ~= 'string' then return wrong_type('a fencing-token key holding a ' .. kind) end
if redis.call('exists', KEYS[1]) == 1 then
    local held = redis.pcall('hexists', KEYS[1], ARGV[2])
    if type(held) == 'table' then return wrong_type(not_a_lock(KEYS[1]) or 'another type of value') end
    if held == 0 then
        local bad = not_a_lock_hash(KEYS[1])
        if bad then return wrong_type(bad) end
        return { redis.call('pttl', KEYS[1]), -1 }
    end
end
local token = redis.call('incr', KEYS[2])
redis.call('hincrby', KEYS[1], ARGV[2], 1)
redis.call('pexpire', KEYS[1], ARGV[1])
return { -1, token }
