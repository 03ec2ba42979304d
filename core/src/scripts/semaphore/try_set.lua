-- RSemaphore trySetPermits (docs/protocol.md, Semaphore): sets the counter to ARGV[1] unless it
-- exists, and publishes it. KEYS[1] counter, KEYS[2] channel; ARGV[2] publish command.
-- Returns 1 when set, 0 when the counter already existed.
int_arg(ARGV[1], 'the permits', 0)
if counter_of(KEYS[1], 'a permit count') ~= nil then return 0 end
redis.call('set', KEYS[1], ARGV[1])
redis.call(ARGV[2], KEYS[2], ARGV[1])
return 1
