import time
# grow to ~400 MB in 100 KB buffers, hold, free half, hold, free the rest, idle
bufs = []
for i in range(4000):
    bufs.append(bytearray(100000))
    if i % 400 == 0:
        time.sleep(0.05)
time.sleep(0.5)
del bufs[::2]
time.sleep(1.5)
bufs.clear()
time.sleep(2.5)
