// Pushgate: libpq, PostgreSQL's client library (Debian: libpq-dev), as Swift sees it. Its API
// has no function-like macros the store needs, so this header only includes it.
#ifndef PUSHGATE_CLIBPQ_SHIM_H
#define PUSHGATE_CLIBPQ_SHIM_H

#include <libpq-fe.h>

#endif
