-- RSemaphore drainPermits (docs/protocol.md, Semaphore): takes every available permit.
-- KEYS[1] counter. Returns how many were taken (0 for an absent counter).
local available = counter_of(KEYS[1], 'a permit count')
if available == nil then return 0 end
redis.call('set', KEYS[1], 0)
return available
