-- Deletes a counter key (a semaphore's permits, a latch's count), refusing another type.
-- KEYS[1] counter. Returns 1 when deleted, 0 when absent.
counter_of(KEYS[1], ARGV[1])
return redis.call('del', KEYS[1])
