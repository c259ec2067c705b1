-- Job State: delete a value. KEYS[1]: the value. Reply: 1 deleted | 0 there was none.
return redis.call('DEL', KEYS[1])
