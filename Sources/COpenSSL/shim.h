// Pushgate: the OpenSSL 3 API as Swift sees it.
//
// Swift imports OpenSSL's real functions and its plain integer constants, but not function-like
// macros (SSL_CTX_set_mode, SSL_set_tlsext_host_name, OPENSSL_free, ...) nor constants built from
// them (every SSL_OP_* is SSL_OP_BIT(n)). Each wrapper below stands in for exactly one such macro
// and returns what the macro returns.
#ifndef PUSHGATE_COPENSSL_SHIM_H
#define PUSHGATE_COPENSSL_SHIM_H

#include <openssl/asn1.h>
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/buffer.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/tls1.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <stdint.h>

// 1 on success, 0 on failure.
static inline long pg_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return SSL_CTX_set_min_proto_version(ctx, version);
}

// The new mode bitmask (never fails).
static inline long pg_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_mode(ctx, mode);
}

// 1 on success, 0 on failure (for example an empty name or one longer than 255 bytes).
static inline long pg_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return SSL_set_tlsext_host_name(ssl, name);
}

static inline uint64_t pg_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t pg_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t pg_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }

// RFC 2253 rendering of a name, but with UTF-8 left as UTF-8 instead of escaped as \XX bytes
// (what `openssl x509 -nameopt RFC2253,-esc_msb` prints).
static inline unsigned long pg_XN_FLAG_RFC2253_UTF8(void) {
    return XN_FLAG_RFC2253 & ~(unsigned long)ASN1_STRFLGS_ESC_MSB;
}

// 1 on success; *memory then points at the memory BIO's buffer, which the BIO still owns.
static inline long pg_BIO_get_mem_ptr(BIO *bio, BUF_MEM **memory) {
    return BIO_get_mem_ptr(bio, memory);
}

// Frees memory OpenSSL handed out (BN_bn2hex, ASN1_STRING_to_UTF8, ...).
static inline void pg_OPENSSL_free(void *pointer) {
    OPENSSL_free(pointer);
}

#endif
