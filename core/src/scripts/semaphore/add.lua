-- RSemaphore addPermits (docs/protocol.md, Semaphore): adds ARGV[1] (possibly negative) to the
-- counter (an absent one counts 0) and publishes the result when some are available.
-- KEYS[1] counter, KEYS[2] channel; ARGV[2] publish command. Returns the new count.
local delta = tonumber(ARGV[1])
if delta == nil or delta ~= math.floor(delta) or math.abs(delta) > 9007199254740991 then
    error({ err = 'ERR_ARG the permits to add must be a whole number, got ' .. tostring(ARGV[1]) })
end
local count = (counter_of(KEYS[1], 'a permit count') or 0) + delta
redis.call('set', KEYS[1], string.format('%d', count))
if count > 0 then redis.call(ARGV[2], KEYS[2], string.format('%d', count)) end
return count
