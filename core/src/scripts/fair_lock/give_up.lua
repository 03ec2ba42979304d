-- RFairLock "acquire failed" clean-up (docs/protocol.md, FairLock): a waiter that gives up (timed
-- out, cancelled) leaves the queue, and everyone behind it moves up one slot.
-- KEYS[1] queue, KEYS[2] timeouts, KEYS[3] lock hash, KEYS[4] base channel
-- "redisson_lock__channel:{name}"; ARGV[1] holder; ARGV[2] the fair wait ms; ARGV[3] publish
-- command; ARGV[4] now (client epoch ms).
-- Beyond Redisson: when the leaver was the head and the lock is free, the new head is told at once
-- (a `0` on its channel) instead of waiting for its own timer. Returns 1 if the holder was queued.
local bad = check_fair_keys(KEYS[1], KEYS[2])
if bad then return wrong_type(bad) end
local wait = ms_arg(ARGV[2], 'the fair-lock wait')
local queue = redis.call('lrange', KEYS[1], 0, -1)
local position = nil
for i, waiter in ipairs(queue) do
    if waiter == ARGV[1] then position = i break end
end
if position ~= nil then
    redis.call('lrem', KEYS[1], 0, ARGV[1])
    move_up(KEYS[1], KEYS[2], position, wait, tonumber(ARGV[4]))
end
redis.call('zrem', KEYS[2], ARGV[1])
if position == 1 and redis.call('exists', KEYS[3]) == 0 then
    local head = redis.call('lindex', KEYS[1], 0)
    if head then redis.call(ARGV[3], KEYS[4] .. ':' .. head, '0') end
end
return position ~= nil and 1 or 0
