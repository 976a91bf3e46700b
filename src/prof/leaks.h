/* leaks.h — the leak report at exit (leaks.c). */
#ifndef SL_PROF_LEAKS_H
#define SL_PROF_LEAKS_H

/* The sites still holding sampled memory, biggest first, on stderr. */
void prof_leak_report(void);

#endif
