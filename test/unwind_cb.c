/* unwind_cb.c — a library for unit_unwind: one frame without a frame
 * pointer between the test and its callback, so that a walk through it
 * needs the library's unwind tables. */
static volatile int sink;

__attribute__((noinline)) void cb_call(void (*f)(void))
{
    f();
    sink++; /* not a tail call: the frame stays */
}
