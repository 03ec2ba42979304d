-- RSemaphore release (docs/protocol.md, Semaphore): adds ARGV[1] permits (creating the counter)
-- and publishes how many are now available. KEYS[1] counter, KEYS[2] channel "redisson_sc:{name}";
-- ARGV[2] publish command; ARGV[3] "if_exists" for Redisson's releaseIfExists: an absent counter
-- is left absent (nothing published) and the reply is nil. Returns the permits now available.
int_arg(ARGV[1], 'the permits', 1)
if counter_of(KEYS[1], 'a permit count') == nil and ARGV[3] == 'if_exists' then
    return nil
end
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
return available
