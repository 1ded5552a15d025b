// The store's floor: what the durable part of a push costs when written in C straight on
// SQLite, with none of the gateway around it. Same settings as the gateway's store (WAL,
// synchronous=FULL, normal locking: `pushgate backup` reads from another process), the same `notifications` table, the same statements:
// one INSERT per push, a cumulative ack deleting its pushes by acceptance id, and one fsync'd
// COMMIT per group. No `meta` UPDATE: the gateway writes the highest acceptance id there only in
// a transaction that deletes that id's row, which these acks (of the group before) never do. Prints the process's CPU-seconds (user + system, fsyncs
// included) per 100k pushes.
//
//   store-floor DIR PUSHES GROUP ACKS_PER_PUSH [RATE]
//
// GROUP pushes go into each transaction, with the acks of the pushes of the group before
// (acks arrive a commit or so after their pushes). ACKS_PER_PUSH is the share of pushes that
// carry an ack (the bench's devices send about 0.45); each ack deletes the pushes since the
// device's previous ack in one statement, as the gateway does. 0 means no acks. With RATE
// (pushes per second) each group's transaction begins when its first push is due at that rate,
// the process sleeping in between, as the gateway's writer does at a moderate rate.
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu-seconds.h"
#include "pace.h"

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "%s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

static void exec(sqlite3 *db, const char *sql) { check(sqlite3_exec(db, sql, 0, 0, 0), db, sql); }

int main(int argc, char **argv) {
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: store-floor DIR PUSHES GROUP ACKS_PER_PUSH [RATE]\n");
        return 2;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/floor.sqlite", argv[1]);
    long pushes = atol(argv[2]), group = atol(argv[3]);
    double acksPerPush = atof(argv[4]);
    double rate = argc == 6 ? atof(argv[5]) : 0;

    sqlite3 *db;
    check(sqlite3_open(path, &db), db, "open");
    exec(db, "PRAGMA journal_mode = WAL");
    exec(db, "PRAGMA synchronous = FULL");
    exec(db, "PRAGMA temp_store = MEMORY");
    exec(db, "CREATE TABLE notifications (acceptance_id INTEGER NOT NULL PRIMARY KEY CHECK (acceptance_id >= 0),"
             " device_id TEXT NOT NULL, token TEXT NOT NULL, topic TEXT NOT NULL, apns_id TEXT NOT NULL,"
             " push_type TEXT NOT NULL, priority INTEGER NOT NULL CHECK (priority BETWEEN 0 AND 255),"
             " collapse_id TEXT, payload BLOB NOT NULL, accepted_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
             " seq INTEGER CHECK (seq >= 0)) STRICT");

    sqlite3_stmt *insert, *deleteOne, *deleteMany, *begin, *commit;
    check(sqlite3_prepare_v2(db, "INSERT INTO notifications (acceptance_id, device_id, token, topic, apns_id,"
                                 " push_type, priority, collapse_id, payload, accepted_at, expires_at, seq)"
                                 " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", -1, &insert, 0), db, "prepare");
    check(sqlite3_prepare_v2(db, "DELETE FROM notifications WHERE acceptance_id = ?", -1, &deleteOne, 0), db, "prepare");
    check(sqlite3_prepare_v2(db, "DELETE FROM notifications WHERE acceptance_id IN (SELECT value FROM json_each(?))",
                             -1, &deleteMany, 0), db, "prepare");
    check(sqlite3_prepare_v2(db, "BEGIN IMMEDIATE", -1, &begin, 0), db, "prepare");
    check(sqlite3_prepare_v2(db, "COMMIT", -1, &commit, 0), db, "prepare");

    // The bench's push: 1,000 devices, a 64-hex token, its topic, a UUID, 122 payload bytes.
    char payload[122];
    memset(payload, 'x', sizeof payload);
    const char *topic = "com.example.bench", *pushType = "alert";
    char device[40], token[65], apnsID[37];
    // The pushes of the previous group, waiting for their acks.
    long *unacked = calloc(group, sizeof(long));
    long unackedCount = 0, acksOwed = 0;
    double ackCredit = 0;

    double start = cpu_seconds();
    long switches = context_switches();
    for (long next = 1; next <= pushes;) {
        if (rate > 0) pace(next - 1, rate);
        check(sqlite3_step(begin), db, "begin");
        sqlite3_reset(begin);
        // Acks for the previous group: each deletes the pushes since the device's last ack.
        if (acksPerPush > 0 && unackedCount > 0) {
            ackCredit += acksPerPush * unackedCount;
            long acks = (long)ackCredit;
            if (acks < 1) acks = 1;
            ackCredit -= acks;
            long per = (unackedCount + acks - 1) / acks;
            for (long i = 0; i < unackedCount; i += per) {
                long n = (i + per <= unackedCount) ? per : unackedCount - i;
                if (n == 1) {
                    sqlite3_bind_int64(deleteOne, 1, unacked[i]);
                    check(sqlite3_step(deleteOne), db, "delete");
                    sqlite3_reset(deleteOne);
                } else {
                    char list[4096];
                    int len = snprintf(list, sizeof list, "[");
                    for (long k = 0; k < n; k++) len += snprintf(list + len, sizeof list - len, k ? ",%ld" : "%ld", unacked[i + k]);
                    snprintf(list + len, sizeof list - len, "]");
                    sqlite3_bind_text(deleteMany, 1, list, -1, SQLITE_STATIC);
                    check(sqlite3_step(deleteMany), db, "delete");
                    sqlite3_reset(deleteMany);
                }
                acksOwed++;
            }
        }
        unackedCount = 0;
        long last = next + group - 1 <= pushes ? next + group - 1 : pushes;
        for (; next <= last; next++) {
            snprintf(device, sizeof device, "device-%08ld-aaaaaaaaaaaa", next % 1000);
            snprintf(token, sizeof token, "%064ld", next % 1000);
            snprintf(apnsID, sizeof apnsID, "%08lX-0000-4000-8000-%012lX", next, next);
            sqlite3_bind_int64(insert, 1, next);
            sqlite3_bind_text(insert, 2, device, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 3, token, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 4, topic, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 5, apnsID, -1, SQLITE_STATIC);
            sqlite3_bind_text(insert, 6, pushType, -1, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 7, 10);
            sqlite3_bind_null(insert, 8);
            sqlite3_bind_blob(insert, 9, payload, sizeof payload, SQLITE_STATIC);
            sqlite3_bind_int64(insert, 10, 1700000000000);
            sqlite3_bind_int64(insert, 11, 1702592000000);
            sqlite3_bind_int64(insert, 12, next / 1000 + 1);
            check(sqlite3_step(insert), db, "insert");
            sqlite3_reset(insert);
            unacked[unackedCount++] = next;
        }
        check(sqlite3_step(commit), db, "commit");
        sqlite3_reset(commit);
    }
    double used = cpu_seconds() - start;
    switches = context_switches() - switches;
    printf("%.3f CPU-s per 100k pushes (group %ld, %ld acks for %ld pushes), %.3f context switches per push\n",
           used / (pushes / 1e5), group, acksOwed, pushes, (double)switches / pushes);
    return 0;
}
