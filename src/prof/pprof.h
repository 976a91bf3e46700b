/* pprof.h — the profile in pprof's format (pprof.c). */
#ifndef SL_PROF_PPROF_H
#define SL_PROF_PPROF_H

/* Write the profile to path (created or truncated): 0 or an errno. */
int prof_write_file(const char *path);

#endif
