-- RSemaphore tryAcquire (docs/protocol.md, Semaphore): takes ARGV[1] permits if that many are
-- available. KEYS[1] the permit counter. Returns 1 when taken, 0 otherwise (an absent counter has
-- no permits: wait until someone sets or releases some).
local n = int_arg(ARGV[1], 'the permits', 1)
local available = counter_of(KEYS[1], 'a permit count')
if available ~= nil and available >= n then
    redis.call('decrby', KEYS[1], ARGV[1])
    return 1
end
return 0
