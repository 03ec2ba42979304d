-- RCountDownLatch delete: removes the count and publishes "1" if it existed.
-- KEYS[1] count, KEYS[2] channel; ARGV[1] publish command. Returns 1 when deleted, else 0.
counter_of(KEYS[1], 'a latch count')
if redis.call('del', KEYS[1]) == 1 then
    redis.call(ARGV[1], KEYS[2], '1')
    return 1
end
return 0
