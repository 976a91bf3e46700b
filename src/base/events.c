/* events.c — the one table of events.h, filled at start. */
#include "events.h"

struct sl_events sl_events;
