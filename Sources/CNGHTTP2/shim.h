// Pushgate: the nghttp2 API as Swift sees it.
//
// Debian 12 ships nghttp2 1.52 (with the rapid-reset and CONTINUATION-flood options backported).
// From 1.60 on the ssize_t entry points are deprecated in favour of *2 names; these wrappers pick
// whichever the installed header offers so the Swift code names one API.
#ifndef PUSHGATE_CNGHTTP2_SHIM_H
#define PUSHGATE_CNGHTTP2_SHIM_H

#include <nghttp2/nghttp2.h>
#include <sys/types.h>

static inline long pg_nghttp2_mem_recv(nghttp2_session *session, const uint8_t *in, size_t inlen) {
#if NGHTTP2_VERSION_NUM >= 0x013c00
    return (long)nghttp2_session_mem_recv2(session, in, inlen);
#else
    return (long)nghttp2_session_mem_recv(session, in, inlen);
#endif
}

static inline long pg_nghttp2_mem_send(nghttp2_session *session, const uint8_t **data) {
#if NGHTTP2_VERSION_NUM >= 0x013c00
    return (long)nghttp2_session_mem_send2(session, data);
#else
    return (long)nghttp2_session_mem_send(session, data);
#endif
}

static inline int pg_nghttp2_version_num(void) { return NGHTTP2_VERSION_NUM; }

#endif
