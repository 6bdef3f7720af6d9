import Foundation
import GRDB
import KassaCore

/// The schema, one versioned step at a time. Steps are never edited once
/// released; a change is a new step.
enum Migrations {
    static let names = ["v1-events", "v2-payment-orders", "v3-sessions", "v4-session-search", "v5-payment-order-version",
                        "v6-session-client-device", "v7-session-public-base",
                        "v8-idempotency-request", "v9-idempotency-redacted", "v10-session-root-span",
                        "v11-idempotency-by-time", "v12-session-events-deferred",
                        "v13-events-time-by-id", "v14-sessions-unfinished",
                        "v15-msisdn-suffix-when-set", "v16-pushes-through-session-events",
                        "v17-once-done", "v18-sessions-unfinished-mark", "v19-payment-orders-lead-to-sessions",
                        "v20-events-without-sequence", "v21-payment-orders-retained", "v22-event-ids-as-bytes"]

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-events") { db in
            try db.execute(sql: """
                CREATE TABLE events (
                    id INTEGER PRIMARY KEY AUTOINCREMENT,
                    at_ms INTEGER NOT NULL,
                    session_id TEXT,
                    seq INTEGER,
                    kind TEXT NOT NULL,
                    level TEXT NOT NULL,
                    summary TEXT NOT NULL,
                    duration_ms REAL,
                    status INTEGER,
                    trace_id TEXT,
                    data TEXT
                );
                CREATE INDEX events_by_session ON events(session_id, id) WHERE session_id IS NOT NULL;
                CREATE UNIQUE INDEX events_by_session_seq ON events(session_id, seq) WHERE seq IS NOT NULL;
                CREATE INDEX events_by_time ON events(at_ms);
                """)
        }
        migrator.registerMigration("v2-payment-orders") { db in
            try db.execute(sql: """
                CREATE TABLE payment_orders (
                    payee_reference TEXT PRIMARY KEY,
                    payment_order_id TEXT,
                    setinstrument_href TEXT,
                    created_at_ms INTEGER NOT NULL
                );
                CREATE INDEX payment_orders_by_id ON payment_orders(payment_order_id);
                """)
        }
        migrator.registerMigration("v3-sessions") { db in
            try db.execute(sql: """
                CREATE TABLE sessions (
                    id TEXT PRIMARY KEY,
                    client_token_sha256 TEXT NOT NULL,
                    view_href TEXT NOT NULL,
                    payee_reference TEXT,
                    payment_order_id TEXT,
                    phase TEXT NOT NULL,
                    created_at_ms INTEGER NOT NULL,
                    updated_at_ms INTEGER NOT NULL
                );
                CREATE INDEX sessions_by_phase ON sessions(phase);
                CREATE INDEX sessions_by_payee_reference ON sessions(payee_reference);
                CREATE TABLE idempotency (
                    scope TEXT NOT NULL,
                    key TEXT NOT NULL,
                    status INTEGER NOT NULL,
                    content_type TEXT NOT NULL,
                    body BLOB NOT NULL,
                    created_at_ms INTEGER NOT NULL,
                    PRIMARY KEY (scope, key)
                );
                """)
        }
        migrator.registerMigration("v4-session-search") { db in
            try db.execute(sql: """
                ALTER TABLE sessions ADD COLUMN trace_id TEXT;
                ALTER TABLE sessions ADD COLUMN msisdn_suffix TEXT;
                ALTER TABLE sessions ADD COLUMN last_problem_type TEXT;
                CREATE INDEX sessions_by_payment_order ON sessions(payment_order_id);
                CREATE INDEX sessions_by_msisdn_suffix ON sessions(msisdn_suffix);
                CREATE INDEX sessions_by_created ON sessions(created_at_ms);
                """)
        }
        migrator.registerMigration("v5-payment-order-version") { db in
            try db.execute(sql: "ALTER TABLE payment_orders ADD COLUMN api_version TEXT")
        }
        migrator.registerMigration("v6-session-client-device") { db in
            // Sealed: a device description can point at a person.
            try db.execute(sql: "ALTER TABLE sessions ADD COLUMN client_device_sealed TEXT")
        }
        migrator.registerMigration("v7-session-public-base") { db in
            try db.execute(sql: "ALTER TABLE sessions ADD COLUMN public_base_url TEXT")
        }
        migrator.registerMigration("v8-idempotency-request") { db in
            try db.execute(sql: "ALTER TABLE idempotency ADD COLUMN request_sha256 TEXT")
        }
        migrator.registerMigration("v9-idempotency-redacted") { db in
            // Answers stored before this step could hold a client token: they are kept redacted
            // (a replay of a creation gets a new token; see Gateway.idempotent).
            // Keys are kept as digests from this step on.
            let rows = try Row.fetchAll(db, sql: "SELECT rowid, key, body FROM idempotency")
            for row in rows {
                let body: Data = row["body"] ?? Data()
                let redacted = (try? JSONValue.parse([UInt8](body))).map(Redaction.redactedBytes) ?? []
                try db.execute(sql: "UPDATE idempotency SET key = ?, body = ? WHERE rowid = ?",
                               arguments: [Hashing.sha256Hex(row["key"] as String), Data(redacted), row["rowid"] as Int64])
            }
        }
        migrator.registerMigration("v10-session-root-span") { db in
            // The span id of the request that created the session, so its spans after a restart
            // still hang below it (traces are off by default: then it stays null).
            try db.execute(sql: "ALTER TABLE sessions ADD COLUMN root_span_id TEXT")
        }
        migrator.registerMigration("v11-idempotency-by-time") { db in
            // Retention finds old answers by this, inside its write transaction: without it, a
            // scan of the whole table held the lock every pass.
            try db.execute(sql: "CREATE INDEX idempotency_by_created ON idempotency(created_at_ms)")
        }
        migrator.registerMigration("v12-session-events-deferred") { db in
            // A session's events found through a table the event log's writer fills in bulk
            // (`EventLog.indexSessionEvents`) instead of an index kept on every insert. Concurrent
            // sessions' events land in different leaves, so that index rewrote about one 2 KiB leaf
            // per event, a quarter of the WAL's frames; filled thousands of events at a time, a session's
            // entries share a leaf. Events past `upto` are not in it yet: readers look at them directly.
            try db.execute(sql: """
                CREATE TABLE session_events (
                    session_id TEXT NOT NULL,
                    event_id INTEGER NOT NULL,
                    PRIMARY KEY (session_id, event_id)
                ) WITHOUT ROWID;
                CREATE TABLE session_events_indexed (upto INTEGER NOT NULL);
                INSERT INTO session_events SELECT session_id, id FROM events WHERE session_id IS NOT NULL ORDER BY session_id, id;
                INSERT INTO session_events_indexed SELECT coalesce(max(id), 0) FROM events;
                DROP INDEX events_by_session;
                CREATE TRIGGER session_events_deleted AFTER DELETE ON events WHEN old.session_id IS NOT NULL BEGIN
                    DELETE FROM session_events WHERE session_id = old.session_id AND event_id = old.id;
                END;
                """)
        }
        migrator.registerMigration("v13-events-time-by-id") { db in
            // Event times no longer go back along the log (`EventLog.enqueue`), so a window of time
            // is found by a binary search over ids. The index on time rebalanced its rightmost
            // leaves with their siblings on every commit: ≈ 2.4 of a commit's ≈ 23 WAL frames.
            try db.execute(sql: "DROP INDEX events_by_time")
        }
        migrator.registerMigration("v14-sessions-unfinished") { db in
            // The sessions not yet ended, by creation: what a restart picks up and what a search for
            // a phase before the end walks. The index on every session's phase moved a session's
            // entry between two leaves at each change of phase (≈ 1.8 WAL frames a commit); this one
            // is small, and its leaves are those of the sessions in progress.
            try db.execute(sql: """
                DROP INDEX sessions_by_phase;
                CREATE INDEX sessions_unfinished ON sessions(created_at_ms) WHERE phase NOT IN ('completed', 'canceled', 'ended');
                """)
        }
        migrator.registerMigration("v15-msisdn-suffix-when-set") { db in
            // Only sessions with an MSISDN (Swish) are searched by it: a card payment's NULL entry
            // rewrote the index's NULL leaf on the commit of every new session (≈ 0.5 WAL frames).
            // `msisdn_suffix = ?` implies the condition, so a search still uses the index.
            try db.execute(sql: """
                DROP INDEX sessions_by_msisdn_suffix;
                CREATE INDEX sessions_by_msisdn_suffix ON sessions(msisdn_suffix) WHERE msisdn_suffix IS NOT NULL;
                """)
        }
        migrator.registerMigration("v16-pushes-through-session-events") { db in
            // A session's pushes are read back (after a restart, or when it left memory) through
            // `session_events`, like the rest of its events. Their own index rewrote a leaf for each
            // push's commit (≈ 1.3 WAL frames a commit) to serve that rare read.
            try db.execute(sql: "DROP INDEX events_by_session_seq")
        }
        migrator.registerMigration("v17-once-done") { db in
            // The start-up passes that need to run only once per database (see `sealPlainViewHrefs`).
            try db.execute(sql: "CREATE TABLE once_done (name TEXT PRIMARY KEY) WITHOUT ROWID")
        }
        migrator.registerMigration("v18-sessions-unfinished-mark") { db in
            // The index of sessions in progress keyed on a mark that changes once, at the end
            // (`unfinished`, 1 until then), rather than on `phase`: SQLite rewrites a partial
            // index's entry whenever a column its condition reads is updated, so every change of
            // phase rewrote a leaf (≈ 1.3 of a commit's ≈ 20 WAL frames), and evaluated the
            // `NOT IN` list for the old and the new row, each time into a temporary b-tree (91
            // opcodes an UPDATE, 38 now). The mark is set on the sessions in progress only, found
            // through the index it replaces.
            try db.execute(sql: """
                ALTER TABLE sessions ADD COLUMN unfinished INTEGER;
                UPDATE sessions SET unfinished = 1 WHERE phase NOT IN ('completed', 'canceled', 'ended');
                DROP INDEX sessions_unfinished;
                CREATE INDEX sessions_unfinished ON sessions(created_at_ms) WHERE unfinished IS NOT NULL;
                """)
        }
        migrator.registerMigration("v19-payment-orders-lead-to-sessions") { db in
            // A session is found by its payee reference or payment order through the payment
            // order's row, which now names the session (`session_id`), rather than through two
            // indexes of `sessions` that held the same keys as the payment orders' own: each rewrote
            // a leaf a commit (≈ 0.8 and 0.7 of ≈ 18 WAL frames). The table is keyed by the payee
            // reference itself (WITHOUT ROWID): its rows and the index of that key were two b-trees
            // in the same order, each rewritten at the tail (≈ 0.5 and 0.7 frames). A session whose
            // order has no row gets one, so every session stays found.
            try db.execute(sql: """
                CREATE TABLE payment_orders_v19 (
                    payee_reference TEXT PRIMARY KEY,
                    payment_order_id TEXT,
                    setinstrument_href TEXT,
                    created_at_ms INTEGER NOT NULL,
                    api_version TEXT,
                    session_id TEXT
                ) WITHOUT ROWID;
                INSERT INTO payment_orders_v19
                    SELECT p.payee_reference, p.payment_order_id, p.setinstrument_href, p.created_at_ms, p.api_version,
                           (SELECT s.id FROM sessions s WHERE s.payee_reference = p.payee_reference)
                    FROM payment_orders p WHERE p.payee_reference IS NOT NULL;
                INSERT OR IGNORE INTO payment_orders_v19(payee_reference, payment_order_id, created_at_ms, session_id)
                    SELECT payee_reference, payment_order_id, created_at_ms, id FROM sessions WHERE payee_reference IS NOT NULL;
                DROP TABLE payment_orders;
                ALTER TABLE payment_orders_v19 RENAME TO payment_orders;
                CREATE INDEX payment_orders_by_id ON payment_orders(payment_order_id);
                DROP INDEX sessions_by_payee_reference;
                DROP INDEX sessions_by_payment_order;
                """)
        }
        migrator.registerMigration("v20-events-without-sequence") { db in
            // `AUTOINCREMENT` kept the highest id in `sqlite_sequence` and rewrote its page on every
            // commit (1.0 of ≈ 16 WAL frames). Without it SQLite gives an event the highest id plus
            // one, which never goes back as long as the newest event stays: retention keeps it
            // (`Store.retentionDeletes`). Only the table's declaration changes; its b-tree is the
            // same either way, so the text in `sqlite_schema` is edited in place, by SQLite's own
            // procedure for changes that leave the file's content as it is
            // (https://www.sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
            // Changes"), instead of copying every event into a new table. A table emptied before
            // this step may have filed ids above the next one: the mark comes down to the highest.
            let version = try Int.fetchOne(db, sql: "PRAGMA schema_version") ?? 0
            try db.execute(sql: """
                PRAGMA writable_schema = ON;
                UPDATE sqlite_schema SET sql = replace(sql, 'id INTEGER PRIMARY KEY AUTOINCREMENT', 'id INTEGER PRIMARY KEY')
                    WHERE type = 'table' AND name = 'events';
                PRAGMA schema_version = \(version + 1);
                PRAGMA writable_schema = OFF;
                DELETE FROM sqlite_sequence WHERE name = 'events';
                UPDATE session_events_indexed SET upto = min(upto, (SELECT coalesce(max(id), 0) FROM events));
                """)
        }
        migrator.registerMigration("v21-payment-orders-retained") { db in
            // Payment orders were kept forever. A session's order now goes with the session
            // (retention deletes ended sessions by age), and an order made through the merchant API
            // alone goes by its own age, found through an index that holds only those: a session's
            // order adds no entry, so a payment's commits write no more pages than before. The orders
            // of sessions already deleted go now.
            try db.execute(sql: """
                CREATE TRIGGER sessions_deleted_orders AFTER DELETE ON sessions WHEN old.payee_reference IS NOT NULL BEGIN
                    DELETE FROM payment_orders WHERE payee_reference = old.payee_reference;
                END;
                CREATE INDEX payment_orders_without_session ON payment_orders(created_at_ms) WHERE session_id IS NULL;
                DELETE FROM payment_orders WHERE session_id IS NOT NULL AND NOT EXISTS (SELECT 1 FROM sessions WHERE id = session_id);
                """)
        }
        migrator.registerMigration("v22-event-ids-as-bytes") { _ in
            // No table changes: from here on an event's session id and trace id may be kept as
            // their 16 bytes (see `StoredID`). The step marks the file, so that a build which does
            // not know that refuses it (`Store.open`) instead of reading those ids as text.
        }
        return migrator
    }
}
