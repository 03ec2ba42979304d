-- RSemaphore availablePermits: KEYS[1] counter. Returns its value (0 when absent).
return counter_of(KEYS[1], 'a permit count') or 0
