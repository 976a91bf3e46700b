/* Unit: the watermark boost's pace of asking the owners for their caches
 * (src/reclaim/boost.h: boost_pass_every), as a pure function of the
 * last wait and the deficits before and after: quick while passes win
 * blocks back, backing off while they win nothing, quick again once one
 * does. No threads, no sleeps. */
#include "../src/reclaim/boost.h"
#include "t.h"

int main(void)
{
    /* the first pass of a boost (no deficit before it): the quick pace */
    CHECK_EQ(boost_pass_every(BOOST_PASS_MS, 0, 40), BOOST_PASS_MS);
    CHECK_EQ(boost_pass_every(BOOST_PASS_MAX_MS, 0, 40), BOOST_PASS_MS);
    /* the deficit fell since the last pass: blocks came back, stay quick */
    CHECK_EQ(boost_pass_every(BOOST_PASS_MS, 40, 39), BOOST_PASS_MS);
    CHECK_EQ(boost_pass_every(640, 40, 10), BOOST_PASS_MS);
    /* it did not fall (the same, or more): the wait doubles... */
    CHECK_EQ(boost_pass_every(BOOST_PASS_MS, 40, 40), 2 * BOOST_PASS_MS);
    CHECK_EQ(boost_pass_every(20, 40, 55), 40);
    /* ... up to the longest, where it stays */
    uint64_t every = BOOST_PASS_MS;
    int passes = 0;
    while (every < BOOST_PASS_MAX_MS && passes < 64) {
        every = boost_pass_every(every, 40, 40);
        passes++;
    }
    CHECK_EQ(every, BOOST_PASS_MAX_MS);
    CHECK(passes <= 9); /* 5 ms doubling: 1.6 s within 9 fruitless passes */
    CHECK_EQ(boost_pass_every(BOOST_PASS_MAX_MS, 40, 41), BOOST_PASS_MAX_MS);
    /* a stuck boost asks about log2(1600 / 5) + t / 1.6 s times, not t / 5 ms */
    uint64_t now = 0, asks = 0;
    every = BOOST_PASS_MS;
    size_t last = 0;
    while (now < 10000) {
        every = boost_pass_every(every, last, 40);
        last = 40;
        now += every;
        asks++;
    }
    CHECK_MSG(asks < 20, "%llu asks in 10 s of a boost that wins nothing", (unsigned long long)asks);
    return t_done("unit_boost");
}
