-- RSemaphore release (docs/protocol.md, Semaphore): adds ARGV[1] permits (creating the counter)
-- and publishes how many are now available. KEYS[1] counter, KEYS[2] channel "redisson_sc:{name}";
-- ARGV[2] publish command. Returns the permits now available.
int_arg(ARGV[1], 'the permits', 1)
counter_of(KEYS[1], 'a permit count')
local available = redis.call('incrby', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], available)
return available
